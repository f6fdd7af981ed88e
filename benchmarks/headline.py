"""Print the README's headline results table (Markdown) from the run summaries.

    .venv/bin/python benchmarks/headline.py [--folder benchmarks/results] [--beside benchmarks/results/sparse-kg]

Each row reads one summary JSON written by `memq evaluate` (ROWS below says which); a row whose summary, or whose
direct-SPARQL ablation inside it, is missing prints "–" and is named on stderr. The table goes to stdout, ready
to paste; which file fed each row, and the KG it was measured on, go to stderr. With ``--beside OLD`` each F1,
Hits@1, EHR and GED cell also shows, in brackets, the same row from the summaries in OLD (the sparse KG's runs).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# (test set, system, summary file, part): part "run" is the summary itself, "ablation" the direct-SPARQL
# ablation answered in the same run (its metrics sit under the summary's "ablation" key).
ROWS = (
    # the memq run that answered beside the ablation (the fine-tuned planner's plans, re-scored)
    ("WebQSP test", "memq, fine-tuned planner", "webqsp_test_finetuned.json", "run"),
    ("WebQSP test", "memq, the same planner choosing grounded lines (CPU)", "webqsp_test_prune4.json", "run"),
    ("WebQSP test", "direct SPARQL (w/o PE, QRM)", "webqsp_test_finetuned.json", "ablation"),
    ("WebQSP test", "oracle plans", "webqsp_test_oracle.json", "run"),
    ("CWQ test", "memq, fine-tuned planner (0.42 epoch, H100)", "cwq_test_finetuned.json", "run"),
    ("CWQ test", "memq, hybrid: the same planner, grounded where its plan finds nothing", "cwq_test_hybrid.json",
     "run"),
    ("CWQ test", "memq, fine-tuned planner, 0.90 epoch (default; first 1,000)", "cwq_test1000_finetuned.json", "run"),
    ("CWQ test", "memq, hybrid with it (default; first 1,000)", "cwq_test1000_given_checks.json", "run"),
    ("CWQ test", "memq, few-shot planner (first 96)", "cwq_test_fewshot96.json", "run"),
    ("CWQ test", "direct SPARQL (w/o PE, QRM; 100 CPU steps; first 96)", "cwq_test_fewshot96.json", "ablation"),
    ("CWQ test", "oracle plans", "cwq_test_oracle.json", "run"),
)

# (header, summary key, format)
COLUMNS = (
    ("F1", "f1", "{:.3f}"),
    ("Hits@1", "hits@1", "{:.3f}"),
    ("EHR", "ehr", "{:.3f}"),
    ("GED", "ged", "{:.2f}"),
    ("p50 s", "p50_s", "{:.2f}"),
    ("LLM calls/q", "llm_calls_per_question", None),
    ("questions", "questions", "{:,}"),
)

MISSING = "–"
BESIDE = ("f1", "hits@1", "ehr", "ged")  # the cells --beside adds an earlier figure to


def metrics(folder: Path, name: str, part: str, row: str) -> dict | None:
    """The metrics of one row, or None (and a line on stderr) when the file or its ablation is missing."""
    path = folder / name
    if not path.is_file():
        print(f"headline: missing {path} (row {row}: printed as {MISSING})", file=sys.stderr)
        return None
    summary = json.loads(path.read_text(encoding="utf-8"))
    if part == "ablation":
        if not summary.get("ablation"):
            print(
                f"headline: {path} holds no direct-SPARQL ablation (row {row}: printed as {MISSING})", file=sys.stderr
            )
            return None
        # the ablation ran on the same KG as the run that holds it
        return {**summary["ablation"], "kg": summary.get("kg"), "kg_sha256": summary.get("kg_sha256")}
    return summary


def cell(value, fmt: str | None) -> str:
    if value is None:
        return MISSING
    if fmt is None:  # LLM calls per question: "1", or "1.25" when not whole
        return f"{value:.0f}" if float(value).is_integer() else f"{value:.2f}"
    return fmt.format(value)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folder", default="benchmarks/results", help="folder of summary JSONs")
    ap.add_argument("--beside",
                    help="a folder of earlier summaries, shown in brackets (e.g. benchmarks/results/sparse-kg)")
    args = ap.parse_args()
    folder = Path(args.folder)
    print("| test set | system | " + " | ".join(h for h, _, _ in COLUMNS) + " |")
    print("|---|---|" + "---:|" * len(COLUMNS))
    for test_set, system, name, part in ROWS:
        m = metrics(folder, name, part, f"{test_set}, {system}")
        cells = [cell(m.get(key) if m else None, fmt) for _, key, fmt in COLUMNS]
        if args.beside:
            old = metrics(Path(args.beside), name, part, f"{test_set}, {system} (beside)")
            cells = [f"{c} ({cell(old.get(key), fmt)})" if old and key in BESIDE else c
                     for c, (_, key, fmt) in zip(cells, COLUMNS, strict=True)]
        print(f"| {test_set} | {system} | " + " | ".join(cells) + " |")
        if m:
            kg = m.get("kg") or "?"
            sha = m.get("kg_sha256") or "no sha256 recorded"
            print(f"headline: {test_set}, {system}: {folder / name} [{part}], KG {kg} ({sha})", file=sys.stderr)


if __name__ == "__main__":
    main()
