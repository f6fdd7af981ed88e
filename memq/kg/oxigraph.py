"""An embedded Oxigraph store (pyoxigraph): in memory or on disk, bulk load, timeouts.

Queries run over the union of all named graphs and the default graph, so a
benchmark KG split into ``<http://memq.dev/graph/real>`` and
``<http://memq.dev/graph/synthetic>`` answers like one graph. Every query goes
through the dialect rewrite (:func:`memq.kg.dialect.to_standard`) first, so the
Virtuoso-dialect gold queries of WebQSP/CWQ run as written.

Timeouts. pyoxigraph has no way to cancel a query. With a ``timeout`` the query
runs elsewhere and is abandoned when the time is up:

* ``timeout_mode="process"`` (default where ``fork`` exists): one long-lived
  worker process, forked from this one, runs timed queries. On a timeout the
  worker is killed (SIGKILL), so the slow query **really stops** and takes no
  more CPU; the next timed query forks a fresh worker (a few ms; the in-memory
  data is shared copy-on-write). An on-disk store is reopened read-only in the
  worker. A worker is also replaced after every :meth:`OxigraphStore.load`.
  The worker only ever runs pyoxigraph, so forking a process that has other
  threads (torch, tqdm) is fine; do not share one store between threads that
  query it with timeouts at the same time (one worker, one pipe).
* ``timeout_mode="thread"``: the query runs in a daemon thread that checks a
  stop flag between result rows. A query that produces rows stops at the next
  row; a query that computes a long time before its first row (ORDER BY, an
  aggregate, a join with no results yet) **keeps running in the background**
  until it finishes, and keeps using a CPU core meanwhile.

Queries without a timeout run in the calling thread.
"""

from __future__ import annotations

import gzip
import json
import logging
import multiprocessing
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyoxigraph as ox

from memq.errors import KnowledgeGraphError
from memq.files import sha256_file
from memq.kg import dialect
from memq.kg.base import Row, Term, lookup_names, make_literal, query_error
from memq.sparql.model import XSD, Iri

log = logging.getLogger(__name__)

TIMEOUT_MODES = ("process", "thread")
DONE_MARKER = "memq-store.json"
_XSD_DATETIME = ox.NamedNode(XSD + "dateTime")
_DATEISH = re.compile(r"^(-?\d{4})(?:-(\d{2}))?(?:-(\d{2}))?(?:T(\d{2}:\d{2}:\d{2}(?:\.\d+)?))?"
                      r"(Z|[+-]\d{2}:\d{2})?$")
_FORMATS = {"nt": ox.RdfFormat.N_TRIPLES, "nq": ox.RdfFormat.N_QUADS, "ttl": ox.RdfFormat.TURTLE,
            "trig": ox.RdfFormat.TRIG}


@dataclass(frozen=True)
class OxigraphConfig:
    """How an :class:`OxigraphStore` runs queries.

    ``timeout`` is the default per-query timeout in seconds (``None``: no limit);
    ``rewrite`` turns the dialect rewrite on; ``timeout_mode`` is ``"process"``
    or ``"thread"`` (see the module docstring); ``virtuoso_dates`` makes
    dates behave as in Virtuoso, where the gold queries were written:
    ``xsd:dateTime(...)`` casts years and year-months (:func:`lenient_datetime`),
    so the gold time filters and ORDER BY keys work on Freebase's ``xsd:gYear``
    values, and ``dateTime(a) - dateTime(b) <= 0`` compares the two dates
    (:func:`memq.kg.dialect.virtuoso_dates`).
    """

    timeout: float | None = None
    timeout_mode: str = "process"
    rewrite: bool = True
    virtuoso_dates: bool = True

    def __post_init__(self) -> None:
        if self.timeout_mode not in TIMEOUT_MODES:
            raise ValueError(f"timeout_mode {self.timeout_mode!r}; expected one of {TIMEOUT_MODES}")
        if self.timeout is not None and self.timeout <= 0:
            raise ValueError(f"timeout must be positive, got {self.timeout!r}")


