"""How often the derived train plans break the grounded planner's structural rules, the evidence each rule rests on.

    .venv/bin/python benchmarks/plan_rules_train.py [--json OUT.json] [--datasets webqsp cwq]

For WebQSP's and CWQ's train plans and GrailQA's train and synthetic ones (:func:`memq.plan.data.load_split`, derived
on first use), each with its dataset's memory bank for the statements' relations, it counts:

- ``third_walks``: Find steps that are the third in a row along the same relations
  (:func:`memq.plan.rules.walks_back`; the grounded planner does not offer them), ``back_walks``, steps along the
  edge of the Find two back on their walk, by its relations or its text, with another between (with GrailQA's lines
  not offered), and ``second_walks``, steps that take the edge of the step before them once more, which it does
  offer;
- ``repeated_entity_finds``: Find steps of a statement the plan already found from the same given entity (not
  offered), ``repeated_variable_finds``, the same from a ?variable, and ``repeated_variable_finds_unchecked``, those
  of them whose first Find's target no Make sure step before them holds to a value (neither offered);
- ``unjoined``: plans whose answer some other ?variable is not joined with (:func:`memq.plan.format.unjoined`; no
  plan ends so);
- ``unread_finds``: plans with a Find step whose value no other step reads (:func:`memq.plan.rules.unread_dropped`;
  with GrailQA's lines the planner drops such steps);
- ``sorts_asking_no_time``: plans that sort, of questions that ask for no time (:data:`memq.plan.rules.TIME_ASKED`),
  and of those the ones that answer with the ?variable they sort (``..._answering_the_key``; the planner refuses
  such an ending, ``sorted_answers``), and the same for the questions that ask for a time;
- ``class_checked``: plans that check the notable type of a ?variable (:func:`memq.plan.format.classed`: the
  notable types of ?w, then ``Make sure ?notable_types is Country.``), and ``class_checked_answering_another``, those
  that answer with a ?variable whose notable type they do not check (the planner refuses such an ending,
  ``classed_answers``);
- for GrailQA, how each plan's answer is classed: ``answers_class_lined`` (a class line names it or a count counts
  it, :func:`memq.plan.rules.class_lined`), ``answers_values`` (numbers, dates and other literals; the planner
  refuses such an ending unless the question asks how many, ``LineRules.answers_values``) and
  ``answers_without_class``, with those plans' questions (the planner refuses an ending at a ?variable no class line
  names where a class check is offered, ``classed_answers``);
- for WebQSP, whose train facts the benchmark KG holds, ``entity_checks``: the ``Make sure ?v is X`` steps with X an
  entity, and ``entity_checks_never_passing``, those whose X the KG never gives where a Find step of the plan assigns
  ?v (:meth:`memq.plan.neighbourhood.Neighbourhood.takes`; a written one is refused). CWQ's train facts are not in
  the benchmark KG, so its checks are not counted;
- for WebQSP and CWQ, ``class_checks``: those of the checks whose ?v a Find step assigns ``type.type`` (notable
  types), and ``class_checks_refused``, those the planner refuses: X names no commons type of the schema
  (:meth:`memq.describe.schema.FreebaseSchema.names_type`) and the KG never gives it there. The benchmark KG holds
  the classes CWQ's train plans check (a notable type is a class many nodes share), not their other facts.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SETS = (("webqsp", "train", "webqsp"), ("cwq", "train", "cwq"), ("grailqa", "train", "grailqa+schema"),
        ("grailqa", "synthetic-train", "grailqa+schema"))


def count(plans, get, examples: list | None = None) -> dict:
    """The counts of the module docstring for ``plans``; given ``examples`` (GrailQA's lines), also how the answer is
    classed, with the questions of the plans that answer without a class appended to ``examples``."""
    from memq.plan.format import classed, unjoined
    from memq.plan.lines import Hyp
    from memq.plan.rules import TIME_ASKED, class_lined, held_to_values, unread_dropped, walks_back

    out = dict.fromkeys(("plans", "finds", "third_walks", "back_walks", "second_walks", "repeated_entity_finds",
                         "repeated_variable_finds", "repeated_variable_finds_unchecked", "unjoined", "unread_finds",
                         "sorts_asking_no_time", "sorts_asking_no_time_answering_the_key", "sorts_asking_a_time",
                         "sorts_asking_a_time_answering_the_key", "class_checked",
                         "class_checked_answering_another"), 0)
    if examples is not None:
        out.update(answers_class_lined=0, answers_values=0, answers_without_class=0)
    for plan in plans:
        out["plans"] += 1
        steps, found = [], {}  # (statement, source) -> what its first Find assigned
        for step, statement_id in zip(plan.steps, plan.statement_ids, strict=True):
            step = replace(step, statement=statement_id)
            record = get(statement_id) if statement_id else None
            if step.kind == "find" and record is not None:
                relations = record.statement.relations
                out["finds"] += 1
                way = walks_back(steps, get, step, relations)
                if way is not None:
                    out[f"{way}_walks"] += 1
                before = next((s for s in reversed(steps) if s.kind == "find" and s.target == step.source), None)
                again = before is not None and get(before.statement) is not None \
                    and set(get(before.statement).statement.relations) == set(relations)
                out["second_walks"] += again
                if (statement_id, step.source) in found:
                    key = "repeated_variable_finds" if (step.source or "?").startswith("?") else "repeated_entity_finds"
                    out[key] += 1
                    if key == "repeated_variable_finds":  # was what the first Find found held to a value?
                        out["repeated_variable_finds_unchecked"] += found[statement_id, step.source] \
                            not in held_to_values(steps)
                found.setdefault((statement_id, step.source), step.target)
            steps.append(step)
        answer = next((s.target for s in steps if s.kind == "answer"), None)
        out["unjoined"] += bool(answer and unjoined(steps, answer))
        whole = Hyp(lines=[s.text for s in steps], steps=steps)
        out["unread_finds"] += unread_dropped(whole) is not whole
        if any(s.kind == "sort" for s in steps):
            key = "sorts_asking_a_time" if TIME_ASKED.search(plan.question) else "sorts_asking_no_time"
            out[key] += 1
            out[f"{key}_answering_the_key"] += any(s.kind == "sort" and s.target == answer for s in steps)
        if held := classed(steps, get):
            out["class_checked"] += 1
            out["class_checked_answering_another"] += answer not in held
        if examples is not None:
            kind = "class_lined" if answer in class_lined(steps) else "values" if values(steps, get, answer) \
                else "without_class"
            out[f"answers_{kind}"] += 1
            if kind == "without_class":
                examples.append(plan.question)
    return out


def values(steps, get, var: str) -> bool:
    """Whether every Find step that assigns ``var`` assigns literals only, by the schema: values that no class line
    can name."""
    from memq.plan.neighbourhood import assigned_types
    from memq.plan.rules import assigns_literals
    from memq.schema import freebase_schema

    records = [get(s.statement) for s in steps if s.kind == "find" and s.target == var and s.statement]
    return assigns_literals(assigned_types(r.statement, freebase_schema()) for r in records if r is not None)


def entity_checks(plans, get, neigh, classes_only: bool = False) -> dict:
    """The entity checks of ``plans`` and those the KG never passes; ``classes_only``: the checks of a class (a
    ?variable of ``type.type``) alone, and those the planner refuses (a value that names no type of the schema and
    that the KG never gives there)."""
    from memq.describe.schema import schema
    from memq.plan.neighbourhood import assigned_types
    from memq.schema import freebase_schema
    from memq.sparql.model import FB, Iri

    keys = ("class_checks", "class_checks_refused") if classes_only else ("entity_checks",
                                                                          "entity_checks_never_passing")
    out = dict.fromkeys(keys, 0)
    for plan in plans:
        ids = {name: mid for mid, name in plan.entities}
        for step in plan.steps:
            mid = ids.get(step.value or "")
            if step.kind != "check" or step.relation is not None or (step.op or "=") != "=" or not mid:
                continue
            finds = [get(sid) for s, sid in zip(plan.steps, plan.statement_ids, strict=True)
                     if s.kind == "find" and s.target == step.target and sid]
            if not finds or not all(finds):
                continue
            if classes_only and not any("type.type" in assigned_types(r.statement, freebase_schema()) for r in finds):
                continue
            out[keys[0]] += 1
            if not (classes_only and schema().names_type(step.value)):  # a type's name is not probed
                out[keys[1]] += not any(neigh.takes(r.statement, Iri(FB + mid)) for r in finds)
    return out


def main() -> int:
    from memq.kg import open_kg
    from memq.memory.bank import MemoryBank
    from memq.plan.data import GRAILQA_SYNTHETIC, load_split
    from memq.plan.neighbourhood import Neighbourhood

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the counts here too")
    ap.add_argument("--datasets", nargs="+", choices=sorted({d for d, _, _ in SETS}), default=None,
                    help="count these datasets' plans only (default: all)")
    args = ap.parse_args()
    results, neigh = {}, None
    for dataset, split, bank in SETS:
        if args.datasets and dataset not in args.datasets:
            continue
        get = MemoryBank.load(ROOT / "memory_bank" / bank).get
        # the synthetic programs are a dataset of their own (memq.plan.data.GRAILQA_SYNTHETIC), train only
        plans = load_split(GRAILQA_SYNTHETIC, "train") if split == "synthetic-train" else load_split(dataset, split)
        examples = [] if dataset == "grailqa" else None
        results[f"{dataset} {split}"] = count(plans, get, examples)
        if examples:
            results[f"{dataset} {split}"]["answers_without_class_questions"] = examples
        if dataset in ("webqsp", "cwq"):
            neigh = neigh or Neighbourhood(open_kg(str(ROOT / "data" / "kg" / "benchmark.nq.gz")))
            if dataset == "webqsp":
                results[f"{dataset} {split}"].update(entity_checks(plans, get, neigh))
            results[f"{dataset} {split}"].update(entity_checks(plans, get, neigh, classes_only=True))
        print(f"{dataset} {split}: {json.dumps(results[f'{dataset} {split}'])}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
