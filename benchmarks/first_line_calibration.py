"""How often the grounded planner's first line is the gold plan's, with the first Find line calibrated or not.

The grounded planner may take each first-step Find line's log-probability under a question-less prompt off its
score (``calibrate``, docs/planner.md). This script chooses that weight without running whole plans: for each
question it lets the planner build its first step's candidate lines (with ``calibrate`` 0) and stops it there,
scores every line after the question's prompt and after the question-less one (the line, and its statement's
tokens up to the ``?`` of its target), and then, for each weight, takes the line the search would take first and
compares it with the first line of the plan derived from the gold query (variables aside).

    .venv/bin/python benchmarks/first_line_calibration.py --dataset grailqa --part tune \\
        --records benchmarks/results/grailqa_planner/first_line_tune.jsonl \\
        --json benchmarks/results/grailqa_planner/first_line_tune.json

``--records`` is resumable (questions already in it are skipped) and may be gzipped once complete. Prints, for
each weight, the questions whose first line is the gold one (of those that offer it), by level when the dataset
has levels, and the questions that go up or down against 0. Records that keep each line's ranker bonus (``rank``,
collected since the ranker was continued on the synthetic programs) also give a grid: the gold first lines with the
ranker's bonus scaled (``RANKER_SCALES``; 1 is the planner's ``rank_weight``) at each weight.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0)
# the ranker's part of the first lines' bonuses scaled by these (1: as the planner weighs it, ``rank_weight``)
RANKER_SCALES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
TARGET = re.compile(r", assign it to \?\w+\.\s*$")


class Stop(Exception):
    """Raised by the captured line search: the planner is stopped after its first step's candidates are made."""


def statement_part(text: str) -> str:
    return TARGET.sub("", text.strip())


def collect(args, out: Path) -> None:
    """Append one record per question not yet in ``out``: the first step's lines, their bonuses, and each line's
    log-probability after the question's prompt (``lq``, ``lqh`` its statement's tokens) and the question-less
    one (``ln``, ``lnh``)."""
    import memq.plan.grounded as grounded
    from memq.cli import build_parser
    from memq.evaluate.cli import evaluation_config
    from memq.evaluate.run import questions_for
    from memq.pipeline import Pipeline, shown_path
    from memq.plan.calibrate import statement_tokens
    from memq.plan.data import load_split
    from memq.plan.lines import Line

    done = set()
    if out.is_file():
        with open(out, encoding="utf-8") as fh:
            done = {json.loads(line)["id"] for line in fh if line.strip()}
    argv = ["evaluate", "--dataset", args.dataset, "--split", "dev", "--planner", "grounded", "--calibrate", "0"]
    if args.memory:
        argv += ["--memory", args.memory]
    # the dataset's planner (adapter and ranker), as memq evaluate takes them
    pipeline = Pipeline(replace(evaluation_config(build_parser().parse_args(argv)), planner_dataset=args.dataset))
    planner = pipeline.planner
    gold = {str(p.question_id): [s.text for s in p.steps] for p in load_split(args.dataset, "dev")}
    questions = questions_for(args.dataset, "dev", args.part)[: args.limit]
    captured: dict = {}

    def capture(lm, prefix, candidates, k, **kw):
        captured.update(lm=lm, prefix=list(prefix), candidates=[list(c) for c in candidates],
                        bonus=list(kw.get("bonus") or [0.0] * len(candidates)),
                        open=list(kw.get("open_ends") or [False] * len(candidates)))
        raise Stop

    def scores(lm, prefix: list[int], ids: list[int], head: int) -> tuple[float, float]:
        chain, _ = lm.expand(prefix + ids, len(prefix), ())
        return float(sum(chain)), float(sum(chain[:head]))

    bonuses = planner._bonuses

    def ranks(h, lines, *a, **kw):  # each line's ranker bonus (``calibrate`` is 0 here), for the weights' grid
        captured["rank"] = [float(line.rank) for line in lines]
        return bonuses(h, lines, *a, **kw)

    planner._bonuses = ranks
    real = grounded.best_lines
    grounded.best_lines = capture
    try:
        with open(out, "a", encoding="utf-8") as fh:
            for q in questions:
                if q.id in done or str(q.id) not in gold:
                    continue
                entities = dict(q.parses[0].topic_entities)
                captured.clear()
                start = time.perf_counter()
                try:
                    planner.plan(q.question, entities)
                except Stop:
                    pass
                if not captured:  # planned freely: no line search
                    continue
                lm, prefix = captured["lm"], captured["prefix"]
                null = lm.prompt_ids(planner.prompt("?", entities))
                texts = [lm.decode(c) for c in captured["candidates"]]
                heads = [len(statement_tokens(Line("find", t.rstrip("\n"), tuple(c), None, None), lm))
                         for t, c in zip(texts, captured["candidates"], strict=True)]
                rows = [[None] * 4 if opened else [*scores(lm, prefix, c, h), *scores(lm, null, c, h)]
                        for c, h, opened in zip(captured["candidates"], heads, captured["open"], strict=True)]
                record = {"id": q.id, "question": q.question, "level": q.level, "gold": gold[str(q.id)],
                          "lines": texts, "bonus": captured["bonus"], "rank": captured.get("rank"),
                          **{key: [r[i] for r in rows] for i, key in enumerate(("lq", "lqh", "ln", "lnh"))},
                          "s": round(time.perf_counter() - start, 2)}
                record["adapter"] = shown_path(getattr(planner.free, "adapter", None))
                record["ranker"] = shown_path(getattr(planner.ranker, "path", None))
                fh.write(json.dumps(record) + "\n")
                fh.flush()
                print(q.id, len(texts), record["s"], flush=True)
    finally:
        grounded.best_lines = real
        planner._bonuses = bonuses


