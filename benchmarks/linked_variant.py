"""A linker setting tried end to end against a run of ``memq evaluate --entities linked``, answering again only
the questions whose planner input the setting changes.

    .venv/bin/python benchmarks/linked_variant.py BASE.jsonl --link required=1 --out VARIANT.jsonl [--limit N]
        [--base-link required=-1]

``BASE.jsonl`` is the per-question file of a linked run (``memq evaluate --dataset webqsp --split dev --planner
grounded --entities linked --per-question BASE.jsonl``). For each of its questions the variant pipeline (the
default ``Config`` with the ``--link`` settings of :class:`memq.link.linker.LinkConfig`) links the question, and
so does the base pipeline: when both inputs make the same plan (:func:`memq.link.evaluate.same_input`: the same
entities, optional ones and second readings its prompt leaves out) the base record stands, as the pipeline is
deterministic; otherwise the question is answered again as ``memq.answer(question)`` answers it. Records are
written as they finish (resumable); the summary (F1 of both, questions changed, up and down, the gold-entity F1
of the base run) is printed and, with ``--json``, written.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    from memq.evaluate.run import evaluate_question, questions_for
    from memq.evaluate.saved import load_records
    from memq.link.evaluate import same_input
    from memq.link.linker import with_settings
    from memq.pipeline import Config, Pipeline
    from memq.types import Trace

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", help="per-question file of `memq evaluate --entities linked`")
    ap.add_argument("--link", action="append", required=True, metavar="KEY=VALUE")
    ap.add_argument("--base-link", action="append", default=[], metavar="KEY=VALUE",
                    help="the linker settings BASE.jsonl was run with, where they are not today's defaults")
    ap.add_argument("--dataset", default="webqsp")
    ap.add_argument("--split", default="dev")
    ap.add_argument("--planner", default="grounded")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--out", required=True)
    ap.add_argument("--json")
    args = ap.parse_args()

    base = load_records(args.base)
    questions = [q for q in questions_for(args.dataset, args.split) if q.id in base][: args.limit]
    out = Path(args.out)
    done = load_records(out) if out.exists() else {}
    config = replace(Config(), planner_dataset=args.dataset, planner=args.planner)
    config = replace(config, link=with_settings(config.link, args.base_link))
    pipe = Pipeline(config)
    variant = Pipeline(replace(config, link=with_settings(config.link, args.link)), bank=pipe.bank, kg=pipe.kg,
                       planner=pipe.planner)

    def planner_input(p, question):
        try:
            return p.link(question, None, Trace())
        except Exception as exc:  # noqa: BLE001 - a question that links nothing is an input too
            return str(exc)

    with out.open("a", encoding="utf-8") as fh:
        for q in questions:
            if q.id in done:
                continue
            base_input, variant_input = planner_input(pipe, q.question), planner_input(variant, q.question)
            same = base_input == variant_input or (isinstance(base_input, tuple) and isinstance(variant_input, tuple)
                                                   and same_input(base_input, variant_input))
            record = dict(base[q.id]) if same else evaluate_question(variant, q, args.planner, linked=True)
            done[q.id] = {"id": q.id, "changed": not same, "f1": record.get("f1") or 0.0,
                          "base_f1": base[q.id].get("f1") or 0.0,
                          "gold_f1": (base[q.id].get("gold_entities") or {}).get("f1") or 0.0,
                          "plan": record.get("plan"), "links": record.get("links"),
                          "exception": record.get("exception")}
            fh.write(json.dumps(done[q.id]) + "\n")
            fh.flush()
    rows = [done[q.id] for q in questions if q.id in done]
    n = len(rows) or 1
    changed = [r for r in rows if r["changed"]]
    summary = {"dataset": args.dataset, "split": args.split, "planner": args.planner, "link": args.link,
               "base_link": args.base_link,
               "base": Path(args.base).name, "questions": len(rows), "changed": len(changed),
               "f1": round(sum(r["f1"] for r in rows) / n, 4),
               "base_f1": round(sum(r["base_f1"] for r in rows) / n, 4),
               "f1_gold_entities": round(sum(r["gold_f1"] for r in rows) / n, 4),
               "up": sum(r["f1"] > r["base_f1"] + 1e-9 for r in changed),
               "down": sum(r["f1"] < r["base_f1"] - 1e-9 for r in changed)}
    print(json.dumps(summary, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
