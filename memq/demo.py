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
    from .plan.base import BACKENDS, DEFAULT_BACKEND

    demo = sub.add_parser("demo", help="answer real WebQSP test questions on the embedded benchmark KG")
    demo.add_argument("--ids", nargs="*", default=list(DEMO_QUESTIONS), help="WebQSP test question ids")
    demo.add_argument("--planner", choices=("auto", "fewshot", "finetuned", "grounded", "hybrid", "oracle"),
                      default="auto",
                      help="auto: the committed fine-tuned adapter choosing grounded plan lines (llama.cpp; free "
                           "generation on transformers), else few-shot; hybrid: free generation, and the grounded "
                           "planner when its plan finds nothing; "
                           "oracle: plans derived from the gold query (no LLM)")
    demo.add_argument("--backend", choices=BACKENDS, default=DEFAULT_BACKEND,
                      help="the planner's LLM runtime (transformers when llama-cpp-python is missing)")
    demo.add_argument("--ranker", default="auto",
                      help="the grounded planner's statement ranker: auto (the committed memory_bank/ranker), a "
                           "directory, or none (the model alone)")
    demo.set_defaults(handler=run)


def _timed(label: str, fn):
    print(f"  {label} ...", end=" ", flush=True)
    t0 = time.perf_counter()
    out = fn()
    print(f"{time.perf_counter() - t0:.1f} s", flush=True)
    return out


def load_parts(pipe, with_planner: bool) -> None:
    """Load the memory, the KG and the planner's model (:meth:`memq.pipeline.Pipeline.warm_up`), saying how long
    each takes and what a first run builds."""
    print("loading (a first run builds caches under the memq cache: the KG's on-disk store, the model files; "
          "later runs reuse them)")

    def step(what: str, fn):
        out = _timed(what, fn)
        for built, seconds in getattr(out, "prepared", ()):  # the planner model's files, built on a first run
            print(f"    built {built} in {seconds:.1f} s")
        return out

    pipe.warm_up(step, planner=with_planner)
    notes = [getattr(pipe.bank.embedder, "fallback", None)]
    if with_planner:
        notes += list(getattr(pipe.planner, "fallbacks", ()))
    for note in filter(None, notes):
        print(f"  fallback: {note}")


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from . import datasets
    from .ask import show
    from .pipeline import Config, Pipeline

    t0 = time.perf_counter()
    by_id = {q.id: q for q in datasets.load("webqsp", "test")}
    questions = []
    for qid in args.ids:
        if qid not in by_id:
            raise ValueError(f"not a WebQSP test question id: {qid!r}")
        questions.append(by_id[qid])
    kind = args.planner
    print("memq demo: real WebQSP test questions, answered on the embedded benchmark KG")
    print("(the KG is synthesised from the gold annotations, so answers here are not full-Freebase results)\n")
    plans: dict[str, object] = {}
    if kind == "oracle":
        from .evaluate.run import oracle_plan
        from .plan.data import template_describe

        describe = template_describe()
        for q in questions:
            try:
                plans[q.id] = oracle_plan(q, describe)
            except Exception as exc:  # noqa: BLE001 - shown to the user, question skipped
                plans[q.id] = exc
        pipe = Pipeline(replace(Config(), planner="given"))
    else:
        pipe = Pipeline(replace(Config(), planner=kind, backend=args.backend, ranker=args.ranker))
    load_parts(pipe, with_planner=kind != "oracle")
    print(f"ready in {time.perf_counter() - t0:.1f} s; answering {len(questions)} questions one at a time"
          + ("" if kind == "oracle" else " (planning included)") + "\n")
    solved = 0
    for i, q in enumerate(questions, 1):
        print("=" * 100)
        print(f"question {i}/{len(questions)}: {q.id}", flush=True)
        gold = list(q.parses[0].answers or ())
        started = time.perf_counter()
        planned = plans.get(q.id)
        if isinstance(planned, Exception):
            print(f"Q: {q.question}\nno plan: {planned}\n")
            continue
        plan, entities = planned if planned is not None else (None, dict(q.parses[0].topic_entities))
        try:
            a = pipe.answer(q.question, entities, plan=plan)
        except Exception as exc:  # noqa: BLE001 - the demo reports and goes on
            print(f"Q: {q.question}\nfailed: {type(exc).__name__}: {exc}\n")
            continue
        print(show(a, gold=gold))
        got, want = {mid for mid, _ in a.answers}, {mid for mid, _ in gold}
        solved += got == want
        print(f"exact match with gold: {'yes' if got == want else 'no'}; "
              f"question {i}/{len(questions)} took {time.perf_counter() - started:.1f} s\n", flush=True)
    print(f"{solved}/{len(questions)} questions answered exactly (on the benchmark KG), "
          f"{time.perf_counter() - t0:.1f} s in all, loading included")
    return 0
