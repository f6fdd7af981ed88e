"""A span's second reading (a linked alternative) named in the planner's prompt or left out of it, end to end.

    .venv/bin/python benchmarks/second_readings_dev.py [--limit 30] --out FILE.jsonl

The WebQSP dev questions whose linked entities include a second reading of a span (``Link.alternative``) are
answered twice by the default pipeline with linked entities: ``prompted`` (the planner's prompt names the second
reading, as before) and ``unprompted`` (it does not: the pipeline's ``unprompted``; lines may still start from it).
On the other questions the two are the same. One JSON record per question and variant (F1, plan, seconds), resumable;
the summary is printed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    from memq.evaluate import best_over_parses
    from memq.evaluate.run import questions_for
    from memq.pipeline import Config, Pipeline

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=30)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = Path(args.out)
    done = {(r["id"], r["variant"]) for r in map(json.loads, out.read_text().splitlines())} if out.exists() else set()
    pipe = Pipeline(Config())
    questions = [q for q in questions_for("webqsp", "dev") if any(x.alternative for x in pipe.linker.link(q.question))]
    print(f"{len(questions)} dev questions link a second reading; answering the first {args.limit}", flush=True)
    planner = pipe.planner
    unprompted = planner.plan

    def prompted(question, entities, optional=(), unprompted=()):  # the prompt names every entity, as before
        return planner_plan(question, entities, optional)

    planner_plan = unprompted
    with out.open("a", encoding="utf-8") as fh:
        for q in questions[: args.limit]:
            golds = [[a for a, _ in p.answers] for p in q.parses]
            for variant, plan in (("prompted", prompted), ("unprompted", unprompted)):
                if (q.id, variant) in done:
                    continue
                planner.plan = plan
                t0 = time.perf_counter()
                try:
                    a = pipe.answer(q.question)
                    predicted, raw, error = [i for i, _ in a.answers], a.plan.raw, None
                except Exception as exc:  # noqa: BLE001 - one question's failure is its record
                    predicted, raw, error = [], None, str(exc)[:200]
                _, f1 = best_over_parses(predicted, golds)
                fh.write(json.dumps({"id": q.id, "variant": variant, "f1": f1, "plan": raw, "error": error,
                                     "s": round(time.perf_counter() - t0, 1)}) + "\n")
                fh.flush()
    by: dict[str, dict] = defaultdict(dict)
    for r in map(json.loads, out.read_text().splitlines()):
        by[r["id"]][r["variant"]] = r
    both = [v for v in by.values() if len(v) == 2]
    if both:
        f1 = {k: sum(v[k]["f1"] for v in both) / len(both) for k in ("prompted", "unprompted")}
        up = sum(v["unprompted"]["f1"] > v["prompted"]["f1"] for v in both)
        down = sum(v["unprompted"]["f1"] < v["prompted"]["f1"] for v in both)
        secs = {k: sum(v[k]["s"] for v in both) for k in ("prompted", "unprompted")}
        print(f"{len(both)} questions: F1 prompted {f1['prompted']:.3f}, unprompted {f1['unprompted']:.3f} "
              f"({up} up, {down} down); seconds {secs['prompted']:.0f} / {secs['unprompted']:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
