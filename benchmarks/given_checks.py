"""The stored plans of a run less those a search would now plan otherwise: a saved beam that holds a plan ending at a
variable a check makes equal to a given entity (``memq.plan.format.answers_its_check``), which no search offers now.

    .venv/bin/python benchmarks/given_checks.py STORED.jsonl.gz OTHERS.jsonl --dataset cwq --split test

A grounded record with such a plan in its beam is left out (``memq evaluate --plans OTHERS.jsonl`` plans it again);
a hybrid record keeps its free plan and loses its saved rescue (planned again when the free plan finds nothing). The
given entities are the question's gold topic entities. Prints each record taken out, with its F1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def ends_at_given(texts, names: list[str]) -> bool:
    """Whether a plan among ``texts`` ends at a variable a check makes equal to one of ``names``."""
    from memq.errors import MemQError
    from memq.plan.format import answers_its_check, parse_plan

    for text in texts:
        try:
            if text and answers_its_check(parse_plan(text, names).steps, names=names):
                return True
        except MemQError:
            continue
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stored", help="per-question records of a memq evaluate run (.jsonl or .jsonl.gz)")
    parser.add_argument("out", help="the records to plan with (JSON lines)")
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--split", required=True)
    args = parser.parse_args()

    from memq.evaluate.run import questions_for
    from memq.evaluate.saved import load_records

    names = {q.id: [n for _, n in q.parses[0].topic_entities] if q.parses else []
             for q in questions_for(args.dataset, args.split)}
    taken = 0
    with open(args.out, "w", encoding="utf-8") as fh:
        for qid, record in load_records(args.stored).items():
            given = names.get(qid, [])
            rescue = record.get("rescue")
            if isinstance(rescue, dict) and ends_at_given(
                    [t for t, *_ in rescue.get("plan_beam") or []] or [rescue.get("plan_raw")], given):
                record = {k: v for k, v in record.items() if k != "rescue"}
                print(f"rescue planned again: {qid} (F1 {record.get('f1') or 0.0:.3f})")
                taken += 1
            elif record.get("planner") == "grounded" and ends_at_given(
                    [t for t, *_ in record.get("plan_beam") or []], given):
                print(f"planned again: {qid} (F1 {record.get('f1') or 0.0:.3f})")
                taken += 1
                continue
            fh.write(json.dumps(record) + "\n")
    print(f"{taken} taken out")
    return 0


if __name__ == "__main__":
    sys.exit(main())
