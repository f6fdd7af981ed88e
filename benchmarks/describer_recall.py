"""Recall of the gold statement per find step of oracle plans, for several memory banks and plan wordings.

    .venv/bin/python benchmarks/describer_recall.py \\
        --bank template=memory_bank/webqsp --bank llm=memory_bank/webqsp-llm --bank mixed=memory_bank/webqsp-mixed \\
        --wording template --wording llm=memory_bank/webqsp-llm --json-out benchmarks/results/describer_recall.json \
        --plans-out benchmarks/results/describer

Oracle plans are derived from the gold queries of WebQSP dev (``--dataset cwq``: CWQ dev; both carved from train:
``memq.plan.data.split_of``), each
find step naming its gold statement. The step's phrase is one describer's description of that statement:
``--wording template`` is the TemplateDescriber's (the wording of memq's oracle plans and of the fine-tuned planner's
training plans), ``--wording NAME=BANK`` the first description the statement has in BANK (in an LLM bank the LLM's
sentence, or the template's where the LLM's answers were invalid), ``--wording reworded`` the template's sentence
rewritten by rules (:mod:`memq.describe.reword`: the hidden wording that neither describer writes; its counts of
reworded and unchanged phrases are in the JSON). A plan worded by one describer and searched in a
bank described by the other is the case descriptions are for: the planner's words are not the memory's.

Each find step is searched as recall searches it (``memq.recall.query_text``; the 8 best statements of structures
1-3) and counted: ``top1`` (the gold statement is tied with the best score), ``eq4`` (it is in the set the adaptive
rule keeps with the default gamma1/gamma2), ``top8``, the mean size of the Eq. 4 set, and how many steps fell below
gamma2. Dev statements are all in a bank built from train, so this measures wording, not coverage.

``--plans-out DIR`` writes each wording's plans as ``<dataset>_dev_oracle_<NAME>_worded.planned.jsonl.gz``, records
that ``memq evaluate --planner finetuned --plans FILE`` reads as stored plans (no model runs), to score them end to
end with each bank.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memq.describe.reword import reword  # noqa: E402
from memq.memory.bank import MemoryBank  # noqa: E402
from memq.plan.data import derive_split, template_describe  # noqa: E402
from memq.recall import TIE, RecallConfig, query_text, select  # noqa: E402


def named(value: str) -> tuple[str, str | None]:
    name, _, path = value.partition("=")
    return name, path or None


def wording(name: str, path: str | None):
    """A Statement -> phrase function: the template's, its rule rewording (``reworded``), or the first
    description in the bank at ``path``."""
    template = template_describe()
    if path is None and name == "reworded":
        stats = {"reworded": 0, "unchanged": 0}

        def reworded(statement) -> str:
            text, changed = reword(template(statement))
            stats["reworded" if changed else "unchanged"] += 1
            return text

        return reworded, stats
    if path is None:
        if name != "template":
            raise SystemExit(f"--wording {name!r}: expected template, reworded or NAME=BANK")
        return template, None
    bank = MemoryBank.load(path)
    stats = {"bank": 0, "template": 0}

    def describe(statement) -> str:
        record = bank.get(statement.id)
        if record is None or record.fallback:
            stats["template"] += 1
            return template(statement)
        stats["bank"] += 1
        return record.descriptions[0]

    return describe, stats


def find_steps(describe, dataset: str) -> tuple[list[tuple[str, str]], dict, list]:
    report = derive_split(dataset, "dev", describe)
    steps = [(query_text(step), sid) for plan in report.plans
             for step, sid in zip(plan.steps, plan.statement_ids, strict=True) if step.kind == "find" and sid]
    return steps, {"questions": report.questions, "plans": len(report.plans), "skipped": len(report.skipped)}, \
        report.plans


def write_plans(plans, path: Path) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for plan in plans:
            fh.write(json.dumps({"id": plan.question_id, "planner": "finetuned", "plan_raw": plan.text},
                                ensure_ascii=False) + "\n")


def score(bank: MemoryBank, steps: list[tuple[str, str]], config: RecallConfig) -> dict:
    found = bank.search_many([text for text, _ in steps], k=config.k * 3)
    top1 = eq4 = top8 = below = kept_total = 0
    for (text, gold), raw in zip(steps, found, strict=True):
        hits = [h for h in raw if h[0].statement.structure in ("1", "2", "3")][: config.k]
        kept, fallback = select(hits, text, config)
        ids = [h[0].statement.id for h in hits]
        top1 += bool(hits) and gold in {h[0].statement.id for h in hits if h[2] >= hits[0][2] - TIE}
        eq4 += gold in {h[0].statement.id for h in kept}
        top8 += gold in ids
        below += fallback == "below-gamma2"
        kept_total += len(kept)
    n = len(steps)
    return {"steps": n, "top1": round(top1 / n, 4), "eq4": round(eq4 / n, 4), "top8": round(top8 / n, 4),
            "eq4_set_size": round(kept_total / n, 2), "below_gamma2": below}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bank", action="append", required=True, help="NAME=DIRECTORY (repeat)")
    ap.add_argument("--wording", action="append", required=True, help="template, reworded, or NAME=BANK (repeat)")
    ap.add_argument("--dataset", choices=("webqsp", "cwq"), default="webqsp")
    ap.add_argument("--json-out")
    ap.add_argument("--plans-out", help="write each wording's oracle plans here (stored-plan records)")
    args = ap.parse_args()
    started = time.perf_counter()
    config = RecallConfig()
    banks = {name: MemoryBank.load(path) for name, path in map(named, args.bank)}
    out: dict = {"dataset": args.dataset, "gamma1": config.gamma1, "gamma2": config.gamma2, "k": config.k,
                 "wordings": {}}
    for name, path in map(named, args.wording):
        describe, stats = wording(name, path)
        steps, derived, plans = find_steps(describe, args.dataset)
        row = {"derived": derived, "phrases_from": stats, "banks": {}}
        if args.plans_out:
            write_plans(plans, Path(args.plans_out) / f"{args.dataset}_dev_oracle_{name}_worded.planned.jsonl.gz")
        for bank_name, bank in banks.items():
            row["banks"][bank_name] = score(bank, steps, config)
            r = row["banks"][bank_name]
            print(f"plans worded by {name:9s} bank {bank_name:9s}: {r['steps']} find steps, top-1 {r['top1']:.3f}, "
                  f"in Eq. 4 set {r['eq4']:.3f} (mean size {r['eq4_set_size']}), top-8 {r['top8']:.3f}, "
                  f"below gamma2 {r['below_gamma2']}", flush=True)
        out["wordings"][name] = row
    out["seconds"] = round(time.perf_counter() - started, 1)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
