"""A linker setting tried end to end against a run of ``memq evaluate --entities linked``, answering again only
the questions whose planner input the setting changes.

    .venv/bin/python benchmarks/linked_variant.py BASE.jsonl --link required=1 --out VARIANT.jsonl [--limit N]
        [--base-link required=-1] [--base-constraints 0] [--mentions webqsp,cwq] [--base-mentions webqsp]
        [--fresh-base] [--rebase] [--shard K/N] [--acted TEXT]

``--mentions`` counts the variant's mention prior on these datasets' training questions (without the dev questions
carved from WebQSP's and CWQ's train when ``--split`` is dev; GrailQA's dev is a file of its own, and ``--dataset
grailqa`` holds nothing out); ``--base-mentions``, the base's, on the whole of their training questions, as the
cached entity index counted it when the base ran (memq.link.mentions.training_mentions), or without the dev
questions with ``--base-held-out`` (a base that is itself a linked_variant run on dev). ``--rebase``: a changed
question is answered with the base settings again too, so that code changed since the base run is not counted for
the setting. ``--fresh-base``: BASE.jsonl need not exist; a question whose input the variant changes is answered
with the base settings too, into BASE.jsonl, and the summary compares the two on those questions only (``f1`` and
``base_f1`` are then over the changed questions). ``--acted TEXT``: a setting that acts after linking, on the plan
(``replan_unused``), changes no planner input; a question that gets a suggested constraint is then answered with the
variant, and is changed where a fallback of its trace holds TEXT (with ``--rebase``, answered with
the base again).

Both pipelines answer with the configuration ``memq evaluate`` takes for the dataset
(:func:`memq.evaluate.cli.evaluation_config`: its memory bank, ``memory_bank/DATASET``); before, they read the
default bank, WebQSP's, for CWQ too. ``BASE.jsonl`` is the per-question file of a linked run (``memq evaluate
--dataset webqsp --split dev --planner grounded --entities linked --per-question BASE.jsonl``). For each of its
questions the variant pipeline (that configuration with the ``--link`` settings of
:class:`memq.link.settings.LinkConfig`) links the question, and so does the base pipeline: when both inputs make
the same plan (:func:`memq.link.evaluate.same_input`: the same entities, optional ones and second readings its
prompt leaves out) the base record stands, as the pipeline is
deterministic; otherwise the question is answered again as ``memq.answer(question)`` answers it. Records are
written as they finish (resumable: each names its run, a digest of the settings and of memq's source, and a
``--out`` that holds records of another run is refused rather than read as this one's); the summary (F1 of both,
questions changed, up and down, the gold-entity F1 of the base run) is printed and, with ``--json``, written.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def run_key(args: argparse.Namespace) -> str:
    """What a record of this run depends on: its settings (every option but where it writes and which questions it
    takes) and memq's source, as a digest."""
    import hashlib

    settings = {k: v for k, v in sorted(vars(args).items()) if k not in ("out", "json", "limit", "shard")}
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    for path in sorted((Path(__file__).resolve().parent.parent / "memq").rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def main() -> int:
    from memq.evaluate.cli import evaluation_config
    from memq.evaluate.run import evaluate_question, questions_for
    from memq.evaluate.saved import load_records
    from memq.link.evaluate import same_input
    from memq.link.mentions import HELD_OUT, own_mentions
    from memq.link.settings import with_settings
    from memq.pipeline import Pipeline
    from memq.types import Trace

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", help="per-question file of `memq evaluate --entities linked`")
    ap.add_argument("--link", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--mentions", metavar="DATASET,...", help="the variant's mention prior (default: the index's)")
    ap.add_argument("--base-mentions", metavar="DATASET,...", help="the base run's mention prior")
    ap.add_argument("--mentions-exact", action="store_true",
                    help="the variant's mention prior counts the gold entities a span names exactly as named too")
    ap.add_argument("--base-held-out", action="store_true",
                    help="the base's mention prior was counted without the dev questions (a linked_variant run's)")
    ap.add_argument("--fresh-base", action="store_true", help="answer the changed questions with the base too")
    ap.add_argument("--rebase", action="store_true",
                    help="answer the changed questions with the base settings again, with today's code, and compare "
                         "with that (the recorded base F1 is kept as base_f1_recorded)")
    ap.add_argument("--base-link", action="append", default=[], metavar="KEY=VALUE",
                    help="the linker settings BASE.jsonl was run with, where they are not today's defaults")
    ap.add_argument("--base-constraints", type=float, metavar="SUPPORT",
                    help="the base's Config.constraints (suggested constraint entities; 0: none), where not today's")
    ap.add_argument("--acted", metavar="TEXT",
                    help="the --link setting acts after linking, on the plan: a question whose planner input is the "
                         "same and that gets a suggested constraint is answered with the variant too, and counts as "
                         "changed where a fallback of the variant's trace holds TEXT (its base answered again)")
    ap.add_argument("--dataset", default="webqsp")
    ap.add_argument("--split", default="dev")
    ap.add_argument("--planner", default="grounded")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--shard", metavar="K/N", help="answer every N-th of the questions, from the K-th (1-based)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--json")
    args = ap.parse_args()

    base = load_records(args.base) if Path(args.base).exists() else {}
    questions = [q for q in questions_for(args.dataset, args.split) if args.fresh_base or q.id in base][: args.limit]
    if args.shard:
        k, n = (int(x) for x in args.shard.split("/"))
        if not 1 <= k <= n:
            raise SystemExit(f"--shard is K/N with 1 <= K <= N, got {args.shard}")
        questions = questions[k - 1::n]
    out = Path(args.out)
    done = load_records(out) if out.exists() else {}
    run = run_key(args)
    if stale := [qid for qid, r in done.items() if r.get("run") != run]:
        raise SystemExit(f"{out} holds {len(stale)} records of another run (other settings, or memq's source changed "
                         "since): give another --out, or remove it")
    # the configuration `memq evaluate` answers the dataset with (its memory bank: CWQ questions are not to be
    # answered from the default, WebQSP's)
    flags = argparse.Namespace(dataset=args.dataset, planner=args.planner, memory=None, kg=None, endpoint=None)
    config = replace(evaluation_config(flags), planner_dataset=args.dataset)
    # the variant starts from today's defaults, not from the base's settings (a --base-link it does not repeat)
    variant_config = replace(config, link=with_settings(config.link, args.link))
    config = replace(config, link=with_settings(config.link, args.base_link))
    if args.base_constraints is not None:
        config = replace(config, constraints=args.base_constraints)
    pipe = Pipeline(config)
    variant = Pipeline(variant_config, bank=pipe.bank, kg=pipe.kg, planner=pipe.planner)
    carved = args.split == "dev" and args.dataset in HELD_OUT  # GrailQA's dev set is a file of its own
    base_hold_out = args.base_held_out and carved
    for p, sets, hold_out, exact in ((pipe, args.base_mentions, base_hold_out, False),
                                     (variant, args.mentions, carved, args.mentions_exact)):
        if sets:  # a copy of the index with its own mention prior: the two pipelines read one cached index
            own_mentions(p.linker, sets.split(","), hold_out_dev=hold_out, exact=exact)

    def planner_input(p, question, trace=None):
        try:
            return p.link(question, None, trace or Trace())
        except Exception as exc:  # noqa: BLE001 - a question that links nothing is an input too
            return str(exc)

    base_file = open(args.base, "a", encoding="utf-8") if args.fresh_base else contextlib.nullcontext()
    with out.open("a", encoding="utf-8") as fh, base_file as base_fh:
        for q in questions:
            if q.id in done:
                continue
            linked = Trace()
            base_input, variant_input = planner_input(pipe, q.question), planner_input(variant, q.question, linked)
            same = (same_input(base_input, variant_input) if isinstance(base_input, tuple)
                    and isinstance(variant_input, tuple) else base_input == variant_input)  # the order counts
            acted = None  # --acted: the variant's record, where the setting may act after linking
            if same and args.acted and any(link.get("suggested") for link in linked.links):
                acted = evaluate_question(variant, q, args.planner, linked=True)
                same = not any(args.acted in note for note in acted.get("fallbacks") or ())
            fresh = not same and q.id not in base  # --fresh-base: answered with today's code below, once
            if fresh:
                base[q.id] = evaluate_question(pipe, q, args.planner, linked=True)
                base_fh.write(json.dumps(base[q.id]) + "\n")
                base_fh.flush()
            was = base.get(q.id, {})
            recorded = was.get("f1") or 0.0
            # the gold-entity F1 of a full record, or of a linked_variant record (a base may be either)
            gold_f1 = (was.get("gold_entities") or {}).get("f1", was.get("gold_f1"))
            if not same and args.rebase and not fresh:
                was = {**evaluate_question(pipe, q, args.planner, linked=True),
                       "gold_entities": was.get("gold_entities")}
            record = dict(was) if same else acted or evaluate_question(variant, q, args.planner, linked=True)
            done[q.id] = {"id": q.id, "changed": not same, "f1": record.get("f1") or 0.0,
                          "base_f1": was.get("f1") or 0.0, "base_f1_recorded": recorded, "gold_f1": gold_f1,
                          "plan": record.get("plan"), "links": record.get("links"),
                          "base_links": None if same else was.get("links"), "exception": record.get("exception"),
                          "run": run}
            fh.write(json.dumps(done[q.id]) + "\n")
            fh.flush()
    rows = [done[q.id] for q in questions if q.id in done]
    changed = [r for r in rows if r["changed"]]
    scored = changed if args.fresh_base else rows
    n = len(scored) or 1
    summary = {"dataset": args.dataset, "split": args.split, "planner": args.planner, "link": args.link,
               "base_link": args.base_link, "base_constraints": args.base_constraints, "mentions": args.mentions,
               "base_mentions": args.base_mentions, "mentions_exact": args.mentions_exact, "acted": args.acted,
               "base": Path(args.base).name, "questions": len(rows), "changed": len(changed),
               "scored": "the changed questions" if args.fresh_base else "every question",
               "f1": round(sum(r["f1"] for r in scored) / n, 4),
               "base_f1": round(sum(r["base_f1"] for r in scored) / n, 4),
               "f1_change_over_all": round(sum(r["f1"] - r["base_f1"] for r in changed) / (len(rows) or 1), 4),
               "up": sum(r["f1"] > r["base_f1"] + 1e-9 for r in changed),
               "down": sum(r["f1"] < r["base_f1"] - 1e-9 for r in changed)}
    if args.rebase:
        summary["base_f1_recorded"] = round(sum(r["base_f1_recorded"] for r in scored) / n, 4)
        summary["rebased"] = "the changed questions' base F1 is today's code's answer with the base settings"
    if not args.fresh_base:
        summary["f1_gold_entities"] = round(sum(r["gold_f1"] or 0.0 for r in rows) / n, 4)
    print(json.dumps(summary, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
