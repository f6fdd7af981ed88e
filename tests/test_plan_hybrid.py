"""The hybrid planner: free generation, and the grounded planner only when the free plan finds nothing."""

from __future__ import annotations

import json

import pytest
from test_plan_grounded import BIEBER, FailingKG, bank, kg, planner  # noqa: F401 - fixtures

from memq.evaluate.run import evaluate_question, hybrid_records, saved_plan
from memq.pipeline import Config, Pipeline
from memq.plan.format import answers_its_check, parse_plan
from memq.plan.hybrid import HybridPlanner
from memq.plan.planner import ScriptedPlanner

QUESTION = "who are justin bieber's siblings?"
SIBLING = "Find the sibling of the siblings of the person Justin Bieber, assign it to ?x.\nFinally the answer is ?x."
PET = "Find the pet of the siblings of the person Justin Bieber, assign it to ?x.\nFinally the answer is ?x."
GENDER = "Find the gender of the person Justin Bieber, assign it to ?x.\nFinally the answer is ?x."
SIBLINGS = {"m.0gxnnwq", "m.0jazz01"}


def hybrid(kg, bank, free_text: str, grounded_target: str = SIBLING) -> HybridPlanner:  # noqa: F811
    return HybridPlanner(planner(kg, bank, grounded_target), free=ScriptedPlanner({QUESTION: free_text}))


def pipeline(kg, bank, planner_, **config) -> Pipeline:  # noqa: F811
    return Pipeline(Config(planner="hybrid", repair=False, **config), bank=bank, kg=kg, planner=planner_)


def test_a_free_plan_that_answers_is_kept_and_the_grounded_planner_never_runs(kg, bank):  # noqa: F811
    h = hybrid(kg, bank, SIBLING, grounded_target=GENDER)
    answer = pipeline(kg, bank, h).answer(QUESTION, BIEBER)
    assert {i for i, _ in answer.answers} == SIBLINGS
    assert h.grounded.calls == 0 and answer.plan.rescue is None and answer.trace.llm_calls == 1
    assert not [f for f in answer.trace.fallbacks if f.startswith("hybrid")] and answer.trace.plans == []


def test_a_free_plan_that_finds_nothing_is_rescued_by_the_grounded_planner(kg, bank):  # noqa: F811
    h = hybrid(kg, bank, PET)  # "pet" is a memory statement, but no sibling has one in the KG
    answer = pipeline(kg, bank, h).answer(QUESTION, BIEBER)
    assert {i for i, _ in answer.answers} == SIBLINGS
    assert answer.plan.raw == SIBLING and answer.trace.plans[0] == {
        "plan": PET, "score": None, "rows": 0, "planner": "free generation"}
    assert [p["rows"] for p in answer.trace.plans[1:]] == [2]
    assert answer.trace.llm_calls == 1 + h.grounded.calls and h.grounded.calls > 0
    assert "forward_passes" in answer.trace.cost["rescue"]
    assert any(f.startswith("hybrid: free generation's plan found nothing") for f in answer.trace.fallbacks)
    # without the hybrid planner the same free plan finds nothing
    given = Pipeline(Config(planner="given", repair=False), bank=bank, kg=kg)
    assert given.answer(QUESTION, BIEBER, plan=parse_plan(PET, ["Justin Bieber"])).answers == []


def test_a_free_plan_that_answers_with_the_value_its_check_names_is_rescued(kg, bank):  # noqa: F811
    """"... Find the gender of the person ?x, assign it to ?gender. Make sure ?gender is Male. Finally the answer is
    ?gender." finds one row, Male itself: no train plan answers so (memq.plan.format.answers_its_check), and the
    grounded planner's plan (here a saved one) is taken as for a free plan that found nothing (traced). If it finds
    nothing, the free plan's answer stands."""
    pinned = SIBLING.split("\n")[0] + ("\nFind the gender of the person ?x, assign it to ?gender.\n"
                                       "Make sure ?gender is Male.\nFinally the answer is ?gender.")
    assert answers_its_check(parse_plan(pinned, ["Justin Bieber"]).steps)
    assert not answers_its_check(parse_plan(SIBLING, ["Justin Bieber"]).steps)
    given = Pipeline(Config(planner="given", repair=False), bank=bank, kg=kg)
    assert [n for _, n in given.answer(QUESTION, BIEBER, plan=parse_plan(pinned, ["Justin Bieber"])).answers] == [
        "Male"]
    for rescue, found in ((SIBLING, SIBLINGS), (GENDER, {"m.05zppz"})):  # Bieber's own gender: nothing in this KG
        plan = parse_plan(pinned, ["Justin Bieber"])
        plan.rescue = parse_plan(rescue, ["Justin Bieber"])
        answer = given.answer(QUESTION, BIEBER, plan=plan)
        assert {i for i, _ in answer.answers} == found and answer.plan.raw == (SIBLING if rescue == SIBLING else pinned)
        assert answer.trace.plans[0] == {"plan": pinned, "score": None, "rows": 1, "planner": "free generation"}
        assert "hybrid: free generation's plan answers with the value one of its checks names" in answer.trace.fallbacks
    assert "hybrid: the grounded planner's plans found nothing either; the free plan's answer stands" \
        in answer.trace.fallbacks


