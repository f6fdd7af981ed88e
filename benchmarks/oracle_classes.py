"""Explain what an oracle-plan run falls short on, by question class.

    .venv/bin/python benchmarks/oracle_classes.py RUN.jsonl[.gz] [--dataset webqsp] [--memory memory_bank/webqsp]

Classes, checked in order for every question that is not perfect (F1 < 1 or EHR < 1; GrailQA: F1 < 0.99):
  no-plan          the gold query yields no oracle plan (aggregates, undescribed filters)
  kg-not-exact     the gold query itself does not return its gold answers on the benchmark KG
  empty-gold       the gold answer is empty, memq answered anyway (self-repair relaxes checks when a query finds
                   nothing; on the dev split that gains F1, see the README)
  not-in-memory    a statement of the gold query is not in the memory bank (never seen in the memory's source)
  other            everything else: recall picked another statement, or reconstruction differs; split by what
                   the gold query has and what went wrong:
                     stray-synthetic  an answer is a synthetic node of the benchmark KG that the gold query does
                                      not return (a filter of the gold query is missing or weaker)
                     order            the gold query sorts (ORDER BY), and the answers differ
                     comparison       the gold query compares two values (FILTER ?a < ?b, a date or number)
                     time-constraint  the gold query checks a CVT's dates (NOT EXISTS ... || EXISTS ...)
                     missing          some gold answers are missing, no other sign
                     extra            answers the gold query does not return, no other sign
                     structure        EHR < 1 with the answers right
                   GrailQA (--dataset grailqa) splits 'other' by comparing the query memq ran with the gold one,
                   the first that holds:
                     class-collision  a class of the gold query is replaced by another class of the same name
                                      (film.producer -> music.producer: "producer")
                     class-other      a class of the gold query is missing or replaced by another
                     reverse-pair     a relation of the gold query is replaced by its schema reverse (the same
                                      fact read from the other end; the benchmark KG holds only one direction)
                     label-collision  a relation of the gold query is replaced by another with the same label
                                      (thrust_sea_level / thrust_vacuum: "thrust")
                     relation-missing a relation of the gold query is missing or replaced by another
                     value-form       same relations and classes; a checked value is written in a form reconstruction
                                      reads as text (1.9e+06, 1953-08:00)
                     superlative      same relations and classes, the gold query takes a MAX/MIN
                     (then the WebQSP/CWQ kinds above)

Before and after the reconstruction-ceiling rules (issue 32) on CWQ test: docs/results.md.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter, defaultdict

from memq import datasets
from memq.decompose import decompose_query
from memq.errors import MemQError
from memq.evaluate.run import load_records
from memq.memory.bank import MemoryBank
from memq.sparql import parse_query


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--dataset", default="webqsp")
    ap.add_argument("--memory", default="memory_bank/webqsp")
    ap.add_argument("--split", default="test")
    ap.add_argument("--ids", help="a file of question ids, one a line: classify only these (a part of dev)")
    ap.add_argument("--list", action="store_true", help="list every 'other' question")
    args = ap.parse_args()
    records = list(load_records(args.run).values())  # .jsonl or .jsonl.gz
    if args.ids:
        keep = set(open(args.ids, encoding="utf-8").read().split())
        records = [r for r in records if r["id"] in keep]
    memory = {r.statement.id for r in MemoryBank.load(args.memory).records}  # with the banks it includes
    kg_report = "data/kg/grailqa_report.json" if args.dataset == "grailqa" else "data/kg/benchmark_report.json"
    report = json.load(open(kg_report, encoding="utf-8"))
    inexact = {f["id"] for f in report.get("failures", []) if not f.get("exact_anyway")}
    questions = {q.id: q for q in datasets.load(args.dataset, args.split)}
    classes: dict[str, list] = defaultdict(list)
    for r in records:
        q = questions[r["id"]]
        if args.dataset == "grailqa":  # by the answers only: EHR < 1 is common where the answers are right
            perfect = r["f1"] is not None and r["f1"] >= 0.99
        else:
            perfect = (r["f1"] is None or r["f1"] >= 1.0) and r["ehr"] >= 1.0
        if perfect:
            classes["perfect"].append(r)
            continue
        if r.get("error") == "planner":
            classes["no-plan"].append(r)
            continue
        if all(p.parse_id in inexact for p in q.parses):
            classes["kg-not-exact"].append(r)
            continue
        if not r.get("gold") and r.get("answers"):
            classes["empty-gold"].append(r)
            continue
        missing = True
        for p in q.parses:
            try:
                d = decompose_query(parse_query(p.sparql), q.id, [m for m, _ in p.topic_entities])
            except MemQError:
                continue
            if all(b.statement.id in memory for b in d.bounds if b.statement.structure in ("1", "2", "3")):
                missing = False
        classes["not-in-memory" if missing else "other"].append(r)
    n = len(records)
    print(f"{n} questions, {args.run}")
    print(f"{'class':16} {'questions':>9} {'share':>7} {'mean F1':>8} {'mean EHR':>9}")
    for name in ("perfect", "no-plan", "kg-not-exact", "empty-gold", "not-in-memory", "other"):
        rs = classes.get(name, [])
        f1 = [x["f1"] for x in rs if x["f1"] is not None]
        print(f"{name:16} {len(rs):9d} {len(rs) / n:7.1%} {sum(f1) / max(1, len(f1)):8.3f} "
              f"{sum(x['ehr'] for x in rs) / max(1, len(rs)):9.3f}")
    inside = [x for k in ("perfect", "empty-gold", "other") for x in classes.get(k, [])]
    f1 = [x["f1"] for x in inside if x["f1"] is not None]
    print(f"\nwithin reach (plan derivable, KG exact, all statements in memory): {len(inside)} questions, "
          f"F1 {sum(f1) / max(1, len(f1)):.3f}, EHR {sum(x['ehr'] for x in inside) / max(1, len(inside)):.3f}")
    print("'other' errors:", dict(Counter(x.get("error") for x in classes.get("other", []))))
    kinds = Counter(other_kind(x, questions[x["id"]]) for x in classes.get("other", []))
    print("'other' by kind:", ", ".join(f"{k} {v}" for k, v in kinds.most_common()))
    if args.list:
        for x in classes.get("other", []):
            print("  ", x["id"], other_kind(x, questions[x["id"]]), x.get("error"), round(x["f1"] or 0, 3),
                  round(x["ehr"], 3), (x.get("fallbacks") or [""])[:2])


def other_kind(record: dict, question) -> str:
    """What an 'other' question's gold query has, or what went wrong (the module docstring's list)."""
    gold = " ".join(p.sparql or "" for p in question.parses)
    if question.dataset == "grailqa":
        kind = grail_kind(record, gold)
        if kind is not None:
            return kind
    if any("memq.dev/synthetic/" in str(a[0]) for a in record.get("answers") or []):
        return "stray-synthetic"
    if "ORDER BY" in gold:
        return "order"
    if re.search(r"FILTER\s*\(\s*\?\w+\s*[<>]=?\s*\?\w+", gold):
        return "comparison"
    if "NOT EXISTS" in gold:
        return "time-constraint"
    if record["f1"] is not None and record["f1"] >= 1.0:
        return "structure"
    got = {str(a[0]) for a in record.get("answers") or []}
    return "missing" if not got or got <= set(record.get("gold") or []) else "extra"


_NS = re.compile(r"(?:<http://rdf\.freebase\.com/ns/|\bns:|(?<![\w/]):)([a-z_0-9]+(?:\.[a-z_0-9]+)+)>?")
_CLASS = re.compile(r"type\.object\.type>?\s+(?:<http://rdf\.freebase\.com/ns/|ns:|:)([a-z_0-9.]+)")
_VALUE = re.compile(r'Make sure \?\w+ (?:is|[<>]=?) (-?\d+(?:\.\d+)?[eE][+-]?\d+|-?\d{4}[+-]\d{2}:\d{2})\.')


def grail_kind(record: dict, gold: str) -> str | None:
    """A GrailQA kind (the module docstring's list), or None when the queries read the same relations and
    classes and nothing else GrailQA-specific shows."""
    from memq.describe.schema import schema

    fb = schema()
    ours = record.get("sparql") or ""
    gold_classes, our_classes = set(_CLASS.findall(gold)), set(_CLASS.findall(ours))
    lost = gold_classes - our_classes
    if lost:
        if any(fb.type_name(c) == fb.type_name(o) for c in lost for o in our_classes - gold_classes):
            return "class-collision"
        return "class-other"

    def rels(text: str) -> set[str]:
        return {r for r in _NS.findall(text) if r.count(".") >= 2 and r != "type.object.type"
                and not r.startswith("m.")}

    gold_rels, our_rels = rels(gold), rels(ours)
    lost, extra = gold_rels - our_rels, our_rels - gold_rels
    if lost:
        if any(fb.reverse(g) == o for g in lost for o in extra):
            return "reverse-pair"
        if any(fb.label(g) == fb.label(o) for g in lost for o in extra):
            return "label-collision"
        return "relation-missing"
    if any(_VALUE.search(s) for s in record.get("plan") or []):
        return "value-form"
    if "MAX(" in gold or "MIN(" in gold:
        return "superlative"
    return None


if __name__ == "__main__":
    main()
