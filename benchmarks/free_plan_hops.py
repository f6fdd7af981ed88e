"""How far a free plan's answer is from the entities against the gold plan's: the counts behind ``rescue_hops``.

    .venv/bin/python benchmarks/free_plan_hops.py [--dataset cwq] [--split dev] [--planned FILE] [--json OUT.json]
    .venv/bin/python benchmarks/free_plan_hops.py --records RUN.jsonl.gz --dataset cwq --split test [--json OUT.json]

Far: how many Find steps from the plan's entities its answer is (``memq.plan.format.hops``). With ``--planned`` (a
free-generation run's planned records, by default CWQ dev's, ``benchmarks/results/cwq_dev_finetuned.planned.jsonl.gz``):
for each question, its free plan's answer against the answer of the plan derived from its gold query
(``memq.evaluate.run.oracle_plan``). With ``--records`` (a hybrid run's per-question records): for each rescued
question, the rescue's answer against its free plan's and the gold plan's, with the mean F1 of each class.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PLANNED = "benchmarks/results/cwq_dev_finetuned.planned.jsonl.gz"


def far(plan) -> int:
    """How many Find steps from the entities a plan's answer (its Finally line's; 0 without one) is."""
    from memq.plan.format import answer_target, hops

    answer, stated = answer_target(plan)
    return hops(plan.steps, answer) if stated else 0


def parsed(text: str, question):
    from memq.plan.format import parse_plan

    return parse_plan(text, [name for _, name in question.parses[0].topic_entities])


def order(a: int, b: int) -> str:
    """How ``a`` compares with ``b``."""
    return "nearer than" if a < b else "as far as" if a == b else "farther than"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="cwq")
    parser.add_argument("--split", default="dev")
    parser.add_argument("--planned", default=PLANNED, help="free-generation planned records (default: CWQ dev's)")
    parser.add_argument("--records", help="a hybrid run's per-question records: count its rescues instead")
    parser.add_argument("--json", help="write the counts here")
    args = parser.parse_args()

    from memq.evaluate.run import oracle_plan, questions_for
    from memq.evaluate.saved import load_records
    from memq.plan.data import template_describe

    describe = template_describe()
    gold: dict[str, int] = {}
    questions = {q.id: q for q in questions_for(args.dataset, args.split)}

    def gold_far(qid: str) -> int | None:
        if qid not in gold:
            try:
                plan, _ = oracle_plan(questions[qid], describe)
            except Exception:  # noqa: BLE001 - a gold query that does not decompose is counted apart
                return None
            gold[qid] = far(plan)
        return gold[qid]

    out: dict = {"dataset": args.dataset, "split": args.split}
    if args.records:
        out["records"] = args.records
        table: Counter = Counter()
        f1: dict[str, list[float]] = defaultdict(list)
        for r in load_records(args.records).values():
            if not any(f.startswith("hybrid: free generation's plan") for f in r.get("fallbacks", [])):
                continue
            free = next(p["plan"] for p in r["plans_tried"] if p.get("planner") == "free generation")
            q = questions[r["id"]]
            own, theirs, g = far(parsed("\n".join(r["plan"]), q)), far(parsed(free, q)), gold_far(r["id"])
            key = f"rescue's answer: {order(own, theirs)} the free plan's, " \
                  f"{order(own, g) if g is not None else '? of'} the gold plan's"
            table[key] += 1
            f1[key].append(r["f1"])
        out["rescues"] = sum(table.values())
        out["classes"] = {k: {"questions": n, "f1": round(sum(f1[k]) / n, 4)} for k, n in sorted(table.items())}
    else:
        out["planned"] = args.planned
        table = Counter()
        pairs: Counter = Counter()
        for r in load_records(args.planned).values():
            g = gold_far(r["id"]) if r["id"] in questions else None
            if g is None:
                table["gold plan not derived"] += 1
                continue
            try:
                free = far(parsed(r.get("plan_raw", ""), questions[r["id"]]))
            except Exception:  # noqa: BLE001 - an unreadable free plan is counted apart
                table["free plan not read"] += 1
                continue
            table[f"free plan's answer: {order(free, g)} the gold plan's"] += 1
            pairs[f"gold {g}, free {free}"] += 1
        out["questions"] = sum(table.values())
        out["classes"] = dict(sorted(table.items()))
        out["pairs"] = dict(sorted(pairs.items()))
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