def test_a_query_pins_its_answer_only_by_an_equality_with_a_constant():
    from memq.reconstruct.filters import named_filter, pins
    from memq.sparql.model import Var
    from memq.sparql.parser import parse_query

    x = Var("x")
    head = "PREFIX ns: <http://rdf.freebase.com/ns/> SELECT ?x WHERE { ns:m.0a ns:r ?x . "
    for where, pinned in (("FILTER(?x = ns:m.04ztj)", True), ("FILTER(ns:m.04ztj = ?x)", True),
                          ("FILTER(?x = \"1990\")", True), ("FILTER(?x != ns:m.04ztj)", False),
                          ("FILTER(?y = ns:m.04ztj)", False), ("FILTER(?x = ?y)", False), ("", False),
                          ("FILTER(!isLiteral(?x) || lang(?x) = '' || langMatches(lang(?x), 'en'))", False)):
        assert pins(parse_query(head + where + " }")) is pinned, where
    query = parse_query(head + "}")
    named = type(query.where)(triples=query.where.triples, filters=(named_filter(x, "Male", Var("n")),))
    assert pins(type(query)(where=named, projection=query.projection))
    assert not pins(type(query)(where=named))  # a query that selects no variable pins none


def test_an_empty_free_answer_stands_when_the_rescue_finds_nothing_or_falls_back(kg, bank):  # noqa: F811
    pipe = Pipeline(Config(planner="given", repair=False), bank=bank, kg=kg)
    plan = parse_plan(PET, ["Justin Bieber"])
    plan.rescue = parse_plan(GENDER, ["Justin Bieber"])  # a saved rescue that finds nothing
    answer = pipe.answer(QUESTION, BIEBER, plan=plan)
    assert answer.answers == [] and answer.plan.raw == PET
    assert [p["rows"] for p in answer.trace.plans] == [0, 0]
    assert "hybrid: the grounded planner's plans found nothing either; the free plan's empty answer stands" \
        in answer.trace.fallbacks

    fails = HybridPlanner(planner(FailingKG(), bank, SIBLING), free=ScriptedPlanner({QUESTION: PET}))
    answer = pipeline(kg, bank, fails).answer(QUESTION, BIEBER)
    assert answer.answers == [] and answer.plan.raw == PET
    assert any("kg.invalid" in f and f.startswith("planner: ") for f in answer.trace.fallbacks)
    assert "hybrid: the grounded planner fell back to free generation; the free plan's empty answer stands" \
        in answer.trace.fallbacks


class _Question:
    def __init__(self, text: str) -> None:
        self.id, self.question = "WebQTest-1", text
        self.parses = [type("Parse", (), {"topic_entities": BIEBER, "sparql": "", "answers": []})()]


def test_a_hybrid_record_keeps_the_rescue_and_rescoring_needs_no_model_call(kg, bank, monkeypatch):  # noqa: F811
    import memq.evaluate.run as run

    monkeypatch.setattr(run, "score", lambda record, *a: [])  # scoring is tested elsewhere
    h = hybrid(kg, bank, PET)
    pipe = pipeline(kg, bank, h)
    record = evaluate_question(pipe, _Question(QUESTION), "hybrid", planned=(h.plan(QUESTION, BIEBER), 0.25))
    record = json.loads(json.dumps(record))  # as a per-question file holds it
    assert record["plan_raw"] == PET and record["plan"][0].startswith("Find the sibling")
    assert record["rescue"]["plan_raw"] == SIBLING and record["rescue"]["plan_cost"]["forward_passes"] > 0
    calls = h.grounded.calls
    plan, seconds = saved_plan(record, BIEBER)
    assert seconds == 0.25 and plan.raw == PET and plan.rescue.raw == SIBLING
    assert plan.rescue.cost["plan_from"] == "saved"
    again = pipe.answer(QUESTION, BIEBER, plan=plan)
    assert {i for i, _ in again.answers} == SIBLINGS and h.grounded.calls == calls
    broken, _ = saved_plan({**record, "rescue": "not a record"}, BIEBER)
    assert "rescue of WebQTest-1" in str(broken)


