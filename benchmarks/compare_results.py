"""Each results row on the dense KG beside the same row on the sparse KG, and errors by stage before and after.

    .venv/bin/python benchmarks/compare_results.py [--old benchmarks/results/sparse-kg] [--new benchmarks/results]
        [--before "sparse KG"] [--after "dense KG"]

Prints two Markdown tables: the metrics (old -> new) of every summary that both folders hold, then each run's
error counts by pipeline stage (planner, recall, reconstruct, kg, empty, wrong answer, ...), old / new.
A direct-SPARQL ablation inside a run gets its own row.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

METRICS = ("f1", "hits@1", "ehr", "ged")


def rows(folder: Path) -> dict[str, dict]:
    out = {}
    for path in sorted({*folder.glob("*_test*_*.json"), *folder.glob("*_dev_*.json")}):
        data = json.loads(path.read_text(encoding="utf-8"))
        if "f1" not in data:
            continue
        out[path.stem] = data
        if data.get("ablation"):
            out[path.stem + " (direct SPARQL)"] = data["ablation"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", default="benchmarks/results/sparse-kg")
    ap.add_argument("--new", default="benchmarks/results")
    ap.add_argument("--before", default="sparse KG", help="what the old folder's runs are, for the headers")
    ap.add_argument("--after", default="dense KG", help="what the new folder's runs are")
    args = ap.parse_args()
    old, new = rows(Path(args.old)), rows(Path(args.new))
    both = [k for k in new if k in old]
    print(f"| run | questions | F1 {args.before} -> {args.after} | Hits@1 | EHR | GED |")
    print("|---|---|---|---|---|---|")
    for k in both:
        o, n = old[k], new[k]
        cells = [f"{o[m]:.3f} -> **{n[m]:.3f}**" if m == "f1" else f"{o[m]:.3f} -> {n[m]:.3f}" for m in METRICS]
        print(f"| {k} | {n.get('questions', o.get('questions', ''))} | " + " | ".join(cells) + " |")
    print()
    print(f"| run | errors by stage, {args.before} | {args.after} |")
    print("|---|---|---|")
    for k in both:
        def fmt(errors: dict) -> str:
            return ", ".join(f"{stage} {count}" for stage, count in sorted(errors.items())) or "none"

        print(f"| {k} | {fmt(old[k].get('errors') or {})} | {fmt(new[k].get('errors') or {})} |")


if __name__ == "__main__":
    main()
