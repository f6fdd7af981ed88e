"""Re-score every results row with stored plans on a KG: no model call, resumable.

    .venv/bin/python benchmarks/rescore.py [--kg data/kg/benchmark.nq.gz] [--out benchmarks/results] [ROW ...]

Each row is one `memq evaluate` run whose plans (and direct-SPARQL outputs) come from files under
benchmarks/results/, so only recall, reconstruction and execution run again. A row writes
OUT/NAME.json (the summary) and OUT/NAME.jsonl.gz (per question). A row stopped midway resumes from
OUT/NAME.jsonl, which is gzipped when the row finishes. Rows whose memory bank is not built
(`make memory-schema-full`, `make memory-schema-all`) are skipped with a message.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = "benchmarks/results"
SPARSE = f"{RESULTS}/sparse-kg"  # the per-question records of the runs on the sparse KG (version 1)
WEBQSP_ABLATION = ["--ablation", "direct-sparql", "--ablation-adapter", "benchmarks/ablation/webqsp_direct_sparql"]
CWQ_ABLATION = ["--ablation", "direct-sparql", "--ablation-adapter", "benchmarks/ablation/cwq_direct_sparql"]
WEBQSP = ["--dataset", "webqsp", "--split", "test"]
CWQ = ["--dataset", "cwq", "--split", "test", "--memory", "memory_bank/cwq"]
# the CWQ planner these rows' plans were made with (0.42 epoch on an H100), no longer the default one
CWQ_H100 = ["--adapter", "benchmarks/results/gpu-adapters/cwq-h100"]

# name -> the evaluate flags; every plan comes from a file, so no row calls a model
ROWS: dict[str, list[str]] = {
    "webqsp_test_oracle": [*WEBQSP, "--planner", "oracle"],
    "webqsp_test_oracle_schema": [*WEBQSP, "--planner", "oracle", "--memory", "memory_bank/webqsp+schema"],
    "webqsp_test_oracle_schema_base": [*WEBQSP, "--planner", "oracle", "--memory", "memory_bank/webqsp+schema+base"],
    "webqsp_test_finetuned": [*WEBQSP, "--planner", "finetuned", *WEBQSP_ABLATION,
                              "--plans", f"{RESULTS}/webqsp_test_finetuned.planned.jsonl.gz"],
    "webqsp_test_grounded": [*WEBQSP, "--planner", "grounded",
                             "--plans", f"{RESULTS}/webqsp_test_grounded.planned.jsonl.gz"],
    "webqsp_test_grounded_noprior": [*WEBQSP, "--planner", "grounded", "--limit", "200", "--prior", "0",
                                     "--coverage", "0",
                                     "--plans", f"{RESULTS}/webqsp_test_grounded_noprior.planned.jsonl.gz"],
    # the grounded planner with the statement ranker (memory_bank/ranker), its two shards' first 993 questions, and
    # the model alone on the same 993 (and on the first 545, the prefix an earlier session had)
    "webqsp_test_ranked": [*WEBQSP, "--planner", "grounded", "--limit", "993", "--ranker", "memory_bank/ranker",
                           "--plans", f"{RESULTS}/webqsp_test_ranked.s1.planned.jsonl.gz",
                           f"{RESULTS}/webqsp_test_ranked.s2.planned.jsonl.gz"],
    "webqsp_test993_llmonly": [*WEBQSP, "--planner", "grounded", "--limit", "993", "--ranker", "none",
                               "--plans", f"{RESULTS}/webqsp_test_grounded.planned.jsonl.gz"],
    "webqsp_test545_llmonly": [*WEBQSP, "--planner", "grounded", "--limit", "545", "--ranker", "none",
                               "--plans", f"{RESULTS}/webqsp_test_grounded.planned.jsonl.gz"],
    # the hybrid planner: free generation's plans, and the grounded planner's saved beams as the rescues of the
    # questions whose free plan finds nothing (the grounded planner is deterministic; docs/planner.md)
    "webqsp_test_hybrid": [*WEBQSP, "--planner", "hybrid", *WEBQSP_ABLATION,
                           "--plans", f"{RESULTS}/webqsp_test_finetuned.planned.jsonl.gz",
                           f"{RESULTS}/webqsp_test_grounded.planned.jsonl.gz"],
    "webqsp_dev_hybrid": ["--dataset", "webqsp", "--split", "dev", "--planner", "hybrid", "--limit", "150",
                          "--plans", f"{RESULTS}/webqsp_dev_finetuned.planned.jsonl.gz",
                          f"{RESULTS}/webqsp_dev_grounded.planned.jsonl.gz"],
    "webqsp_test_finetuned_schema": [*WEBQSP, "--planner", "finetuned", "--memory", "memory_bank/webqsp+schema",
                                     "--plans", f"{RESULTS}/webqsp_test_finetuned.planned.jsonl.gz"],
    "webqsp_test_fewshot60": [*WEBQSP, "--planner", "fewshot", "--limit", "60",
                              "--plans", f"{RESULTS}/webqsp_test_fewshot60.planned.jsonl.gz"],
    "cwq_test_oracle": [*CWQ, "--planner", "oracle"],
    "cwq_test_fewshot24": [*CWQ, "--planner", "fewshot", "--limit", "24",
                           "--plans", f"{RESULTS}/cwq_test_fewshot24.planned.jsonl.gz"],
    "cwq_test_fewshot96": [*CWQ, "--planner", "fewshot", "--limit", "96", *CWQ_ABLATION,
                           "--plans", f"{SPARSE}/cwq_test_fewshot96.jsonl.gz"],
    "cwq_test_finetuned_webqsp24": [*CWQ, "--planner", "finetuned", "--adapter", "memory_bank/webqsp/planner",
                                    "--limit", "24",
                                    "--plans", f"{RESULTS}/cwq_test_finetuned_webqsp24.planned.jsonl.gz"],
    "cwq_test_finetuned": [*CWQ, "--planner", "finetuned", *CWQ_H100,
                           "--plans", f"{RESULTS}/cwq_test_finetuned.planned.jsonl.gz"],
    # the hybrid planner on a prefix of CWQ test (docs/planner.md); the planned file also holds the records made past it
    "cwq_test_hybrid": [*CWQ, "--planner", "hybrid", *CWQ_H100,
                        "--plans", f"{RESULTS}/cwq_test_hybrid.planned.jsonl.gz"],
    # a prefix: docs/planner.md
    "cwq_test_grounded": [*CWQ, "--planner", "grounded", *CWQ_H100, "--limit", "100", "--coverage", "0",
                          "--plans", f"{RESULTS}/cwq_test_grounded.planned.jsonl.gz"],
    "cwq_test_grounded_noprior": [*CWQ, "--planner", "grounded", *CWQ_H100, "--limit", "100", "--prior", "0",
                                  "--coverage", "0",
                                  "--plans", f"{RESULTS}/cwq_test_grounded_noprior.planned.jsonl.gz"],
    # the default CWQ planner (0.90 epoch, planned on the CPU) on the first 1,000 questions: free, and hybrid
    "cwq_test1000_finetuned": [*CWQ, "--planner", "finetuned", "--limit", "1000",
                               "--plans", f"{RESULTS}/cwq_test1000_finetuned.planned.jsonl.gz"],
    "cwq_test1000_hybrid": [*CWQ, "--planner", "hybrid", "--limit", "1000",
                            "--plans", f"{RESULTS}/cwq_test1000_hybrid.planned.jsonl.gz"],
    # the same free plans, the rescues planned with the statement ranker (memory_bank/ranker)
    "cwq_test1000_ranked": [*CWQ, "--planner", "hybrid", "--limit", "1000", "--ranker", "memory_bank/ranker",
                            "--plans", f"{RESULTS}/cwq_test1000_ranked.planned.jsonl.gz"],
    # the H100 adapter's hybrid run, the same 1,000 questions (a prefix of cwq_test_hybrid)
    "cwq_test1000_hybrid_h100": [*CWQ, "--planner", "hybrid", *CWQ_H100, "--limit", "1000",
                                 "--plans", f"{RESULTS}/cwq_test_hybrid.planned.jsonl.gz"],
}


def memory_of(flags: list[str]) -> str:
    return flags[flags.index("--memory") + 1] if "--memory" in flags else "memory_bank/webqsp"


def run_row(name: str, kg: str, out: str) -> None:
    """Run one row into ``out`` (a folder relative to the repository, so the summary names no machine path)."""
    flags = ROWS[name]
    summary, records = Path(out) / f"{name}.json", Path(out) / f"{name}.jsonl"
    if (ROOT / summary).is_file() and (ROOT / f"{records}.gz").is_file() and not (ROOT / records).exists():
        print(f"{name}: done already ({summary})")
        return
    memory = memory_of(flags)
    if not (ROOT / memory / "manifest.json").is_file():
        print(f"{name}: skipped, memory bank {memory} is not built (see the Makefile's memory-schema targets)")
        return
    if "--ranker" not in flags:  # a row that names no ranker holds plans made before the ranker was the default
        flags = [*flags, "--ranker", "none"]
    memq = str(Path(sys.executable).with_name("memq"))
    cmd = [memq, "evaluate", *flags, "--kg", kg, "--json", str(summary), "--per-question", str(records),
           "--no-progress"]
    print(f"{name}: {' '.join(cmd[1:])}", flush=True)
    started = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    with open(ROOT / records, "rb") as src, gzip.GzipFile(ROOT / f"{records}.gz", "wb", mtime=0) as dst:
        shutil.copyfileobj(src, dst)
    (ROOT / records).unlink()
    data = json.loads((ROOT / summary).read_text(encoding="utf-8"))
    data["per_question"] = f"{records}.gz"
    (ROOT / summary).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(f"{name}: {time.perf_counter() - started:.0f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rows", nargs="*", help=f"rows to run (default: all): {', '.join(ROWS)}")
    ap.add_argument("--kg", default="data/kg/benchmark.nq.gz")
    ap.add_argument("--out", default=RESULTS)
    args = ap.parse_args()
    unknown = [r for r in args.rows if r not in ROWS]
    if unknown:
        ap.error(f"unknown rows {unknown}; known: {', '.join(ROWS)}")
    (ROOT / args.out).mkdir(parents=True, exist_ok=True)
    for name in args.rows or ROWS:
        run_row(name, args.kg, args.out)


if __name__ == "__main__":
    main()
