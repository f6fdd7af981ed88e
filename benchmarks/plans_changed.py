"""The questions whose plan changed between two runs of `memq evaluate` (their per-question files), with F1 before
and after, and the lines the grounded planner's rules refused in the second run (``plan_cost``).

    .venv/bin/python benchmarks/plans_changed.py BEFORE.jsonl[.gz] AFTER.jsonl[.gz] [--plans] [--json OUT.json]

Compares the questions both files hold. ``--plans`` prints each changed question's plan before and after.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memq.evaluate.saved import load_records  # noqa: E402

RULES = ("cvt_answers_withheld", "entity_sorts_refused", "checks_none_passes")


def compare(before: dict[str, dict], after: dict[str, dict]) -> dict:
    ids = [i for i in after if i in before]
    if not ids:
        raise SystemExit("the two files share no question")
    changed, fired_same = [], 0
    for i in ids:
        b, a = before[i], after[i]
        fired = {k: v for k, v in (a.get("plan_cost") or {}).items() if k in RULES and v}
        if (b.get("plan_raw") or "") != (a.get("plan_raw") or ""):
            changed.append({"id": i, "question": a.get("question"), "f1_before": b.get("f1") or 0.0,
                            "f1_after": a.get("f1") or 0.0, "refused": fired,
                            "plan_before": b.get("plan_raw"), "plan_after": a.get("plan_raw")})
        elif fired:
            fired_same += 1
    mean = lambda rs, k: round(sum(r.get(k) or 0.0 for r in rs) / len(rs), 4)  # noqa: E731
    return {"questions": len(ids), "changed": len(changed),
            "up": sum(c["f1_after"] > c["f1_before"] + 1e-9 for c in changed),
            "down": sum(c["f1_after"] < c["f1_before"] - 1e-9 for c in changed),
            "f1_before": mean([before[i] for i in ids], "f1"), "f1_after": mean([after[i] for i in ids], "f1"),
            "refused_same_plan": fired_same,
            "refused_changed_plan": sum(1 for c in changed if c["refused"]), "questions_changed": changed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--plans", action="store_true", help="print each changed question's plans")
    ap.add_argument("--json", help="write the comparison here")
    args = ap.parse_args()
    out = compare(load_records(args.before), load_records(args.after))
    for c in out["questions_changed"]:
        print(f"{c['id']:16} {c['f1_before']:.2f} -> {c['f1_after']:.2f}  {c['refused'] or ''}  {c['question']}")
        if args.plans:
            for when in ("before", "after"):
                print(f"    {when + ':':8}", (c[f"plan_{when}"] or "").replace("\n", " / "))
    print(f"{out['questions']} questions, {out['changed']} plans changed ({out['up']} up, {out['down']} down); "
          f"F1 {out['f1_before']} -> {out['f1_after']}; a rule refused a line but the plan stayed: "
          f"{out['refused_same_plan']}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
