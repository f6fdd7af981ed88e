"""``memq demo``: the main job on real WebQSP test questions, as far as it is built."""

from __future__ import annotations

import argparse

DEMO_QUESTIONS = ("WebQTest-0", "WebQTest-1", "WebQTest-100", "WebQTest-994", "WebQTest-213", "WebQTest-15")


def register(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser("demo", help="answer real WebQSP test questions on the embedded benchmark KG")
    demo.add_argument("--ids", nargs="*", default=list(DEMO_QUESTIONS), help="WebQSP test question ids")
    demo.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from . import datasets
    from .decompose import decompose_query
    from .errors import MemQError
    from .sparql import parse_query

    by_id = {q.id: q for q in datasets.load("webqsp", "test")}
    print("memq demo: gold query -> statements (decomposition at CVT nodes)\n")
    for qid in args.ids:
        q = by_id.get(qid)
        if q is None:
            print(f"{qid}: not a WebQSP test question id")
            continue
        p = q.parses[0]
        print(f"{qid}: {q.question}")
        print(f"  topic entities: {', '.join(f'{n} ({m})' for m, n in p.topic_entities)}")
        try:
            d = decompose_query(parse_query(p.sparql), q.id, [m for m, _ in p.topic_entities])
        except MemQError as exc:
            print(f"  not decomposable: {exc}\n")
            continue
        for b in d.bounds:
            print(f"  [structure {b.statement.structure}] " + b.statement.sparql.replace("\n", " "))
        print(f"  gold answers: {', '.join(name for _, name in (p.answers or ())[:5])}\n")
    print("Not built yet: the memory bank, the planner, recall, reconstruction and execution on the")
    print("benchmark KG. This demo shows only the parse and decomposition stage.")
    return 0
