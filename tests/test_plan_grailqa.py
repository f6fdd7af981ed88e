"""Plan lines for GrailQA's constructs: class, superlative and count steps, derived and read back."""

from __future__ import annotations

from memq import datasets
from memq.describe.template import TemplateDescriber
from memq.plan.derive import derive_plan
from memq.plan.format import parse_plan, parse_step, render_step
from memq.types import PlanStep

_DESCRIBER = TemplateDescriber()


def _describe(statement) -> str:
    return _DESCRIBER.describe([statement])[0][0]


def _plan(qid: str):
    q = next(q for q in datasets.load("grailqa", "all") if q.id == qid)
    return derive_plan(q, _describe)


def test_class_steps_render_and_read_back():
    check = parse_step("Make sure ?x0 is a building.")
    assert (check.kind, check.target, check.value, check.op) == ("class", "?x0", "building", None)
    every = parse_step("Find every routed drug, assign it to ?x0.")
    assert (every.kind, every.target, every.value, every.op) == ("class", "?x0", "routed drug", "find")
    assert render_step(PlanStep("class", "", target="?x", value="exhibition")) == "Make sure ?x is an exhibition."
    assert render_step(every) == "Find every routed drug, assign it to ?x0."


def test_an_entity_check_is_not_a_class_step():
    step = parse_step("Make sure ?national_anthem is A Portuguesa.", ["A Portuguesa"])
    assert (step.kind, step.op, step.value) == ("check", "=", "A Portuguesa")
    assert parse_step("Make sure ?g is Male.").kind == "check"


def test_superlative_and_count_steps_render_and_read_back():
    top = parse_step("Sort ?x1 in descending order and keep every result tied for first.")
    assert (top.kind, top.target, top.op) == ("superlative", "?x1", "max")
    low = PlanStep("superlative", "", target="?d", op="min")
    assert parse_step(render_step(low)).op == "min"
    assert parse_step("Sort ?d in descending order and keep the first result.").kind == "sort"
    count = parse_step("Count ?x0, assign it to ?count.")
    assert (count.kind, count.source, count.target) == ("count", "?x0", "?count")
    assert parse_step("Count the number of ?x0.").source == "?x0"


def test_a_count_step_splits_from_the_line_before():
    plan = parse_plan("Find the works written of Ian Duncan Smith, assign it to ?x0. Count ?x0, assign it to ?n. "
                      "Finally the answer is ?n.", ["Ian Duncan Smith"])
    assert [s.kind for s in plan.steps] == ["find", "count", "answer"]


def test_a_question_without_a_topic_entity_starts_from_its_class():
    plan = _plan(next(q.id for q in datasets.load("grailqa", "train")
                      if q.question == "which building has less than 9 floors?"))
    assert plan.text.splitlines() == [
        "Find every building, assign it to ?x0.",
        "Find the floors of the building ?x0, assign it to ?x1.",
        "Make sure ?x1 < 9.",
        "Finally the answer is ?x0.",
    ]


def test_count_and_superlative_plans():
    counted = _plan("3203950018000")  # how many exhibition subjects ... curated by margaret macdonald
    assert counted.text.splitlines()[-2:] == ["Count ?x0, assign it to ?count.", "Finally the answer is ?count."]
    assert "Make sure ?x1 is an exhibition." in counted.text.splitlines()
    earliest = _plan("3206374001000")  # the earliest established religious organization
    assert "Sort ?x2 in ascending order and keep every result tied for first." in earliest.text.splitlines()
    assert "with type" not in earliest.text  # a CVT's class is implied by its relations


def test_every_grailqa_question_derives_a_plan():
    for q in datasets.load("grailqa", "all"):
        plan = derive_plan(q, _describe)
        assert plan.steps[-1].kind == "answer"


def test_the_template_describer_reads_the_new_kinds():
    from memq.decompose import decompose_query
    from memq.sparql import parse_query

    q = next(q for q in datasets.load("grailqa", "train") if q.id == "3203950018000")
    d = decompose_query(parse_query(q.parses[0].sparql), q.id, [m for m, _ in q.parses[0].topic_entities])
    texts = {b.statement.structure: _describe(b.statement) for b in d.bounds}
    assert texts["class"] in ("?entity1 is an exhibition", "?entity1 is an exhibition subject")
    assert texts["count"] == "the number of ?entity1"
    q = next(q for q in datasets.load("grailqa", "train") if q.id == "3206374001000")
    d = decompose_query(parse_query(q.parses[0].sparql), q.id, [])
    assert [_describe(b.statement) for b in d.bounds if b.statement.structure == "superlative"] == [
        "?entity1 is the smallest value"]