def test_free_and_grounded_records_of_a_question_make_one_hybrid_record():
    free = {"id": "q1", "planner": "finetuned", "plan_raw": PET, "plan_s": 0.1}
    alone = {"id": "q2", "planner": "finetuned", "plan_raw": SIBLING}
    grounded = {"id": "q1", "planner": "grounded", "plan_raw": SIBLING, "plan_s": 3.0,
                "plan_beam": [[SIBLING, -1.0]], "plan_cost": {"forward_passes": 9},
                "fallbacks": ["planner: a note", "step 1: not a planner's note"]}
    out = hybrid_records([free, alone, grounded, {"id": "q3", "planner": "grounded", "plan_raw": GENDER}])
    assert set(out) == {"q1", "q2"} and "rescue" not in out["q2"]
    assert out["q1"]["rescue"] == {"plan_raw": SIBLING, "plan_beam": [[SIBLING, -1.0]],
                                   "plan_cost": {"forward_passes": 9}, "plan_s": 3.0,
                                   "fallbacks": ["planner: a note"]}
    plan, _ = saved_plan(out["q1"], BIEBER)
    assert plan.rescue.notes == ["a note"] and plan.notes == []


def test_the_hybrid_planner_is_a_planner_by_name(kg, bank):  # noqa: F811
    from memq.errors import MemQError
    from memq.plan.planner import REPO_ADAPTER, make_planner

    adapter = str(REPO_ADAPTER).format(dataset="webqsp")
    made = make_planner("hybrid", adapter=adapter, kg=kg, bank=bank)
    assert isinstance(made, HybridPlanner) and made.free is made.grounded.free and made.name.startswith("hybrid:")
    with pytest.raises(MemQError, match="the hybrid planner needs the KG"):
        make_planner("hybrid", adapter=adapter)


def test_a_free_plan_that_makes_no_query_or_cannot_be_read_is_rescued_too(kg, bank):  # noqa: F811
    from memq.errors import PlanParseError, ReconstructionError

    nothing = "Make sure ?x is Male.\nFinally the answer is ?x."  # no Find step: no graph pattern to query
    given = Pipeline(Config(planner="given", repair=False), bank=bank, kg=kg)
    with pytest.raises(ReconstructionError):
        given.answer(QUESTION, BIEBER, plan=parse_plan(nothing, ["Justin Bieber"]))
    answer = pipeline(kg, bank, hybrid(kg, bank, nothing)).answer(QUESTION, BIEBER)
    assert {i for i, _ in answer.answers} == SIBLINGS and answer.plan.raw == SIBLING
    assert any(f.startswith("hybrid: free generation's plan makes no query") for f in answer.trace.fallbacks)
    # nothing found by the rescue either: the free plan's error stands
    plan = parse_plan(nothing, ["Justin Bieber"])
    plan.rescue = parse_plan(GENDER, ["Justin Bieber"])
    with pytest.raises(ReconstructionError):
        given.answer(QUESTION, BIEBER, plan=plan)

    class Unreadable(ScriptedPlanner):
        def plan(self, question, entities):
            raise PlanParseError("no readable plan step in 'blah'")

        def plan_many(self, items, progress=None):
            return [PlanParseError("no readable plan step in 'blah'") for _ in items]

    h = HybridPlanner(planner(kg, bank, SIBLING), free=Unreadable({}))
    answer = pipeline(kg, bank, h).answer(QUESTION, BIEBER)
    assert {i for i, _ in answer.answers} == SIBLINGS
    assert any("free generation wrote no readable plan" in f and "blah" in f for f in answer.trace.fallbacks)
    assert h.plan_many([(QUESTION, BIEBER)])[0].steps == []
    # a saved free-generation record with no plan, and its rescue, re-score with no model call
    record = {"id": "q", "planner": "finetuned", "exception": "PlanParseError: no readable plan step",
              "rescue": {"plan_raw": SIBLING}}
    plan, _ = saved_plan(record, BIEBER)
    assert plan.steps == [] and plan.rescue.raw == SIBLING


