"""``memq demo``: answer real WebQSP test questions on the embedded benchmark KG.

No server and no network: the memory bank (memory_bank/webqsp), the benchmark
KG (data/kg/benchmark.nq.gz) and the planner's model (from PyPI packages)
are all local. For each question the demo shows the plan, the recalled
statements with their similarity, the reconstructed SPARQL and the answers
next to the gold answers.
"""

from __future__ import annotations

import argparse
import time

DEMO_QUESTIONS = ("WebQTest-0", "WebQTest-100", "WebQTest-21", "WebQTest-16", "WebQTest-994", "WebQTest-12")


def register(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser("demo", help="answer real WebQSP test questions on the embedded benchmark KG")
    demo.add_argument("--ids", nargs="*", default=list(DEMO_QUESTIONS), help="WebQSP test question ids")
    demo.add_argument("--planner", choices=("auto", "fewshot", "finetuned", "oracle"), default="auto",
                      help="auto: the committed fine-tuned adapter if there is one, else few-shot; "
                           "oracle: plans derived from the gold query (no LLM)")
    demo.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from . import datasets
    from .ask import show
    from .pipeline import Config, Pipeline

    by_id = {q.id: q for q in datasets.load("webqsp", "test")}
    questions = []
    for qid in args.ids:
        if qid not in by_id:
            raise ValueError(f"not a WebQSP test question id: {qid!r}")
        questions.append(by_id[qid])
    config = Config()
    kind = args.planner
    print("memq demo: real WebQSP test questions, answered on the embedded benchmark KG")
    print("(the KG is synthesised from the gold annotations, so answers here are not full-Freebase results)\n")
    t0 = time.perf_counter()
    if kind == "oracle":
        from .evaluate.run import _oracle
        from .plan.data import template_describe

        describe = template_describe()
        plans = []
        for q in questions:
            try:
                plans.append(_oracle(q, describe))
            except Exception as exc:  # noqa: BLE001 - shown to the user, question skipped
                plans.append(exc)
        pipe = Pipeline(replace(config, planner="given"))
        print(f"plans: oracle (derived from the gold queries), {time.perf_counter() - t0:.1f} s\n")
    else:
        pipe = Pipeline(replace(config, planner=kind))
        planner = pipe.planner
        items = [(q.question, dict(q.parses[0].topic_entities)) for q in questions]
        print(f"planning {len(items)} questions with the {getattr(planner, 'name', kind)} planner "
              "(one batched LLM call per 8 questions; slow on a CPU)...")
        raw = planner.plan_many(items)
        plans = [p if isinstance(p, Exception) else (p, dict(e)) for p, (_, e) in zip(raw, items, strict=True)]
        print(f"planned in {time.perf_counter() - t0:.1f} s\n")
    solved = 0
    for q, planned in zip(questions, plans, strict=True):
        print("=" * 100)
        print(f"{q.id}")
        gold = list(q.parses[0].answers or ())
        if isinstance(planned, Exception):
            print(f"Q: {q.question}\nno plan: {planned}\n")
            continue
        plan, entities = planned
        try:
            a = pipe.answer(q.question, entities, plan=plan)
        except Exception as exc:  # noqa: BLE001 - the demo reports and goes on
            print(f"Q: {q.question}\nfailed: {type(exc).__name__}: {exc}\n")
            continue
        if kind != "oracle":
            a.trace.llm_calls += 1  # its plan came from the batched planner call above: one prompt
        print(show(a, gold=gold))
        got, want = {i for i, _ in a.answers}, {i for i, _ in gold}
        solved += got == want
        print(f"exact match with gold: {'yes' if got == want else 'no'}\n")
    print(f"{solved}/{len(questions)} questions answered exactly (on the benchmark KG), "
          f"{time.perf_counter() - t0:.1f} s in all")
    return 0