def default_cache_dir() -> Path:
    """``$MEMQ_CACHE_DIR``, else ``~/.cache/memq``."""
    env = os.environ.get("MEMQ_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "memq"


def rdf_format(path: Path) -> tuple[ox.RdfFormat, bool]:
    """The RDF format of ``path`` from its extension (``.nt``, ``.nq``, ``.ttl``, ``.trig``, each ``.gz`` too)."""
    suffixes = [s.lstrip(".").lower() for s in path.suffixes]
    gz = bool(suffixes) and suffixes[-1] == "gz"
    ext = suffixes[-2] if gz and len(suffixes) >= 2 else (suffixes[-1] if suffixes and not gz else "")
    if ext not in _FORMATS:
        raise ValueError(f"unknown RDF file type {path.name!r}; expected .nt, .nq, .ttl or .trig (optionally .gz)")
    return _FORMATS[ext], gz


def _encode(term) -> list | None:
    """A pyoxigraph term as a small JSON-able list (for the worker pipe)."""
    if term is None:
        return None
    if isinstance(term, ox.NamedNode):
        return ["i", term.value]
    if isinstance(term, ox.BlankNode):
        return ["i", "_:" + term.value]
    if isinstance(term, ox.Literal):
        return ["l", term.value, term.datatype.value, term.language]
    return ["l", str(term), None, None]


def _decode(item: list) -> Term:
    if item[0] == "i":
        return Iri(item[1])
    return make_literal(item[1], item[2], item[3])


def lenient_datetime(term) -> ox.Literal | None:
    """``xsd:dateTime(x)`` as Virtuoso computes it: years and months are padded.

    ``"2009"`` (``xsd:gYear`` or plain) gives ``2009-01-01T00:00:00``,
    ``"2009-05"`` gives ``2009-05-01T00:00:00``, a date gets midnight, a zone is
    kept. Anything else is a cast error (``None``), which makes a FILTER false;
    Virtuoso would fail the whole query instead.
    """
    if not isinstance(term, ox.Literal):
        return None
    match = _DATEISH.match(term.value.strip())
    if match is None:
        return None
    year, month, day, clock, zone = match.groups()
    value = f"{year}-{month or '01'}-{day or '01'}T{clock or '00:00:00'}{zone or ''}"
    return ox.Literal(value, datatype=_XSD_DATETIME)


def _run_encoded(store: ox.Store, text: str, stop: threading.Event | None = None,
                 virtuoso_dates: bool = True) -> list[dict]:
    """Run a standard query; rows as ``{var: encoded term}``. Raises whatever pyoxigraph raises."""
    functions: dict | None = {_XSD_DATETIME: lenient_datetime} if virtuoso_dates else None
    result = store.query(text, use_default_graph_as_union=True, custom_functions=functions)
    if not isinstance(result, ox.QuerySolutions):
        raise ValueError("not a SELECT query")
    names = [v.value for v in result.variables]
    rows = []
    for solution in result:
        if stop is not None and stop.is_set():
            break
        row = {}
        for name in names:
            value = solution[name]
            if value is not None:
                row[name] = _encode(value)
        rows.append(row)
    return rows


def _serve(store: ox.Store | None, path: str | None, conn, virtuoso_dates: bool) -> None:  # pragma: no cover
    """Worker process loop: read a query, answer ``{"rows": ...}`` or ``{"error": ...}``."""
    if path is not None:
        store = ox.Store.read_only(path)
    assert store is not None
    while True:
        try:
            text = conn.recv_bytes().decode("utf-8")
        except EOFError:
            return
        reply: dict
        try:
            reply = {"rows": _run_encoded(store, text, None, virtuoso_dates)}
        except Exception as exc:  # noqa: BLE001 - sent back and re-raised in the parent
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        conn.send_bytes(json.dumps(reply).encode("utf-8"))


class OxigraphStore:
    """A :class:`~memq.kg.base.KnowledgeGraph` on pyoxigraph.

    ``path=None`` keeps everything in memory; a directory path opens (or
    creates) an on-disk RocksDB store there.
    """

    def __init__(self, path: str | Path | None = None, config: OxigraphConfig = OxigraphConfig(), *,
                 read_only: bool = False) -> None:
        self.path = Path(path) if path is not None else None
        self.config = config
        self.read_only = read_only
        if read_only and self.path is None:
            raise ValueError("read_only needs the path of an on-disk store")
        try:
            if self.path is None:
                self._store = ox.Store()
            elif read_only:
                self._store = ox.Store.read_only(str(self.path))
            else:
                self._store = ox.Store(str(self.path))
        except OSError as exc:
            raise KnowledgeGraphError(f"cannot open Oxigraph store at {self.path}: {exc}") from exc
        self._worker: Any = None  # a fork-context Process
        self._conn: Any = None  # its multiprocessing Connection
        self._mode = config.timeout_mode
        if self._mode == "process" and "fork" not in multiprocessing.get_all_start_methods():
            log.warning("no fork() on this platform: Oxigraph timeouts use threads; "
                        "a timed-out query may keep running in the background")
            self._mode = "thread"

    @classmethod
    def cached(cls, data: str | Path, cache_dir: str | Path | None = None,
               config: OxigraphConfig = OxigraphConfig()) -> OxigraphStore:
        """A read-only on-disk store of the RDF file ``data``, built once per file content.

        The store lives in ``cache_dir`` (default ``$MEMQ_CACHE_DIR`` or
        ``~/.cache/memq``) under ``oxigraph/<file stem>-<sha256 prefix>``. It is
        built in a temporary directory and renamed into place, so a crash never
        leaves a half-loaded store behind.
        """
        data = Path(data)
        if not data.is_file():
            raise KnowledgeGraphError(f"RDF file not found: {data}")
        root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        name = data.name.split(".")[0]
        target = root / "oxigraph" / f"{name}-{sha256_file(data)[:16]}-ox{ox.__version__}"
        if not (target / DONE_MARKER).is_file():
            # a one-time cost worth telling a person about: the dense benchmark KG takes about a minute
            log.warning("first use of %s: building its on-disk Oxigraph store in %s (once per file content)",
                        data.name, target)
            started = time.perf_counter()
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=target.name + ".tmp-", dir=target.parent))
            try:
                builder = cls(tmp, config)
                count = builder.load(data)
                builder._store.optimize()
                del builder
                (tmp / DONE_MARKER).write_text(json.dumps({"source": str(data), "quads": count}))
                try:
                    tmp.rename(target)
                except OSError:  # another process finished the same store first
                    if not (target / DONE_MARKER).is_file():
                        raise
                    shutil.rmtree(tmp, ignore_errors=True)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            log.warning("built the Oxigraph store of %s: %d quads in %.0f s", data.name, count,
                        time.perf_counter() - started)
        return cls(target, config, read_only=True)

    @classmethod
    def from_file(cls, data: str | Path, path: str | Path | None = None,
                  config: OxigraphConfig = OxigraphConfig()) -> OxigraphStore:
        """A new store (in memory unless ``path``) holding the RDF file ``data``."""
        store = cls(path, config)
        store.load(data)
        return store

    # ----------------------------------------------------------------- loading

    def load(self, data: str | Path, graph: str | None = None) -> int:
        """Bulk-load an RDF file (N-Triples, N-Quads, Turtle, TriG; ``.gz`` too).

        ``graph`` puts triples of a triples-only format into that named graph
        (default: the default graph). Returns how many quads the store gained.
        """
        if self.read_only:
            raise KnowledgeGraphError(f"cannot load {data}: the store at {self.path} is open read-only")
        data = Path(data)
        fmt, gz = rdf_format(data)
        if not data.is_file():
            raise KnowledgeGraphError(f"RDF file not found: {data}")
        before = len(self._store)
        target = ox.NamedNode(graph) if graph else None
        try:
            if gz:
                with gzip.open(data, "rb") as fh:
                    self._store.bulk_load(fh, fmt, to_graph=target)  # type: ignore[arg-type]
            else:
                self._store.bulk_load(path=str(data), format=fmt, to_graph=target)
            if self.path is not None:
                self._store.flush()
        except (OSError, SyntaxError, ValueError) as exc:
            raise KnowledgeGraphError(f"cannot load {data} into Oxigraph: {exc}") from exc
        self._stop_worker()
        added = len(self._store) - before
        log.info("loaded %d quads from %s", added, data)
        return added

    def __len__(self) -> int:
        return len(self._store)

    # ----------------------------------------------------------------- queries

    def select(self, query: str, timeout: float | None = None) -> list[Row]:
        """Rows of a SELECT query; see :class:`~memq.kg.base.KnowledgeGraph`."""
        if not isinstance(query, str) or not query.strip():
            raise KnowledgeGraphError(f"empty SPARQL query: {query!r}")
        if self.config.rewrite:
            text = dialect.to_standard(query, dialect.virtuoso_dates if self.config.virtuoso_dates else None)
        else:
            text = query
        return self._run(text, query, timeout if timeout is not None else self.config.timeout)

    def names(self, ids: Iterable[str]) -> dict[str, str]:
        """English names of Freebase ids (``type.object.name``, ``@en`` preferred)."""
        return lookup_names(lambda q: self._run(q, q, self.config.timeout), ids)

    def _run(self, text: str, original: str, timeout: float | None) -> list[Row]:
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        if timeout is None:
            try:
                encoded = _run_encoded(self._store, text, None, self.config.virtuoso_dates)
            except Exception as exc:  # noqa: BLE001 - pyoxigraph raises several types
                raise query_error("Oxigraph query failed", original, exc) from exc
        elif self._mode == "process":
            encoded = self._run_in_worker(text, original, timeout)
        else:
            encoded = self._run_in_thread(text, original, timeout)
        return [{k: _decode(v) for k, v in row.items()} for row in encoded]

    def _run_in_thread(self, text: str, original: str, timeout: float) -> list[dict]:
        stop = threading.Event()
        box: dict = {}

        def work() -> None:
            try:
                box["rows"] = _run_encoded(self._store, text, stop, self.config.virtuoso_dates)
            except Exception as exc:  # noqa: BLE001 - re-raised below
                box["error"] = exc

        thread = threading.Thread(target=work, name="memq-oxigraph-query", daemon=True)
        thread.start()
        thread.join(timeout)
        if thread.is_alive():
            stop.set()
            log.warning("Oxigraph query abandoned after %.3g s; it may keep running in a thread", timeout)
            raise query_error(f"Oxigraph query timed out after {timeout:g} s", original, "time limit")
        if "error" in box:
            raise query_error("Oxigraph query failed", original, box["error"]) from box["error"]
        return box["rows"]

    def _start_worker(self) -> None:
        ctx = multiprocessing.get_context("fork")
        parent, child = ctx.Pipe()
        if self.path is not None and not self.read_only:
            self._store.flush()
        casts = self.config.virtuoso_dates
        args = ((None, str(self.path), child, casts) if self.path is not None
                else (self._store, None, child, casts))
        proc = ctx.Process(target=_serve, args=args, name="memq-oxigraph-worker", daemon=True)
        proc.start()
        child.close()
        self._worker, self._conn = proc, parent

    def _stop_worker(self) -> None:
        if self._worker is not None:
            self._conn.close()
            self._worker.kill()
            self._worker.join()
        self._worker = self._conn = None

    def _run_in_worker(self, text: str, original: str, timeout: float) -> list[dict]:
        if self._worker is None or not self._worker.is_alive():
            self._stop_worker()
            self._start_worker()
        try:
            self._conn.send_bytes(text.encode("utf-8"))
            ready = self._conn.poll(timeout)
            reply = json.loads(self._conn.recv_bytes()) if ready else None
        except (EOFError, OSError) as exc:
            self._stop_worker()
            raise query_error("Oxigraph worker process died", original, exc) from exc
        if reply is None:
            self._stop_worker()
            raise query_error(f"Oxigraph query timed out after {timeout:g} s (stopped)", original, "time limit")
        if "error" in reply:
            raise query_error("Oxigraph query failed", original, reply["error"])
        return reply["rows"]

    def close(self) -> None:
        """Stop the timeout worker, if any. The store itself closes when collected."""
        self._stop_worker()

    def __enter__(self) -> OxigraphStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._stop_worker()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
