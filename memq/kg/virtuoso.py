"""Run a private Virtuoso server: start, bulk-load, stop (tests, benchmarks, users).

It uses Debian's ``virtuoso-opensource`` binaries (``virtuoso-t``, ``isql-vt``),
never the system service: each server gets its own database directory, its own
``virtuoso.ini`` there, and free ports on 127.0.0.1.

>>> with VirtuosoServer("/tmp/vdb") as server:          # doctest: +SKIP
...     server.load("data/kg/benchmark.nq.gz")
...     SparqlEndpoint(server.sparql_url).select("SELECT * WHERE { ?s ?p ?o } LIMIT 1")

Command line (what ``scripts/virtuoso.sh`` calls)::

    python -m memq.kg.virtuoso start DB_DIR [--http-port N] [--isql-port N] [--memory-gb G]
    python -m memq.kg.virtuoso load DB_DIR FILE [--graph IRI]
    python -m memq.kg.virtuoso stop DB_DIR
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from memq.errors import KnowledgeGraphError

DEFAULT_GRAPH = "http://memq.dev/graph/default"
STATE_FILE = "memq-virtuoso.json"
INSTALL_HINT = ("install it with: DEBIAN_FRONTEND=noninteractive apt-get install -y virtuoso-opensource "
                "(or run scripts/virtuoso.sh install)")

INI_TEMPLATE = """\
; written by memq.kg.virtuoso for a private server; see docs/virtuoso.md
[Database]
DatabaseFile       = {db}/virtuoso.db
ErrorLogFile       = {db}/virtuoso.log
LockFile           = {db}/virtuoso.lck
TransactionFile    = {db}/virtuoso.trx
xa_persistent_file = {db}/virtuoso.pxa
ErrorLogLevel      = 7
FileExtend         = 200
MaxCheckpointRemap = 2000
Striping           = 0
TempStorage        = TempDatabase

[TempDatabase]
DatabaseFile       = {db}/virtuoso-temp.db
TransactionFile    = {db}/virtuoso-temp.trx
MaxCheckpointRemap = 2000
Striping           = 0

[Parameters]
ServerPort               = {host}:{isql_port}
DisableUnixSocket        = 1
MaxClientConnections     = 10
CheckpointInterval       = 60
O_DIRECT                 = 0
CaseMode                 = 2
MaxStaticCursorRows      = 5000
AllowOSCalls             = 0
DirsAllowed              = ., {db}
ThreadsPerQuery          = {threads}
AsyncQueueMaxThreads     = 10
MaxQueryMem              = {query_mem}
NumberOfBuffers          = {buffers}
MaxDirtyBuffers          = {dirty}

[HTTPServer]
ServerPort                  = {host}:{http_port}
ServerRoot                  = {db}
MaxClientConnections        = 10
ServerThreads               = 10
MaxKeepAlives               = 10
KeepAliveTimeout            = 10
HTTPThreadSize              = 280000
Charset                     = UTF-8
EnabledGzipContent          = 1

[Client]
SQL_PREFETCH_ROWS  = 100
SQL_PREFETCH_BYTES = 16000
SQL_QUERY_TIMEOUT  = 0
SQL_TXN_TIMEOUT    = 0