def chosen(record: dict, weight: float, ranker: float = 1.0) -> int | None:
    """The line the search takes first: the highest log-probability plus bonus, with ``weight`` times each Find
    line's statement log-probability after the question-less prompt taken off, from the least likely one's, and the
    ranker's part of each bonus times ``ranker`` (records that kept it, ``rank``)."""
    finds = [i for i, t in enumerate(record["lines"])
             if t.startswith("Find ") and not t.startswith("Find every ") and record["lnh"][i] is not None]
    low = min((record["lnh"][i] for i in finds), default=0.0)
    rank = record.get("rank") or [0.0] * len(record["lines"])
    best, index = None, None
    for i, lq in enumerate(record["lq"]):
        if lq is None:
            continue
        score = lq + record["bonus"][i] + (ranker - 1.0) * rank[i]
        if i in finds and len(finds) > 1:
            score -= weight * (record["lnh"][i] - low)
        if best is None or score > best:
            best, index = score, i
    return index


def analyse(records: list[dict]) -> dict:
    offered = [r for r in records if statement_part(r["gold"][0]) in map(statement_part, r["lines"])]

    def right(r: dict, weight: float, ranker: float = 1.0) -> bool:
        i = chosen(r, weight, ranker)
        return i is not None and statement_part(r["lines"][i]) == statement_part(r["gold"][0])

    levels = sorted({r["level"] for r in offered if r.get("level")})
    rows = []
    for w in WEIGHTS:
        row = {"weight": w, "gold_first": sum(right(r, w) for r in offered),
               "up": [r["question"] for r in offered if right(r, w) and not right(r, 0.0)],
               "down": [r["question"] for r in offered if right(r, 0.0) and not right(r, w)]}
        row["by_level"] = {lv: [sum(right(r, w) for r in offered if r["level"] == lv),
                                sum(r["level"] == lv for r in offered)] for lv in levels}
        rows.append(row)
    summary = {"questions": len(records), "gold_first_line_offered": len(offered), "weights": rows}
    if offered and all(r.get("rank") is not None for r in offered):  # the ranker's bonus scaled too
        summary["ranker_grid"] = {f"{m:g}": {f"{w:g}": sum(right(r, w, m) for r in offered) for w in WEIGHTS}
                                  for m in RANKER_SCALES}
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="grailqa", choices=("grailqa", "webqsp", "cwq"))
    ap.add_argument("--part", choices=("tune", "report"), help="GrailQA dev's part (only the tuning part to choose)")
    ap.add_argument("--memory", help="memory bank (default: the evaluation's)")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--records", type=Path, required=True, help="per-question records (.jsonl, or .jsonl.gz to read)")
    ap.add_argument("--json", type=Path, help="write the summary here")
    args = ap.parse_args(argv)
    if args.records.suffix != ".gz":
        collect(args, args.records)
    opener = gzip.open if args.records.suffix == ".gz" else open
    with opener(args.records, "rt", encoding="utf-8") as fh:
        records = [json.loads(line) for line in fh if line.strip()]
    summary = analyse(records)
    summary["records"] = str(args.records)
    print(f"{summary['questions']} questions, {summary['gold_first_line_offered']} offer the gold first line")
    for row in summary["weights"]:
        levels = "  ".join(f"{lv} {a}/{b}" for lv, (a, b) in row["by_level"].items())
        print(f"calibrate {row['weight']:.1f}: gold first line {row['gold_first']}  up {len(row['up'])}"
              f"  down {len(row['down'])}  {levels}")
    for scale, row in summary.get("ranker_grid", {}).items():
        print(f"ranker x{scale}: " + "  ".join(f"{w}: {n}" for w, n in row.items()))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
