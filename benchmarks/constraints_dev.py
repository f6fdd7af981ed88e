"""Suggested constraint entities, end to end: each question that gets a suggestion, answered with its linked
entities alone and with the suggestions as optional entities (memq.link.constraints), in the same run.

    .venv/bin/python benchmarks/constraints_dev.py [--dataset webqsp] [--split dev] [--planner grounded]
        [--constraints 0.3] [--limit N] --out FILE.jsonl

Only the questions with a suggestion are answered: on the others the two settings are the same question with
the same entities. The log is resumable (one JSON record per question: both answers' F1, the links, the
suggestions); the summary (F1 of both, questions up and down) is printed and written beside it as FILE.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    from memq.evaluate.run import evaluate_question, load_records, questions_for, record_log
    from memq.link.evaluate import linked_question
    from memq.pipeline import Config, Pipeline

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="webqsp")
    ap.add_argument("--split", default="dev", choices=("dev", "test"))
    ap.add_argument("--planner", default="grounded")
    ap.add_argument("--constraints", type=float, default=Config().constraints)
    ap.add_argument("--limit", type=int, help="the first N questions of the split (before the suggestion filter)")
    ap.add_argument("--out", required=True, help="per-question JSONL (resumable); the summary goes to .json")
    args = ap.parse_args()
    pipe = Pipeline(replace(Config(), planner=args.planner, planner_dataset=args.dataset,
                            constraints=args.constraints))
    questions = questions_for(args.dataset, args.split)[:args.limit]
    todo = []
    for q in questions:
        links = [link.to_json() for link in pipe.linker.link(q.question)]
        if not links:
            continue
        found = pipe.suggest(q.question, [x["id"] for x in links])
        if found:
            todo.append((q, links, found))
    out = Path(args.out)
    done = load_records(out) if out.exists() else {}
    with record_log(out, len(todo), f"{args.dataset}/{args.split}/{args.planner}/constraints", True) as write:
        for q, links, found in todo:
            if q.id in done:
                write()
                continue
            asked = linked_question(q, [x for x in links if not x.get("alternative")])
            other = {x["id"]: x["name"] for x in links if x.get("alternative")}  # optional in both settings
            alone = evaluate_question(pipe, asked, args.planner, optional=other)
            given = evaluate_question(pipe, asked, args.planner, optional={**other, **{s.id: s.name for s in found}})
            done[q.id] = {"id": q.id, "question": q.question, "linked": links,
                          "suggested": [s.to_json() for s in found],
                          "f1_alone": alone["f1"], "f1_suggested": given["f1"],
                          "plan_alone": alone.get("plan"), "plan_suggested": given.get("plan"),
                          "error_alone": alone.get("error"), "error_suggested": given.get("error")}
            write(done[q.id])
    rows = [done[q.id] for q, _, _ in todo if q.id in done]
    n = len(rows) or 1
    summary = {"dataset": args.dataset, "split": args.split, "planner": args.planner,
               "constraints": args.constraints, "questions_in_split": len(questions),
               "questions_with_a_suggestion": len(todo), "answered": len(rows),
               "f1_linked_alone": round(sum(r["f1_alone"] for r in rows) / n, 4),
               "f1_with_suggestions": round(sum(r["f1_suggested"] for r in rows) / n, 4),
               "up": sum(r["f1_suggested"] > r["f1_alone"] + 1e-9 for r in rows),
               "down": sum(r["f1_suggested"] < r["f1_alone"] - 1e-9 for r in rows),
               "kg": Path(pipe.config.kg_file).name, "memory": pipe.config.memory}
    out.with_suffix(".json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