[SPARQL]
ResultSetMaxRows           = {max_rows}
MaxQueryCostEstimationTime = {max_cost}
MaxQueryExecutionTime      = {max_time}
DefaultGraph               =
"""


@dataclass(frozen=True)
class VirtuosoConfig:
    """Settings of a private server. ``None`` ports are chosen free at start.

    ``memory_gb`` sizes the page buffers (Virtuoso's rule: 85,000 8-KB buffers
    per GB). ``max_rows`` is ``ResultSetMaxRows``: larger results are cut to it.
    ``max_time`` is ``MaxQueryExecutionTime`` in seconds (0: none); Virtuoso then
    returns partial ("anytime") results that :class:`~memq.kg.endpoint.SparqlEndpoint`
    detects.
    """

    host: str = "127.0.0.1"
    http_port: int | None = None
    isql_port: int | None = None
    memory_gb: float = 0.5
    threads: int = 2
    max_rows: int = 10000
    max_time: int = 0
    max_cost: int = 0
    password: str = "dba"
    binary: str = "virtuoso-t"
    isql: str = "isql-vt"
    start_timeout: float = 120.0

    def __post_init__(self) -> None:
        if self.memory_gb <= 0:
            raise ValueError(f"memory_gb must be positive, got {self.memory_gb!r}")
        if self.max_rows <= 0:
            raise ValueError(f"max_rows must be positive, got {self.max_rows!r}")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def find_binaries(config: VirtuosoConfig = VirtuosoConfig()) -> tuple[str, str]:
    """Full paths of ``virtuoso-t`` and ``isql-vt``; raises naming what is missing."""
    found = [shutil.which(config.binary), shutil.which(config.isql)]
    missing = [name for name, path in zip((config.binary, config.isql), found, strict=True) if path is None]
    if missing:
        raise KnowledgeGraphError(f"Virtuoso not installed ({', '.join(missing)} not on PATH); {INSTALL_HINT}")
    return found[0], found[1]  # type: ignore[return-value]


def _sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


class VirtuosoServer:
    """A private Virtuoso server in ``db_dir`` (created if needed); a context manager.

    ``start()`` writes ``db_dir/virtuoso.ini``, starts ``virtuoso-t`` in its own
    process group and waits until SPARQL answers over HTTP; ``stop()`` shuts it
    down (``shutdown`` over ISQL, then SIGTERM, then SIGKILL).
    """

    def __init__(self, db_dir: str | Path, config: VirtuosoConfig = VirtuosoConfig()) -> None:
        self.db_dir = Path(db_dir).resolve()
        self.config = config
        self._proc: subprocess.Popen | None = None
        self.pid: int | None = None

    @property
    def sparql_url(self) -> str:
        return f"http://{self.config.host}:{self.config.http_port}/sparql"

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> VirtuosoServer:
        binary, _ = find_binaries(self.config)
        self.db_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.config
        self.config = cfg = replace(cfg, http_port=cfg.http_port or free_port(cfg.host),
                                    isql_port=cfg.isql_port or free_port(cfg.host))
        buffers = max(2000, int(cfg.memory_gb * 85000))
        ini = self.db_dir / "virtuoso.ini"
        ini.write_text(INI_TEMPLATE.format(
            db=self.db_dir, host=cfg.host, http_port=cfg.http_port, isql_port=cfg.isql_port,
            threads=cfg.threads, query_mem=f"{max(1, int(cfg.memory_gb * 1024 // 2))}M",
            buffers=buffers, dirty=buffers * 3 // 4, max_rows=cfg.max_rows,
            max_time=cfg.max_time, max_cost=cfg.max_cost))
        with open(self.db_dir / "virtuoso.stdout", "ab") as out:
            self._proc = subprocess.Popen([binary, "+foreground", "+configfile", str(ini)],
                                          cwd=self.db_dir, stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True)
        self.pid = self._proc.pid
        self._write_state()
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _write_state(self) -> None:
        state = {"pid": self.pid, "config": asdict(self.config)}
        tmp = self.db_dir / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        tmp.replace(self.db_dir / STATE_FILE)

    @classmethod
    def attach(cls, db_dir: str | Path) -> VirtuosoServer:
        """The server that :meth:`start` left running in ``db_dir`` (for ``load``/``stop``)."""
        db_dir = Path(db_dir).resolve()
        try:
            state = json.loads((db_dir / STATE_FILE).read_text())
        except (OSError, ValueError) as exc:
            raise KnowledgeGraphError(f"no memq Virtuoso server state in {db_dir}: {exc}") from exc
        server = cls(db_dir, VirtuosoConfig(**state["config"]))
        server.pid = state["pid"]
        return server

    def _alive(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        if self.pid is None:
            return False
        try:
            os.kill(self.pid, 0)
        except OSError:
            return False
        return True

    def _log_tail(self, lines: int = 15) -> str:
        for name in ("virtuoso.log", "virtuoso.stdout"):
            path = self.db_dir / name
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                return f"{path}:\n" + "\n".join(tail)
        return "(no log)"

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.config.start_timeout
        query = urllib.parse.urlencode({"query": "ASK { ?s ?p ?o }", "format": "application/sparql-results+json"})
        while time.monotonic() < deadline:
            if not self._alive():
                raise KnowledgeGraphError(f"Virtuoso exited while starting in {self.db_dir}; {self._log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.sparql_url}?{query}", timeout=5) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise KnowledgeGraphError(f"Virtuoso at {self.sparql_url} not ready after "
                                  f"{self.config.start_timeout:g} s; {self._log_tail()}")

    def stop(self, timeout: float = 30.0) -> None:
        """Shut the server down; safe to call twice."""
        if not self._alive():
            self._proc = None
            return
        try:
            self.isql("shutdown;", timeout=timeout)
        except KnowledgeGraphError:
            pass
        if not self._wait_exit(timeout) and self.pid is not None:
            os.killpg(self.pid, signal.SIGTERM)
            if not self._wait_exit(10):
                os.killpg(self.pid, signal.SIGKILL)
                self._wait_exit(10)
        self._proc = None

    def _wait_exit(self, timeout: float) -> bool:
        if self._proc is not None:
            try:
                self._proc.wait(timeout)
                return True
            except subprocess.TimeoutExpired:
                return False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self._alive():
                return True
            time.sleep(0.2)
        return False

    def __enter__(self) -> VirtuosoServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ----------------------------------------------------------------- SQL and loading

    def isql(self, sql: str, timeout: float = 600.0) -> str:
        """Run SQL statements through ``isql-vt``; output text. Raises on a SQL error."""
        _, isql = find_binaries(self.config)
        cmd = [isql, f"{self.config.host}:{self.config.isql_port}", "dba", self.config.password,
               "VERBOSE=OFF", "BANNER=OFF", "PROMPT=OFF", "ECHO=OFF", f"exec={sql}"]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise KnowledgeGraphError(f"isql timed out after {timeout:g} s on {sql[:200]!r}") from exc
        out = done.stdout + done.stderr
        if done.returncode != 0 or "*** Error" in out:
            raise KnowledgeGraphError(f"isql failed on {sql[:200]!r}: {' '.join(out.split())[:500]}")
        return out

    def count_quads(self) -> int:
        """Quads in the whole database (Virtuoso's own system graphs included)."""
        out = self.isql("SELECT COUNT(*) FROM DB.DBA.RDF_QUAD;")
        numbers = re.findall(r"^\s*(\d+)\s*$", out, re.MULTILINE)
        if not numbers:
            raise KnowledgeGraphError(f"cannot read the quad count from isql output: {out[:300]!r}")
        return int(numbers[-1])

    def load(self, data: str | Path, graph: str = DEFAULT_GRAPH, timeout: float = 3600.0) -> int:
        """Bulk-load an N-Triples/N-Quads/Turtle file (``.gz`` too) with ``ld_dir`` + ``rdf_loader_run``.

        Quads keep their graph; triples go to ``graph``. Returns how many quads
        the database gained.
        """
        data = Path(data).resolve()
        if not data.is_file():
            raise KnowledgeGraphError(f"RDF file not found: {data}")
        stage = self.db_dir / "load"
        if stage.exists():
            shutil.rmtree(stage)
        stage.mkdir()
        link = stage / data.name
        try:
            link.symlink_to(data)
        except OSError:
            shutil.copyfile(data, link)
        before = self.count_quads()
        self.isql(f"ld_dir({_sql_string(str(stage))}, {_sql_string(data.name)}, {_sql_string(graph)});"
                  " rdf_loader_run(); checkpoint;", timeout=timeout)
        errors = self.isql("SELECT ll_file, ll_error FROM DB.DBA.load_list WHERE ll_error IS NOT NULL;")
        if data.name in errors:
            raise KnowledgeGraphError(f"Virtuoso could not load {data}: {' '.join(errors.split())[:500]}")
        return self.count_quads() - before


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memq.kg.virtuoso", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    start = sub.add_parser("start", help="start a private server in DB_DIR and leave it running")
    start.add_argument("db_dir")
    start.add_argument("--http-port", type=int)
    start.add_argument("--isql-port", type=int)
    start.add_argument("--memory-gb", type=float, default=VirtuosoConfig.memory_gb)
    start.add_argument("--max-rows", type=int, default=VirtuosoConfig.max_rows)
    load = sub.add_parser("load", help="bulk-load an RDF file into the server running in DB_DIR")
    load.add_argument("db_dir")
    load.add_argument("file")
    load.add_argument("--graph", default=DEFAULT_GRAPH, help="graph for triples (quads keep theirs)")
    stop = sub.add_parser("stop", help="stop the server running in DB_DIR")
    stop.add_argument("db_dir")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "start":
            server = VirtuosoServer(args.db_dir, VirtuosoConfig(
                http_port=args.http_port, isql_port=args.isql_port, memory_gb=args.memory_gb,
                max_rows=args.max_rows)).start()
            print(server.sparql_url)
        elif args.cmd == "load":
            server = VirtuosoServer.attach(args.db_dir)
            t0 = time.perf_counter()
            n = server.load(args.file, args.graph)
            print(f"loaded {n} quads in {time.perf_counter() - t0:.1f} s; endpoint {server.sparql_url}")
        else:
            VirtuosoServer.attach(args.db_dir).stop()
    except KnowledgeGraphError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
