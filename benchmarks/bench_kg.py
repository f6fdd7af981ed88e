"""Load throughput and gold-query latency: embedded Oxigraph vs a private Virtuoso, side by side.

    .venv/bin/python benchmarks/bench_kg.py [--data FILE.nq.gz] [--dataset webqsp] [--split test] [--json]

Default data: data/kg/benchmark.nq.gz. While it does not exist, the GoG gold-path
triples of WebQSP and CWQ test plus their names are used instead (say so in any
number you report). Virtuoso is skipped with a note when it is not installed or
does not start (``scripts/virtuoso.sh install``).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memq import datasets  # noqa: E402
from memq.errors import KnowledgeGraphError  # noqa: E402
from memq.kg import EndpointConfig, OxigraphStore, SparqlEndpoint, VirtuosoConfig, VirtuosoServer  # noqa: E402
from memq.kg.check import check_gold  # noqa: E402
from memq.sparql.model import FB  # noqa: E402


def gog_fallback(out: Path) -> Path:
    """All GoG gold-path triples (WebQSP + CWQ test) with English names, as N-Quads."""
    triples: set[tuple[str, str, str]] = set()
    for name in ("gog_webqsp_test_triples.tsv.gz", "gog_cwq_test_triples.tsv.gz"):
        with gzip.open(datasets.data_path("freebase_subgraph", name), "rt", encoding="utf-8") as fh:
            reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
            next(reader)
            triples.update((r[0], r[1], r[2]) for r in reader)
    names = datasets.mid_names()
    graph = "<http://memq.dev/graph/real>"
    with gzip.open(out, "wt", encoding="utf-8") as fh:
        for s, p, o in sorted(triples):
            fh.write(f"<{FB}{s}> <{FB}{p}> <{FB}{o}> {graph} .\n")
        for node in sorted({t[0] for t in triples} | {t[2] for t in triples}):
            if node in names:
                text = names[node].replace("\\", "\\\\").replace('"', '\\"')
                fh.write(f'<{FB}{node}> <{FB}type.object.name> "{text}"@en {graph} .\n')
    return out


def run_check(kg, questions, timeout) -> dict:
    check_gold(kg, questions[:100], timeout=timeout)  # warm-up: caches, worker process, server buffers
    summary = check_gold(kg, questions, timeout=timeout)
    return {k: summary[k] for k in ("queries", "executed", "exact", "seconds")} | {
        "p50_ms": summary["latency_ms"]["p50"], "p95_ms": summary["latency_ms"]["p95"]}


def bench_oxigraph(data: Path, questions, tmp: Path) -> list[dict]:
    rows = []
    started = time.perf_counter()
    store = OxigraphStore()
    quads = store.load(data)
    load_s = time.perf_counter() - started
    rows.append({"backend": "oxigraph (memory, inline)", "quads": quads, "load_s": round(load_s, 2),
                 "quads_per_s": round(quads / load_s)} | run_check(store, questions, None))
    rows.append({"backend": "oxigraph (memory, timeout worker)", "quads": quads, "load_s": None,
                 "quads_per_s": None} | run_check(store, questions, 60.0))
    store.close()
    started = time.perf_counter()
    disk = OxigraphStore(tmp / "oxigraph")
    quads = disk.load(data)
    load_s = time.perf_counter() - started
    rows.append({"backend": "oxigraph (disk, inline)", "quads": quads, "load_s": round(load_s, 2),
                 "quads_per_s": round(quads / load_s)} | run_check(disk, questions, None))
    return rows


def bench_virtuoso(data: Path, questions, tmp: Path, memory_gb: float) -> list[dict]:
    try:
        with VirtuosoServer(tmp / "virtuoso", VirtuosoConfig(memory_gb=memory_gb, max_time=120)) as server:
            started = time.perf_counter()
            quads = server.load(data)
            load_s = time.perf_counter() - started
            endpoint = SparqlEndpoint(server.sparql_url, EndpointConfig(timeout=120))
            row = {"backend": "virtuoso (HTTP)", "quads": quads, "load_s": round(load_s, 2),
                   "quads_per_s": round(quads / load_s)} | run_check(endpoint, questions, 120.0)
            row["truncated"] = endpoint.truncated
            return [row]
    except KnowledgeGraphError as exc:
        print(f"note: Virtuoso skipped: {exc}", file=sys.stderr)
        return []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, help="RDF file (default data/kg/benchmark.nq.gz)")
    parser.add_argument("--dataset", default="webqsp", choices=datasets.DATASETS)
    parser.add_argument("--split", default="test", choices=datasets.SPLITS)
    parser.add_argument("--limit", type=int, default=0, help="only the first N questions")
    parser.add_argument("--memory-gb", type=float, default=1.0, help="Virtuoso buffer memory")
    parser.add_argument("--no-virtuoso", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory(prefix="memq-bench-kg-") as tmpdir:
        tmp = Path(tmpdir)
        data = args.data
        if data is None:
            default = datasets.DATA_DIR / "kg" / "benchmark.nq.gz"
            if default.is_file():
                data = default
            else:
                print("note: data/kg/benchmark.nq.gz missing; using the GoG gold-path triples instead",
                      file=sys.stderr)
                data = gog_fallback(tmp / "gog.nq.gz")
        questions = datasets.load(args.dataset, args.split)
        if args.limit:
            questions = questions[: args.limit]
        rows = bench_oxigraph(data, questions, tmp)
        if not args.no_virtuoso:
            rows += bench_virtuoso(data, questions, tmp, args.memory_gb)
    if args.json:
        print(json.dumps({"data": str(data), "dataset": args.dataset, "split": args.split, "rows": rows}, indent=1))
        return 0
    print(f"data: {data.name}; gold queries: {args.dataset}/{args.split}")
    cols = ["backend", "quads", "load_s", "quads_per_s", "queries", "executed", "exact", "p50_ms", "p95_ms"]
    widths = [34, 10, 8, 12, 9, 10, 7, 9, 9]
    print("".join(f"{c:>{w}}" if i else f"{c:<{w}}" for i, (c, w) in enumerate(zip(cols, widths, strict=True))))
    for row in rows:
        cells = ["-" if row.get(c) is None else str(row[c]) for c in cols]
        print("".join(f"{v:>{w}}" if i else f"{v:<{w}}" for i, (v, w) in enumerate(zip(cells, widths, strict=True))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
