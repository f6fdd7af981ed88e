"""How long a fresh process takes to open the default KG: the first time (building the cached store) and after.

    .venv/bin/python benchmarks/bench_kg_open.py [--kg data/kg/benchmark.nq.gz] [--runs 3] [--json FILE]

Each measurement is a new Python process that imports memq, opens the KG the way `memq.answer()` does
(`memq.pipeline.open_kg`: the on-disk Oxigraph store under the memq cache, checked against the file's hash)
and runs one query at a topic entity. The first run gets an empty cache folder, so it builds the store.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBE = """
import time
started = time.perf_counter()
from memq.pipeline import open_kg
kg = open_kg({kg!r})
rows = kg.select("SELECT ?p WHERE {{ <http://rdf.freebase.com/ns/m.03_r3> ?p ?o }} LIMIT 5")
print(round(time.perf_counter() - started, 3), len(rows))
"""


def probe(kg: str, cache: str) -> tuple[float, float]:
    """(wall seconds of the whole process, seconds inside it from import to the first rows)."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PROBE.format(kg=kg)], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "MEMQ_CACHE_DIR": cache}, check=True)
    wall = time.perf_counter() - started
    return round(wall, 3), float(done.stdout.split()[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kg", default="data/kg/benchmark.nq.gz")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        first = probe(args.kg, cache)
        print(f"first open (builds the cached store): {first[0]:.1f} s wall ({first[1]:.1f} s in process)")
        later = [probe(args.kg, cache) for _ in range(args.runs)]
    walls = [w for w, _ in later]
    print(f"later opens in a fresh process: median {statistics.median(walls):.2f} s wall "
          f"(runs: {', '.join(f'{w:.2f}' for w in walls)}; import + open + first query inside: "
          f"{statistics.median(x for _, x in later):.2f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "kg": args.kg, "first_open_s": first[0], "open_s": walls, "open_median_s": statistics.median(walls),
            "device": f"CPU, {os.cpu_count()} cores", "command": "benchmarks/bench_kg_open.py"}, indent=1) + "\n")


if __name__ == "__main__":
    main()