def test_memq_ask_shows_the_free_plan_tried_and_the_rescue_s_cost(kg, bank):  # noqa: F811
    from memq.ask import answer_json, show

    answer = pipeline(kg, bank, hybrid(kg, bank, PET)).answer(QUESTION, BIEBER)
    text = show(answer)
    assert "  free generation  rows 0  " + PET.replace("\n", " / ") in text
    assert "rescue planning cost: " in text and "forward_passes" in text
    assert answer_json(answer)["plans_tried"][0]["planner"] == "free generation"


def test_a_rescue_answers_as_far_from_the_entities_as_the_free_plan(kg, bank):  # noqa: F811
    from memq.errors import MemQError
    from memq.plan.format import hops
    from memq.plan.search import GroundedConfig

    longer = ("Find the pet of the siblings of the person Justin Bieber, assign it to ?y.\n"  # no pet in the KG
              "Find the gender of the person ?y, assign it to ?x.\nFinally the answer is ?x.")
    answer = pipeline(kg, bank, hybrid(kg, bank, longer)).answer(QUESTION, BIEBER)
    steps = answer.plan.steps
    assert steps[0].text == SIBLING.splitlines()[0] and hops(steps, steps[-1].target) == 2  # the model alone: 1
    assert answer.answers and answer.trace.cost["rescue"]["answers_nearer_than_the_free_plans"] >= 1
    assert "planner: rescue length: answers fewer than 2 Find steps from the entities (the free plan's answer) " \
           "refused" in answer.trace.fallbacks
    off = HybridPlanner(planner(kg, bank, SIBLING, rescue_hops=False), free=ScriptedPlanner({QUESTION: longer}))
    answer = pipeline(kg, bank, off).answer(QUESTION, BIEBER)
    assert answer.plan.raw == SIBLING and "answers_nearer_than_the_free_plans" not in answer.trace.cost["rescue"]
    # a free plan whose answer is one Find away, however many Finds it has, holds nothing back
    checked = ("Find the pet of the siblings of the person Justin Bieber, assign it to ?x.\n"
               "Find the gender of the person ?x, assign it to ?gender.\nFinally the answer is ?x.")
    answer = pipeline(kg, bank, hybrid(kg, bank, checked)).answer(QUESTION, BIEBER)
    assert answer.plan.raw == SIBLING and "answers_nearer_than_the_free_plans" not in answer.trace.cost["rescue"]
    # no plan whose answer is that far ends (max_steps 8): planned again without the rule, and the trace says so
    p = planner(kg, bank, SIBLING)
    assert p.plan(QUESTION, BIEBER).raw == SIBLING and p.plan(QUESTION, BIEBER, least_hops=1).raw == SIBLING
    again = p.plan(QUESTION, BIEBER, least_hops=9)
    assert again.raw == SIBLING
    assert "rescue length: no plan whose answer is 9 Find steps from the entities ends; planned again without the " \
           "rule" in again.notes
    for bad in (-1, 1.5, True):
        with pytest.raises(MemQError, match=f"least_hops must be an int >= 0 .*got {bad!r}"):
            p.plan(QUESTION, BIEBER, least_hops=bad)
    assert GroundedConfig().rescue_hops


def test_a_saved_hybrid_record_gives_its_rescue_s_notes_to_the_rescue_even_when_the_rescue_is_planned_again():
    """A hybrid record's trace lists the free plan's notes, then RESCUED, then the rescue's (memq.pipeline). Read
    back, each plan gets its own notes; with the rescue taken out to be planned again, the free plan does not take
    the old rescue's notes (which the new rescue would then repeat beside its own)."""
    from memq.plan.base import RESCUED

    record = {"id": "q1", "planner": "hybrid", "plan_raw": PET,
              "fallbacks": ["planner: generated constant 'Dog'", RESCUED, "planner: pass budget: 61 forward passes",
                            "step 1: planner's statement kept"],
              "rescue": {"plan_raw": SIBLING, "plan_beam": [[SIBLING, -1.0]]}}
    plan, _ = saved_plan(record, BIEBER)
    assert plan.notes == ["generated constant 'Dog'"] and plan.rescue.notes == ["pass budget: 61 forward passes"]
    again, _ = saved_plan({k: v for k, v in record.items() if k != "rescue"}, BIEBER)
    assert again.notes == ["generated constant 'Dog'"] and again.rescue is None
