"""Time to parse and decompose every gold query (WebQSP train+test, CWQ test, CWQ train+dev).

    .venv/bin/python benchmarks/bench_parse.py
"""

from __future__ import annotations

import platform
import time

from memq import datasets
from memq.decompose import decompose_query
from memq.errors import MemQError
from memq.sparql import parse_query, to_standard


def main() -> None:
    t0 = time.perf_counter()
    parses = [(q.id, p) for ds in ("webqsp", "cwq") for q in datasets.load(ds, "all") for p in q.parses]
    t_load = time.perf_counter() - t0
    parse_query.cache_clear()
    t0 = time.perf_counter()
    queries = [(qid, p, parse_query(p.sparql)) for qid, p in parses]
    t_parse = time.perf_counter() - t0
    t0 = time.perf_counter()
    failed = 0
    for qid, p, q in queries:
        try:
            decompose_query(q, qid, [m for m, _ in p.topic_entities])
        except MemQError:
            failed += 1
    t_decompose = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _, _, q in queries:
        to_standard(q)
    t_write = time.perf_counter() - t0
    print(f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}")
    print(f"gold queries:        {len(parses)}")
    print(f"load datasets:       {t_load:6.2f} s")
    print(f"parse:               {t_parse:6.2f} s  ({t_parse / len(parses) * 1e3:.3f} ms/query)")
    print(f"decompose:           {t_decompose:6.2f} s  ({failed} outside the statement language)")
    print(f"write standard:      {t_write:6.2f} s")
    print(f"parse + decompose:   {t_parse + t_decompose:6.2f} s  (target < 60 s)")


if __name__ == "__main__":
    main()
