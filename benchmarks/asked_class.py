"""How often the class a GrailQA question asks for by name (memq.plan.asked) is the one its gold plan names.

    .venv/bin/python benchmarks/asked_class.py [--json F.json] [--show] [--rebuild]

For the real train questions, the synthetic programs' questions and the tuning part of GrailQA dev (never the
report part), with the reading as it is and with the one before present forms ("which game supports ...") ended a
class name: how many questions it reads a class from, and of those how many gold plans start from that class or
check it (or a narrower one) at their answer. ``--show`` prints each question the two readings differ on.
Needs the memory bank with the ontology (``make memory-grailqa-schema``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SPLITS = (("train", "grailqa", "train"), ("synthetic", "grailqa-synthetic", "train"), ("tune", "grailqa", "dev"))


def main(argv: list[str] | None = None) -> int:
    from memq.memory.bank import MemoryBank
    from memq.plan import asked as A
    from memq.plan.data import load_split
    from memq.plan.lines import ClassStatements

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memory", default=str(ROOT / "memory_bank" / "grailqa+schema"))
    ap.add_argument("--json", help="write the counts here")
    ap.add_argument("--show", action="store_true", help="print the questions the two readings differ on")
    ap.add_argument("--rebuild", action="store_true", help="derive the plans again (not from the cache)")
    args = ap.parse_args(argv)

    named = ClassStatements(MemoryBank.load(args.memory)).named
    readings = {"now": A.asked_patterns(named), "before": A.asked_patterns(named, verbs=False)}
    out: dict = {"memory": Path(args.memory).name, "classes": len(named)}
    for label, dataset, split in SPLITS:
        plans = load_split(dataset, split, rebuild=args.rebuild)
        row = {"questions": len(plans)}
        for how, pattern in readings.items():
            read = named_ = 0
            for plan in plans:
                asked = A.asked_class(plan.question, pattern, named, [name for _, name in plan.entities])
                if asked is None:
                    continue
                read += 1
                named_ += A.names_class(plan.steps, asked, plan.steps[-1].target)
            row[how] = {"read": read, "named_at_answer": named_}
        if args.show and label != "synthetic":
            for plan in plans:
                now, old = (A.asked_class(plan.question, p, named, [name for _, name in plan.entities])
                            for p in readings.values())
                if now != old:
                    ok = A.names_class(plan.steps, now, plan.steps[-1].target)
                    print(f"{label}: {old} -> {now} ({'named' if ok else 'NOT named'}): {plan.question}")
        out[label] = row
        print(f"{label}: {len(plans)} questions; now {row['now']['named_at_answer']} of {row['now']['read']} "
              f"read are named at the answer; before {row['before']['named_at_answer']} of {row['before']['read']}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
