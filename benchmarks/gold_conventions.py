"""What the gold queries of a training split say about two reconstruction rules, with no KG and no test question.

    .venv/bin/python benchmarks/gold_conventions.py [--dataset cwq] [--limit 3000]

1. Which node the answer is said not to be (``FILTER (?x != ...)``), against
   :meth:`memq.reconstruct.Reconstructor.answer_starts` on the oracle plan derived from the same query: the
   share of queries where the two name the same nodes, and the first disagreements.
2. How ORDER BY casts its key, by the schema range of the relation that binds the key (raw, xsd:integer,
   xsd:float, xsd:datetime): the reason Sort orders by the key as a number first, then as it is.

The rules were chosen on these train-split figures (docs/results.md, "The reconstruction ceiling").
"""

from __future__ import annotations

import argparse
import random
import re
from collections import Counter

from memq import datasets
from memq.errors import MemQError
from memq.plan.data import template_describe
from memq.plan.derive import derive_plan
from memq.reconstruct import Reconstructor
from memq.reconstruct.assemble import answer_variable
from memq.schema import freebase_schema
from memq.sparql import parse_query
from memq.sparql.model import Call, Iri, Var
from memq.types import Plan, Trace

EXCLUDED = re.compile(r"FILTER \(\?x != (\?\w+|ns:[\w.]+)\)")


def exclusions(questions, limit: int) -> None:
    describe = template_describe()
    counts: Counter = Counter()
    differ = []
    for q in questions[:limit]:
        try:
            derived = derive_plan(q, describe)
            rec = Reconstructor(dict(derived.entities))
        except (MemQError, ValueError):
            counts["no oracle plan"] += 1
            continue
        parse = next(p for p in q.parses if p.parse_id == derived.parse_id)
        gold = {x if x.startswith("?") else x[3:] for x in EXCLUDED.findall(parse.sparql)}
        plan = Plan(steps=list(derived.steps))
        triples = list(parse_query(parse.sparql).where.all_triples())
        starts = rec.answer_starts(plan.steps, answer_variable(plan, Trace()), triples)
        ours = {f"?{t.name}" if isinstance(t, Var) else t.local for t in starts}
        counts["same" if ours == gold else "differ"] += 1
        if ours != gold:
            differ.append((q.id, sorted(gold), sorted(ours)))
    judged = counts["same"] + counts["differ"]
    print(f"answer != node: {counts['same']} of {judged} gold queries ({counts['same'] / max(1, judged):.1%}) name the "
          f"nodes the rule names; {counts['no oracle plan']} have no oracle plan")
    for qid, gold, ours in differ[:10]:
        print(f"  {qid}: gold {gold or 'none'}, rule {ours}")


def order_casts(questions) -> None:
    schema = freebase_schema()
    counts: Counter = Counter()
    for q in questions:
        for p in q.parses:
            if "ORDER BY" not in (p.sparql or ""):
                continue
            try:
                query = parse_query(p.sparql)
            except MemQError:
                continue
            if len(query.order_by) != 1:
                continue
            expr = query.order_by[0].expr
            cast = expr.op.rsplit("#", 1)[-1] if isinstance(expr, Call) else "raw"
            key = expr.args[0] if isinstance(expr, Call) else expr
            rel = next((t.p.local for t in query.where.all_triples() if t.o == key and isinstance(t.p, Iri)), None)
            counts[(schema.range(rel) or "unknown") if rel else "no relation", cast] += 1
    print("ORDER BY key cast, by the range of the relation that binds the key:")
    for (rng, cast), n in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"  {rng:20} {cast:10} {n}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="cwq", choices=datasets.DATASETS)
    ap.add_argument("--limit", type=int, default=3000, help="questions for the first check (a fixed random sample)")
    args = ap.parse_args()
    questions = datasets.load(args.dataset, "train")
    print(f"{args.dataset} train: {len(questions)} questions")
    order_casts(questions)
    random.Random(0).shuffle(questions)
    exclusions(questions, args.limit)


if __name__ == "__main__":
    main()
