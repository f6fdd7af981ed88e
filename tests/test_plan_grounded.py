"""The grounded planner on a tiny KG and memory, with a scripted character-level model (no real LLM)."""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import replace
from functools import partial
from types import SimpleNamespace

import numpy as np
import pytest
from test_answer import FB, TRIPLES  # the Jamaica / Bieber KG of the answer tests

from memq.errors import KnowledgeGraphError, MemQError
from memq.kg.oxigraph import OxigraphStore
from memq.memory.bank import MemoryBank
from memq.memory.embed import HashingEmbedder
from memq.pipeline import Config, Pipeline
from memq.plan.format import parse_plan, unjoined
from memq.plan.grounded import GroundedConfig, GroundedPlanner, Neighbourhood
from memq.plan.lines import Hyp, Line, extend
from memq.plan.linesearch import SearchCost, best_lines
from memq.plan.planner import REPO_ADAPTER, FineTunedPlanner
from memq.reconstruct import Draft, Reconstructor
from memq.types import BeamPlan, MemoryRecord, Plan, PlanStep, Statement

JAMAICA = {"m.03_r3": "Jamaica"}
BIEBER = {"m.06w2sn5": "Justin Bieber"}
STATEMENTS = [  # (id, structure, sparql, primary description)
    ("spoken", "1", "?entity1 ns:location.country.languages_spoken ?entity2 .",
     "?entity2 is the languages spoken of the country ?entity1"),
    ("official", "1", "?entity1 ns:location.country.official_language ?entity2 .",
     "?entity2 is the official language of the country ?entity1"),
    ("currency", "1", "?entity1 ns:location.country.currency_used ?entity2 .",
     "?entity2 is the currency used of the country ?entity1"),
    ("sibling", "2",
     "?entity1 ns:people.person.sibling_s ?cvt .\n?cvt ns:people.sibling_relationship.sibling ?entity2 .",
     "?entity2 is the sibling of the siblings of the person ?entity1"),
    ("nosecond", "2", "?entity1 ns:people.person.sibling_s ?cvt .\n?cvt ns:people.sibling_relationship.pet ?entity2 .",
     "?entity2 is the pet of the siblings of the person ?entity1"),
    ("gender", "1", "?entity1 ns:people.person.gender ?entity2 .", "?entity2 is the gender of the person ?entity1"),
]
BROTHER = ("Find the sibling of the siblings of the person Justin Bieber, assign it to ?x.\n"
           "Find the gender of the person ?x, assign it to ?gender.\nMake sure ?gender is Male.\n"
           "Finally the answer is ?x.")


class ScriptedLM:
    """Characters are tokens (EOS = 0). The model likes the scripted ``target`` responses: a token that continues
    one of them has probability 0.9, any other 0.001. ``generate`` returns the first target (free generation)."""

    eos_id = 0

    def __init__(self, target: str, *more: str) -> None:
        self.targets = [[ord(c) for c in t] + [0] for t in (target, *more)]
        self.target = self.targets[0]
        self.calls = 0

    def prompt_ids(self, prompt: str) -> list[int]:
        return [1]

    def token_ids(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids) -> str:
        return "".join(chr(i) for i in ids if i)

    def _next(self, response: list[int]) -> set[int]:
        i = len(response)
        return {t[i] for t in self.targets if i < len(t) and t[:i] == response}

    def _lp(self, response: list[int], token: int) -> float:
        return math.log(0.9) if token in self._next(response) else math.log(0.001)

    def expand(self, ids, first, children):
        response = list(ids[1:])
        chain = [self._lp(response[:j - 1], ids[j]) for j in range(first, len(ids))]
        return np.array(chain), np.array([self._lp(response, c) for c in children])

    def greedy(self, ids, max_new_tokens):
        response = list(ids[1:])
        new, lps = [], []
        while len(new) < max_new_tokens:
            token = min(self._next(response) or {ord("\n")})
            lps.append(self._lp(response, token))
            new.append(token)
            response.append(token)
            if token in (0, ord("\n")):
                break
        return new, lps

    def generate(self, prompts, max_new_tokens=64):
        self.calls += 1
        return [self.decode(self.target)]


class FailingKG:
    url = "http://kg.invalid/sparql"

    def select(self, query, timeout=None):
        raise KnowledgeGraphError(f"timed out after {timeout} s at {self.url} | query: {query[:40]}")

    def names(self, ids):
        return {}


def store_of(tmp_path_factory, triples: str) -> OxigraphStore:
    """An embedded store of N-Triples ``triples``."""
    path = tmp_path_factory.mktemp("kg") / "kg.nt"
    path.write_text(triples, encoding="utf-8")
    return OxigraphStore.from_file(path)


def bank_of(statements) -> MemoryBank:
    """A bank of ``(id, structure, sparql, description)`` statements, hashing embeddings."""
    records = [MemoryRecord(Statement(i, s, q, tuple(re.findall(r"ns:(\S+)", q))), (d,), "template")
               for i, s, q, d in statements]
    return MemoryBank.build(records, HashingEmbedder())


@pytest.fixture(scope="module")
def kg(tmp_path_factory):
    return store_of(tmp_path_factory, TRIPLES)


@pytest.fixture(scope="module")
def bank():
    return bank_of(STATEMENTS)


# a statement of dates and two siblings' birth dates, for the sort tests
BORN = ("born", "1", "?entity1 ns:people.person.date_of_birth ?entity2 .",
        "?entity2 is the date of birth of the person ?entity1")
BIRTH_DATES = "".join(f'<{FB}{m}> <{FB}people.person.date_of_birth> "{d}"^^<http://www.w3.org/2001/XMLSchema#date> .\n'
                      for m, d in (("m.0gxnnwq", "2005-11-20"), ("m.0jazz01", "2008-07-08")))


def planner(kg, bank, target: str, *more: str, **config) -> GroundedPlanner:
    """The grounded planner with a model scripted to like ``target`` (and ``more``); the question prior is off
    unless asked for (the tiny bank has no training questions; tests/test_plan_prior.py tests it)."""
    config.setdefault("prior", 0.0)
    free = FineTunedPlanner(str(REPO_ADAPTER).format(dataset="webqsp"))
    return GroundedPlanner(free, kg=kg, bank=bank, config=GroundedConfig(**config),
                          lm=ScriptedLM(target, *more))


def test_find_lines_are_the_memory_statements_that_bind_at_the_node(kg, bank):
    p = planner(kg, bank, "")
    lines = p._lines(Hyp(draft=Draft(), rec=Reconstructor(JAMAICA)), JAMAICA, ["Jamaica"], p.lm,
                     Neighbourhood(kg), {})
    finds = {line.text for line in lines if line.kind == "find"}
    assert "Find the languages spoken of the country Jamaica, assign it to ?x." in finds
    assert "Find the official language of the country Jamaica, assign it to ?y." in finds
    assert not any("currency" in t for t in finds)  # Jamaica has no currency_used edge in this KG
    assert not [line for line in lines if line.kind != "find"]  # nothing assigned yet: no answer, no check
    lines = p._lines(Hyp(draft=Draft(), rec=Reconstructor(BIEBER)), BIEBER, ["Justin Bieber"], p.lm,
                     Neighbourhood(kg), {})
    finds = {line.text for line in lines if line.kind == "find"}
    assert "Find the sibling of the siblings of the person Justin Bieber, assign it to ?x." in finds
    assert not any("pet" in t for t in finds)  # the first edge exists, the CVT's second does not


def test_the_first_edge_index_leaves_the_options_as_a_full_scan_finds_them(kg, bank):
    from memq.plan.neighbourhood import first_edges, path_options

    p = planner(kg, bank, "")
    index = first_edges(bank.records, p._statement_edges)
    assert index and all(pos == sorted(pos) for pos in index.values())
    for entities in (JAMAICA, BIEBER, {**JAMAICA, **BIEBER}):
        full = path_options(bank.records, entities, [], Draft(), Neighbourhood(kg), p._statement_edges)
        fast = path_options(bank.records, entities, [], Draft(), Neighbourhood(kg), p._statement_edges, index)
        assert full and [(r.statement.id, m) for r, m in fast] == [(r.statement.id, m) for r, m in full]


def test_statement_edges_are_parsed_once_per_bank_and_read_back(bank, tmp_path, monkeypatch):
    from memq.plan import neighbourhood
    from memq.plan.neighbourhood import bank_edges, statement_edges

    monkeypatch.setenv("MEMQ_CACHE", str(tmp_path))
    got = bank_edges(bank.records)
    paths = [r.statement for r in bank.records if r.statement.structure in ("1", "2", "3")]
    assert paths and got == {st.id: (statement_edges(st, "entity1"),
                                     statement_edges(st, "entity2") if st.structure == "3" else set()) for st in paths}
    assert len(list((tmp_path / "statement_edges").glob("*.json"))) == 1
    monkeypatch.setattr(neighbourhood, "statement_edges", lambda *a: pytest.fail("parsed again"))
    assert bank_edges(bank.records) == got


def test_the_plan_follows_the_model_among_grounded_lines_and_reports_its_cost(kg, bank):
    target = "Find the official language of the country Jamaica, assign it to ?x.\nFinally the answer is ?x."
    plan = planner(kg, bank, target).plan("what is the official language of jamaica?", JAMAICA)
    assert plan.raw == target and plan.beam[0].text == target
    assert all(b.score <= plan.beam[0].score for b in plan.beam)
    assert [st.statement for st in plan.steps] == ["official", None]  # the find step names what it was chosen from
    assert plan.beam[0].steps == tuple(plan.steps)
    assert plan.cost["candidates"] > 0 and plan.cost["forward_passes"] > 0 and plan.cost["kg_queries"] > 0
    assert not plan.notes


@pytest.mark.parametrize("distinct", [False, True])
def test_with_distinct_steps_a_find_line_to_another_variable_does_not_take_a_place_in_the_beam(kg, bank, distinct):
    """The model's second line is its first one assigned to ?y. With ``distinct_steps`` that copy is scored and
    traced as the same step, and the beam's second place goes to the next step, the languages spoken."""
    target = "Find the official language of the country Jamaica, assign it to ?x.\nFinally the answer is ?x."
    p = planner(kg, bank, target, beam=3, lines=2, prune=1e9, distinct_steps=distinct)
    plan = p.plan("what is the official language of jamaica?", JAMAICA)
    assert plan.raw == target
    first = [(t["line"].rpartition(" ")[2], t.get("same_step", False)) for t in p.searched[0]["taken"]]
    starts = {b.text.splitlines()[0].rpartition(",")[0] for b in plan.beam}
    if distinct:
        assert first[:3] == [("?x.", False), ("?y.", True), ("?official_language.", True)]
        assert "spoken" in p.searched[0]["taken"][3]["line"]
        assert len(starts) == 2 and len(plan.beam) == 2
    else:
        assert first == [("?x.", False), ("?y.", False)] and len(starts) == 1


@pytest.mark.parametrize("question", ["which male sibling does justin bieber have?", "who is justin bieber's brother?"])
def test_a_spent_pass_budget_narrows_the_beam_and_says_so(kg, bank, question):
    """Past its budget of forward passes the search goes on with one partial plan; before it, nothing changes.
    (Pruning off: the scripted model's other lines are all far below its usable *Make sure* line.)"""
    wide = planner(kg, bank, BROTHER, budget=0, prune=1e9).plan(question, BIEBER)
    roomy = planner(kg, bank, BROTHER, budget=10_000, prune=1e9).plan(question, BIEBER)
    assert (roomy.raw, roomy.beam, roomy.notes) == (wide.raw, wide.beam, wide.notes)
    assert len(wide.beam) > 1 and not any("pass budget" in n for n in wide.notes)
    tight = planner(kg, bank, BROTHER, budget=1, prune=1e9).plan(question, BIEBER)
    assert tight.raw == BROTHER and len(tight.beam) == 1
    assert [n for n in tight.notes if n.startswith("pass budget:") and "budget of 1;" in n]
    assert tight.cost["forward_passes"] <= wide.cost["forward_passes"]
    with pytest.raises(ValueError, match="budget must be an int >= 0"):
        GroundedConfig(budget=-1)


def test_a_relation_the_entity_lacks_is_never_written(kg, bank):
    target = "Find the currency used of the country Jamaica, assign it to ?x.\nFinally the answer is ?x."
    plan = planner(kg, bank, target).plan("what currency is used in jamaica?", JAMAICA)
    assert "currency" not in plan.raw and not plan.notes
    assert plan.steps[0].kind == "find" and plan.steps[-1].text == "Finally the answer is ?x."


@pytest.mark.parametrize("question,origin", [("who is justin bieber's brother?", "generated"),
                                             ("which male sibling does justin bieber have?", "copied")])
def test_cvt_find_check_and_the_constant_s_origin_is_traced(kg, bank, question, origin):
    plan = planner(kg, bank, BROTHER).plan(question, BIEBER)
    assert plan.raw == BROTHER
    assert [n for n in plan.notes if "constant 'Male'" in n and origin in n]


class NullLM(ScriptedLM):
    """A scripted model that, under the question-less prompt (``Question: ?``, token 2), likes ``usual`` alone."""

    def __init__(self, usual: str, *targets: str) -> None:
        super().__init__(*targets)
        self.usual = [[ord(c) for c in usual]]
        self.passes = self.null_passes = 0

    def prompt_ids(self, prompt: str) -> list[int]:
        return [2] if "Question:\n?\n" in prompt else [1]

    def expand(self, ids, first, children):
        self.passes += 1
        if ids[0] != 2:
            return super().expand(ids, first, children)
        self.null_passes += 1
        targets, self.targets = self.targets, self.usual
        try:
            return super().expand(ids, first, children)
        finally:
            self.targets = targets


def test_calibration_takes_the_first_line_the_question_adds_most_to_not_the_one_usual_anyway(kg, bank):
    spoken = "Find the languages spoken of the country Jamaica, assign it to ?x.\n"
    official = "Find the official language of the country Jamaica, assign it to ?x.\n"
    end = "Finally the answer is ?x."

    def plan(**config):
        lm = NullLM(spoken, spoken + end, official + end)
        free = FineTunedPlanner(str(REPO_ADAPTER).format(dataset="webqsp"))
        made = GroundedPlanner(free, kg=kg, bank=bank, config=GroundedConfig(prior=0.0, **config), lm=lm)
        return made.plan("what is the official language of jamaica?", JAMAICA), lm

    alone, lm = plan()  # one character shorter, so the model alone takes it; it is as likely with no question
    assert [st.statement for st in alone.steps] == ["spoken", None] and lm.null_passes == 0
    calibrated, lm = plan(calibrate=1.0)
    assert [st.statement for st in calibrated.steps] == ["official", None]
    assert lm.null_passes > 0 and calibrated.cost["forward_passes"] >= lm.passes  # the calibration's are counted
    with pytest.raises(ValueError, match="calibrate"):
        GroundedConfig(calibrate=-1.0)


def test_no_grounded_line_falls_back_to_free_generation_and_says_so(kg, bank):
    p = planner(kg, bank, "Find the gender of the person Male, assign it to ?x.\nFinally the answer is ?x.")
    plan = p.plan("what is male?", {"m.05zppz": "Male"})  # only a name: no statement starts there
    assert plan.cost["free_generation"] is True
    assert any("free generation" in n and "m.05zppz" in n for n in plan.notes)


def test_a_failing_endpoint_falls_back_and_the_note_names_it(bank):
    p = planner(FailingKG(), bank, "Find the languages spoken of the country Jamaica, assign it to ?x.")
    plan = p.plan("what do they speak in jamaica?", JAMAICA)
    assert any("http://kg.invalid/sparql" in n and "free generation" in n for n in plan.notes)
    assert plan.steps[0].text.startswith("Find the languages spoken")


def test_when_coverage_leaves_no_plan_to_end_the_question_is_planned_again_without_it(kg, bank):
    # "Other" is in no triple, so no line names it and every Finally line is costed; at 1000 nats a Finally line
    # never beats the lines the model does not like, and the steps run out. Before, free generation planned.
    short = "Find the sibling of the siblings of the person Justin Bieber, assign it to ?x.\nFinally the answer is ?x."
    other = {**BIEBER, "m.0zz9": "Other"}
    plan = planner(kg, bank, short, coverage=1000.0, beam=1, lines=1, max_steps=2).plan(
        "which sibling does justin bieber have next to other?", other)
    assert plan.raw == short and not plan.cost.get("free_generation")
    assert plan.notes == ["entity coverage: no plan that ends names every topic entity; planned again without it"]
    assert plan.beam[0].score > -1000.0  # scored without coverage
    assert plan.cost["searches"] == "first > off, no coverage"  # the searches run, in order


def test_entity_coverage_costs_a_plan_that_names_no_step_of_a_topic_entity(kg, bank):
    """Training plans name every topic entity; with ``coverage`` a Finally line loses that many nats for each
    topic entity the plan leaves out, so a plan that names them all can overtake a shorter one that does not."""
    from memq.plan.grounded import unnamed

    short = "Find the sibling of the siblings of the person Justin Bieber, assign it to ?x.\nFinally the answer is ?x."
    both = {**BIEBER, "m.05zppz": "Male"}
    question = "which male sibling does justin bieber have?"

    off = planner(kg, bank, short, BROTHER, coverage=0.0).plan(question, both)
    assert off.raw == short and not [n for n in off.notes if "coverage" in n]  # the model prefers the short plan
    on = planner(kg, bank, short, BROTHER, coverage=20.0).plan(question, both)
    assert on.raw == BROTHER and unnamed(on.steps, ["Justin Bieber", "Male"]) == []
    # no plan the model likes names Male: the short one, costed
    only = planner(kg, bank, short, coverage=20.0).plan(question, both)
    assert only.raw == short and only.beam[0].score == pytest.approx(off.beam[0].score - 20.0)
    assert "entity coverage: the plan names no step of Male" in only.notes
    alone = planner(kg, bank, short, BROTHER, coverage=20.0).plan(question, BIEBER)  # nothing left out: nothing changes
    assert alone.raw == short and alone.beam[0].score == pytest.approx(off.beam[0].score)
    assert unnamed(off.steps, ["Justin Bieber", "male"]) == ["male"]
    # an optional entity (a constraint suggested for a linked question) is offered but not pushed: as if absent
    optional = planner(kg, bank, short, BROTHER, coverage=20.0).plan(question, both, optional=("m.05zppz",))
    assert optional.raw == short and optional.beam[0].score == pytest.approx(off.beam[0].score)
    assert not [n for n in optional.notes if "coverage" in n]
    # one topic entity, optional or not (a linked one, memq.link.evaluate.same_input): the same plan and beam
    lone = planner(kg, bank, short, BROTHER, coverage=20.0).plan(question, BIEBER, optional=tuple(BIEBER))
    assert lone.raw == alone.raw and lone.beam == alone.beam and lone.notes == alone.notes
    with pytest.raises(ValueError, match="coverage must be >= 0"):
        GroundedConfig(coverage=-1.0)


def test_an_unprompted_entity_is_left_out_of_the_prompt_but_lines_may_start_from_it(kg, bank):
    """A linked span's second reading: the prompt names the question's entities as training prompts do, one per
    span; the other reading's lines are still offered."""
    p = planner(kg, bank, BROTHER)
    prompts = []
    p.lm.prompt_ids = lambda prompt: prompts.append(prompt) or [1]
    both = {**BIEBER, "m.05zppz": "Male"}
    plan = p.plan("which male sibling does justin bieber have?", both, optional=("m.05zppz",),
                  unprompted=("m.05zppz",))
    assert "Male" not in prompts[-1] and "Justin Bieber" in prompts[-1]
    assert plan.raw == BROTHER  # its Make sure line names Male all the same
    p.plan("which male sibling does justin bieber have?", both, optional=("m.05zppz",))
    assert "Male" in prompts[-1]


def test_execution_guided_choice_takes_the_first_plan_that_answers(kg, bank):
    pipe = Pipeline(Config(planner="given"), bank=bank, kg=kg)
    empty = "Find the gender of the person Justin Bieber, assign it to ?x.\nFinally the answer is ?x."
    good = ("Find the sibling of the siblings of the person Justin Bieber, assign it to ?x.\n"
            "Finally the answer is ?x.")

    plan = parse_plan(empty, ["Justin Bieber"])
    plan.beam = [BeamPlan(empty, -1.0), BeamPlan(good, -2.0)]
    answer = pipe.answer("who are justin bieber's siblings?", BIEBER, plan=plan)
    assert [p["rows"] for p in answer.trace.plans] == [0, 2]
    assert [p["score"] for p in answer.trace.plans] == [-1.0, -2.0]
    assert {i for i, _ in answer.answers} == {"m.0gxnnwq", "m.0jazz01"}
    assert any("plan 2 of 2" in f for f in answer.trace.fallbacks)


def test_no_plan_ends_at_a_cvt_node_but_one_may_walk_through_it(kg):
    """``spouse_s``-like statements assign the CVT itself (a sibling relationship here): a plan goes on from it to
    the sibling, never answers with it, however much the model likes that."""
    from memq.plan.neighbourhood import assigns_cvt

    through = ("siblings", "1", "?entity1 ns:people.person.sibling_s ?entity2 .",
               "?entity2 is the siblings of the person ?entity1")
    onward = ("sibling_of", "1", "?entity1 ns:people.sibling_relationship.sibling ?entity2 .",
              "?entity2 is the sibling of the sibling relationship ?entity1")
    bank = bank_of(STATEMENTS + [through, onward])
    assert [assigns_cvt(bank.get(i).statement) for i in ("siblings", "sibling_of", "sibling", "gender")] == \
        [True, False, False, False]
    at_cvt = "Find the siblings of the person Justin Bieber, assign it to ?x.\nFinally the answer is ?x."
    walked = ("Find the siblings of the person Justin Bieber, assign it to ?y.\n"
              "Find the sibling of the sibling relationship ?y, assign it to ?x.\nFinally the answer is ?x.")
    p = planner(kg, bank, at_cvt, walked)
    plan = p.plan("who are justin bieber's siblings?", BIEBER)
    assert plan.raw == walked and all(b.text != at_cvt for b in plan.beam)
    h = extend(Hyp(draft=Draft(), rec=Reconstructor(BIEBER)),
               next(line for line in p._lines(Hyp(draft=Draft(), rec=Reconstructor(BIEBER)), BIEBER,
                                              ["Justin Bieber"], p.lm, Neighbourhood(kg), {})
                    if line.text == at_cvt.splitlines()[0]),
               SimpleNamespace(ids=(), score=0.0), p.lm, "", ["Justin Bieber"])
    assert h.assigned == ["?x"] and p.holds_cvt(h, "?x")
    lines = p._lines(h, BIEBER, ["Justin Bieber"], p.lm, Neighbourhood(kg), {})
    assert not [line for line in lines if line.kind == "answer"]
    assert "Find the sibling of the sibling relationship ?x, assign it to ?y." in {line.text for line in lines}


def test_a_written_sort_line_sorts_dates_and_numbers_never_entities(kg):
    """WebQSP's and CWQ's train plans sort dates and numbers only: a Sort line the model writes of a ?variable that
    every Find step assigns entities (by the schema) is refused, and the plan's cost counts it."""
    from memq.types import PlanStep

    typed = ("typed", "1", "?entity1 ns:common.topic.notable_types ?entity2 .",  # ranges over type.type: nodes
             "?entity2 is the notable types of ?entity1")
    p = planner(kg, bank_of(STATEMENTS + [BORN, typed]), "")
    h = Hyp(steps=[PlanStep("find", "", source="Jamaica", target="?x", statement="official"),
                   PlanStep("find", "", source="?x", target="?d", statement="born"),
                   PlanStep("find", "", source="?x", target="?y", statement=None),
                   PlanStep("find", "", source="?x", target="?t", statement="typed")],
            assigned=["?x", "?d", "?y", "?t"], draft=Draft(), rec=Reconstructor(JAMAICA))
    p.refused = {}
    assert [p.may_sort(h, v) for v in ("?x", "?d", "?y", "?t")] == [False, True, True, False]  # ?y: written
    assert p.refused == {"entity_sorts_refused": 2}
    sort = Line("open", "Sort", tuple(p.lm.token_ids("Sort")))
    text = " ?x in descending order and keep the first result.\n"
    scored = SimpleNamespace(ids=tuple(p.lm.token_ids("Sort" + text)), score=0.0)
    assert extend(h, sort, scored, p.lm, "", ["Jamaica"]) is not None  # without the rule, as before
    allows = partial(p.allows, neigh=Neighbourhood(kg))
    assert extend(h, sort, scored, p.lm, "", ["Jamaica"], allows) is None
    scored = SimpleNamespace(ids=tuple(p.lm.token_ids("Sort" + text.replace("?x", "?d"))), score=0.0)
    assert extend(h, sort, scored, p.lm, "", ["Jamaica"], allows).steps[-1].target == "?d"


def test_a_sort_ends_the_plan(kg, bank):
    """Every WebQSP and CWQ train plan that sorts answers next: after a Sort step only Finally lines are offered, no
    Find line and no open Make sure / Sort start (a search once wrote four date checks after its Sort)."""
    from memq.types import PlanStep

    p = planner(kg, bank, "")
    found = PlanStep("find", "", source="Jamaica", target="?x", statement="official")
    before = Hyp(steps=[found], assigned=["?x"], draft=Draft(), rec=Reconstructor(JAMAICA))
    kinds = {line.kind for line in p._lines(before, JAMAICA, ["Jamaica"], p.lm, Neighbourhood(kg), {})}
    assert {"find", "open", "answer"} <= kinds
    h = replace(before, steps=[found, PlanStep("sort", "", target="?x", op="desc", limit=1)])
    lines = p._lines(h, JAMAICA, ["Jamaica"], p.lm, Neighbourhood(kg), {}, "when was the latest?")
    assert [line.text for line in lines] == ["Finally the answer is ?x."]


def test_a_plan_answers_with_what_it_sorts_only_when_the_question_asks_for_a_time(tmp_path_factory):
    """No WebQSP or CWQ train plan that sorts answers with its sort key unless its question asks for a time ("when
    was the last time iran invaded another country?"): "which sibling was born first?" answers with the sibling.
    When that leaves no plan to end, the question is planned again without the rule (traced)."""
    from memq.types import PlanStep

    keyed = ("Find the sibling of the siblings of the person Justin Bieber, assign it to ?x.\n"
             "Find the date of birth of the person ?x, assign it to ?y.\n"
             "Sort ?y in ascending order and keep the first result.\nFinally the answer is ?y.")
    p = planner(store_of(tmp_path_factory, TRIPLES + BIRTH_DATES), bank_of(STATEMENTS + [BORN]), keyed,
                max_passes=200)  # a character a token: the written Sort line costs a pass each
    h = Hyp(steps=[PlanStep("find", "", source="Justin Bieber", target="?x", statement="sibling"),
                   PlanStep("find", "", source="?x", target="?y", statement="born"),
                   PlanStep("sort", "", target="?y", op="asc", limit=1)],
            assigned=["?x", "?y"], draft=Draft(), rec=Reconstructor(BIEBER))

    def endings(question):
        return [line.text for line in p._other_lines(h, ["Justin Bieber"], p.lm, Neighbourhood(p.kg), {}, question)]

    p.refused = {}
    assert endings("which of justin bieber's siblings was born first?") == ["Finally the answer is ?x."]
    assert p.refused == {"answers_sorted_not_asked_when": 1}
    for asks_a_time in ("when was justin bieber's eldest sibling born?", "what year was his first sibling born?"):
        assert endings(asks_a_time) == ["Finally the answer is ?x.", "Finally the answer is ?y."]
    p.config = replace(p.config, sorted_answers=False)
    assert endings("which sibling was born first?") == ["Finally the answer is ?x.", "Finally the answer is ?y."]
    assert GroundedConfig().sorted_answers

    # a plan that sorts the one ?variable it found: no plan ends, so the question is planned again without the rule
    own = (f'<{FB}m.06w2sn5> <{FB}people.person.date_of_birth> '
           '"1994-03-01"^^<http://www.w3.org/2001/XMLSchema#date> .\n')
    p = planner(store_of(tmp_path_factory, TRIPLES + BIRTH_DATES + own), bank_of(STATEMENTS + [BORN]),
                "Find the date of birth of the person Justin Bieber, assign it to ?y.\n"
                "Sort ?y in ascending order and keep the first result.\nFinally the answer is ?y.", max_passes=200)
    plan = p.plan("which birthday of justin bieber is first?", BIEBER)
    assert plan.cost["answers_sorted_not_asked_when"] > 0
    assert any(n.startswith("sorted answer: no plan that ends") for n in plan.notes)
    assert plan.steps[-1].target == "?y" and not plan.cost.get("free_generation")


def test_closed_sorts_offer_each_sort_of_a_date_or_number_whole_and_plan_as_the_written_line(tmp_path_factory):
    """``closed_sorts``: the Sort lines are the train plans' two wordings of each ?variable a rule lets a plan sort
    (the date of birth, not the sibling), scored whole instead of written after "Sort"; a plan takes one as it took
    the written line."""
    from memq.types import PlanStep

    keyed = ("Find the sibling of the siblings of the person Justin Bieber, assign it to ?x.\n"
             "Find the date of birth of the person ?x, assign it to ?y.\n"
             "Sort ?y in ascending order and keep the first result.\nFinally the answer is ?x.")
    kg, bank = store_of(tmp_path_factory, TRIPLES + BIRTH_DATES), bank_of(STATEMENTS + [BORN])
    p = planner(kg, bank, keyed, max_passes=200, closed_sorts=True)
    h = Hyp(steps=[PlanStep("find", "", source="Justin Bieber", target="?x", statement="sibling"),
                   PlanStep("find", "", source="?x", target="?y", statement="born")],
            assigned=["?x", "?y"], draft=Draft(), rec=Reconstructor(BIEBER))
    lines = p._other_lines(h, ["Justin Bieber"], p.lm, Neighbourhood(kg), {}, "which sibling was born first?")
    assert [line.text for line in lines if line.kind == "sort"] == [
        f"Sort ?y in {order} order and keep the first result." for order in ("descending", "ascending")]
    assert [line.text for line in lines if line.kind == "open"] == ["Make sure"]  # checks are still written
    question = "which of justin bieber's siblings was born first?"
    closed = p.plan(question, BIEBER)
    written = planner(kg, bank, keyed, max_passes=200, closed_sorts=False).plan(question, BIEBER)
    def parts(plan):  # the scripted model writes a character a pass, 48 at most: its written Sort line is cut short
        return [(st.kind, st.target, st.op, st.statement) for st in plan.steps]

    assert parts(closed) == parts(written) and closed.steps[2].kind == "sort" and not closed.cost.get("free_generation")
    assert closed.steps[2].text == "Sort ?y in ascending order and keep the first result."
    assert not closed.cost.get("entity_sorts_refused")  # the sibling's sort is never offered, so never refused
    assert GroundedConfig().closed_sorts


def test_a_plan_that_checks_a_notable_type_answers_with_what_it_checks(tmp_path_factory):
    """Each WebQSP and CWQ train plan that checks a notable type answers with a ?variable whose notable type it
    checks: a plan that checks the notable type of the sibling's gender ends at the gender, not at the sibling. A
    check of what another statement finds (the gender itself) does not count. When that leaves no plan to end, the
    question is planned again without the rule (traced)."""
    from memq.plan.format import classed

    typed = ("typed", "1", "?entity1 ns:common.topic.notable_types ?entity2 .",
             "?entity2 is the notable types of ?entity1")
    kinds = (f'<{FB}m.gender> <{FB}type.object.name> "Gender"@en .\n'
             + "".join(f"<{FB}{m}> <{FB}common.topic.notable_types> <{FB}m.gender> .\n" for m in ("m.05zppz",
                                                                                                  "m.02zsn")))
    steps = [PlanStep("find", "", source="Justin Bieber", target="?x", statement="sibling"),
             PlanStep("find", "", source="?x", target="?gender", statement="gender"),
             PlanStep("find", "", source="?gender", target="?notable_types", statement="typed"),
             PlanStep("check", "Make sure ?notable_types is Gender.", target="?notable_types", op="=",
                      value="Gender")]
    p = planner(store_of(tmp_path_factory, TRIPLES + kinds), bank_of(STATEMENTS + [typed]), BROTHER)
    assert classed(steps, p.bank.get) == {"?gender"}
    assert classed(steps[:3], p.bank.get) == set()  # found, not checked
    assert classed(steps, lambda sid: p.bank.get("gender")) == set()  # every Find read as the gender's
    h = Hyp(steps=steps, assigned=["?x", "?gender", "?notable_types"], draft=Draft(), rec=Reconstructor(BIEBER))

    def endings():
        lines = p._other_lines(h, ["Justin Bieber"], p.lm, Neighbourhood(p.kg), {}, "q")
        return [line.text for line in lines if line.kind == "answer"]

    p.refused = {}
    assert endings() == ["Finally the answer is ?gender."]
    assert p.refused == {"answers_unclassed": 2}  # ?x and ?notable_types
    every = ["Finally the answer is ?x.", "Finally the answer is ?gender.", "Finally the answer is ?notable_types."]
    p.config = replace(p.config, classed_answers=False)
    assert endings() == every
    assert GroundedConfig().classed_answers
    p.config = replace(p.config, classed_answers=True)
    p.keys_offered = False  # the search planned again without the rules KEY_RULES name
    assert endings() == every

    # the notable type of a CVT node (no plan ends there) checked, the sibling answered: no plan ends, so the question
    # is planned again without the rule
    bond = ("bond", "1", "?entity1 ns:people.person.sibling_s ?entity2 .",
            "?entity2 is the siblings of the person ?entity1")
    kin = ("kin", "1", "?entity1 ns:people.sibling_relationship.sibling ?entity2 .",
           "?entity2 is the sibling of the sibling relationship ?entity1")
    cvt = (f'<{FB}m.tie> <{FB}type.object.name> "Tie"@en .\n'
           f"<http://memq.dev/synthetic/cvt1> <{FB}common.topic.notable_types> <{FB}m.tie> .\n")
    p = planner(store_of(tmp_path_factory, TRIPLES + cvt), bank_of(STATEMENTS + [typed, bond, kin]),
                "Find the siblings of the person Justin Bieber, assign it to ?y.\n"
                "Find the sibling of the sibling relationship ?y, assign it to ?x.\n"
                "Find the notable types of ?y, assign it to ?notable_types.\nMake sure ?notable_types is Tie.\n"
                "Finally the answer is ?x.", max_passes=400)
    plan = p.plan("which sibling is tied?", BIEBER)
    assert "Make sure ?notable_types is Tie." in plan.raw
    assert plan.cost["answers_unclassed"] > 0
    assert any(n.startswith("class checked: no plan that ends") for n in plan.notes)
    assert plan.steps[-1].target == "?x" and not plan.cost.get("free_generation")


def test_a_date_or_number_may_take_the_sort_key_names_the_train_plans_give_it(tmp_path_factory):
    """The train plans find a value to sort as ``?sk0`` (WebQSP) or ``?num`` (CWQ): a Find line of a statement that
    assigns a date or number is offered with those names too, so the model can write the sort it was taught;
    statements that assign nodes get none. A plan may not end before it sorts or checks its key, nor answer with
    it; when that leaves no plan to end, the question is planned again without the keys' names (traced)."""
    from memq.types import PlanStep

    unsorted = ("Find the sibling of the siblings of the person Justin Bieber, assign it to ?x.\n"
                "Find the date of birth of the person ?x, assign it to ?sk0.\nFinally the answer is ?x.")
    # the model writes no Sort line it can use (with closed_sorts it is offered the Sort lines whole and takes one)
    p = planner(store_of(tmp_path_factory, TRIPLES + BIRTH_DATES), bank_of(STATEMENTS + [BORN]), unsorted,
                closed_sorts=False)
    assert p.key_targets("born", {"?x"}) == ["?sk0", "?num"]
    assert p.key_targets("born", {"?x", "?sk0", "?num"}) == ["?sk1"]
    assert p.key_targets("sibling", {"?x"}) == [] and p.key_targets("gender", set()) == []
    first = PlanStep("find", "", source="Justin Bieber", target="?x", statement="sibling")
    h = Hyp(steps=[first], assigned=["?x"], draft=Draft(), rec=Reconstructor(BIEBER))
    found = {line.text for line in p._lines(h, BIEBER, ["Justin Bieber"], p.lm, Neighbourhood(p.kg), {})}
    assert {f"Find the date of birth of the person ?x, assign it to {v}." for v in ("?sk0", "?num", "?y")} <= found
    assert not [t for t in found if "gender" in t and ("?sk" in t or "?num" in t)]

    h = Hyp(steps=[first, PlanStep("find", "", source="?x", target="?sk0", statement="born")],
            assigned=["?x", "?sk0"], draft=Draft(), rec=Reconstructor(BIEBER))
    p.refused = {}

    def endings(h):
        return [line.text for line in p._other_lines(h, ["Justin Bieber"], p.lm, Neighbourhood(p.kg), {})
                if line.kind == "answer"]

    assert endings(h) == [] and p.refused == {"endings_before_the_key_is_used": 1}
    h.steps.append(PlanStep("sort", "", target="?sk0", op="asc"))
    assert endings(h) == ["Finally the answer is ?x."]
    # the model finds the key but never sorts it: no plan ends, so the question is planned again without the keys
    plan = p.plan("who is justin bieber's eldest sibling?", BIEBER)
    assert plan.cost["endings_before_the_key_is_used"] > 0
    assert "?sk0" not in plan.raw and not plan.cost.get("free_generation")
    assert any(n.startswith("sort keys: no plan that ends sorts") for n in plan.notes)


def grown(p: GroundedPlanner, kg, entities: dict[str, str], question: str, *lines: str) -> Hyp:
    """The partial plan of ``lines``, each taken from the lines the planner offers after the ones before."""
    h = Hyp(draft=Draft(), rec=Reconstructor(entities))
    for text in lines:
        [line] = [line for line in p._lines(h, entities, list(entities.values()), p.lm, Neighbourhood(kg), {},
                                            question) if line.text == text]
        h = extend(h, line, SimpleNamespace(ids=list(line.ids), score=0.0), p.lm, question, [])
    return h


def offered(p: GroundedPlanner, kg, entities: dict[str, str], question: str, *lines: str) -> list[str]:
    """The lines the planner offers after the partial plan of ``lines`` (:func:`grown`), with its refusal counts
    (``p.refused``) for that step alone."""
    h = grown(p, kg, entities, question, *lines)
    p.refused = {}
    return [x.text for x in p._lines(h, entities, list(entities.values()), p.lm, Neighbourhood(kg), {}, question)]


def written(p: GroundedPlanner, text: str) -> SimpleNamespace:
    """A line the model wrote after an open start, as the line search returns it."""
    return SimpleNamespace(ids=tuple(p.lm.token_ids(text + "\n")), score=0.0)


def gender_found(p: GroundedPlanner, kg, entities: dict[str, str] = BIEBER):
    """The partial plan that found Justin Bieber's siblings and their gender, the open *Make sure* start, and the
    planner's test of a written line after it (``allows``)."""
    h = grown(p, kg, entities, "", "Find the sibling of the siblings of the person Justin Bieber, assign it to ?x.",
              "Find the gender of the person ?x, assign it to ?gender.")
    return h, Line("open", "Make sure", tuple(p.lm.token_ids("Make sure"))), partial(p.allows, neigh=Neighbourhood(kg))


@pytest.mark.parametrize("value, passes", [("Male", True), ("Female", True), ("Nonbinary", False)])
def test_with_check_passes_a_written_check_is_kept_only_when_some_value_passes_it(kg, bank, value, passes):
    """``check_passes``: "Make sure ?gender is X" continues the plan only when a sibling's gender is X (the FILTER
    the query would get: here the node named X, as no given entity is); a check with a relation is not probed."""
    p = planner(kg, bank, "", check_passes=True)
    h, start, allows = gender_found(p, kg)
    check = written(p, f"Make sure ?gender is {value}.")
    p.refused = {}
    assert (extend(h, start, check, p.lm, "", ["Justin Bieber"], allows) is not None) is passes
    assert p.refused == ({} if passes else {"checks_none_passes": 1})
    off = planner(kg, bank, "")  # the default: not probed
    assert extend(h, start, check, p.lm, "", ["Justin Bieber"], partial(off.allows, neigh=Neighbourhood(kg)))
    dated = written(p, "Make sure the start date of the sibling relationship ?x is on or before 2015-01-01.")
    assert extend(h, start, dated, p.lm, "", ["Justin Bieber"], allows) is not None


def test_a_written_line_the_plan_has_already_is_refused(kg, bank):
    """The same Make sure twice is the same FILTER twice, which changes no answer; a search once spent its pass budget
    writing one plan's two date checks over and over. A written line the plan has already is refused and counted in
    the plan's cost; another check of the same variable is not, nor the same line without the rules."""
    p = planner(kg, bank, "")
    h, start, allows = gender_found(p, kg)
    male = "Make sure ?gender is Male."
    p.refused = {}
    once = extend(h, start, written(p, male), p.lm, "", ["Justin Bieber"], allows)
    assert once is not None and once.lines[-1] == male and p.refused == {}
    assert extend(once, start, written(p, male), p.lm, "", ["Justin Bieber"], allows) is None
    assert p.refused == {"repeated_lines_refused": 1}
    assert extend(once, start, written(p, "Make sure ?gender is Female."), p.lm, "", ["Justin Bieber"], allows)
    assert extend(once, start, written(p, male), p.lm, "", ["Justin Bieber"]).lines[-2:] == [male, male]


def test_a_written_check_of_an_entity_the_kg_never_gives_there_is_refused(kg, bank):
    """"what country was dmitri mendeleev born?" (held-out WebQSP dev) was planned as "... the location that ?x is
    contained by, assign it to ?containedby. Make sure ?containedby is Country. Finally the answer is ?x.": no
    location is contained by the class Country, so the query found nothing and self-repair dropped the check. A
    written "Make sure ?v is X", X an entity, continues a plan only when X is anywhere in the KG a value of what a
    Find step assigns to ?v (each of WebQSP's 354 train checks of an entity is); each refusal is counted. Values that
    are no entity (a name no given entity has) are not probed, nor checks of the notable types whose value names a
    type of the schema, as the benchmark KG types only some nodes."""
    entities = {**BIEBER, "m.05zppz": "Male", "m.03_r3": "Jamaica"}
    names = list(entities.values())
    p = planner(kg, bank, "")
    h, start, allows = gender_found(p, kg, entities)
    p.refused = {}
    assert extend(h, start, written(p, "Make sure ?gender is Male."), p.lm, "", names, allows) is not None
    assert p.refused == {}
    assert extend(h, start, written(p, "Make sure ?gender is Jamaica."), p.lm, "", names, allows) is None
    assert p.refused == {"checks_never_passing_refused": 1}
    assert extend(h, start, written(p, "Make sure ?gender is m.0zzzz9."), p.lm, "", names, allows) is None  # an id
    assert extend(h, start, written(p, "Make sure ?gender is Nonbinary."), p.lm, "", names, allows) is not None
    assert extend(h, start, written(p, "Make sure ?x is Jamaica."), p.lm, "", names, allows) is None  # the sibling's
    assert p.refused == {"checks_never_passing_refused": 3}
    off = planner(kg, bank, "", check_values=False)  # --no-check-values
    assert extend(h, start, written(p, "Make sure ?gender is Jamaica."), p.lm, "", names,
                  partial(off.allows, neigh=Neighbourhood(kg))) is not None
    typed = ("typed", "1", "?entity1 ns:common.topic.notable_types ?entity2 .",
             "?entity2 is the notable types of ?entity1")
    classes = planner(kg, bank_of(STATEMENTS + [typed]), "")
    h = Hyp(steps=[PlanStep("find", "", source="Justin Bieber", target="?x", statement="sibling"),
                   PlanStep("find", "", source="?x", target="?t", statement="typed")],
            assigned=["?x", "?t"], draft=Draft(), rec=Reconstructor({**entities, "m.01mp": "Country"}))
    names.append("Country")

    def class_check(value: str) -> bool:
        return classes.may_check(h, parse_plan(f"Make sure ?t is {value}.\nFinally the answer is ?x.", names).steps[0],
                                 Neighbourhood(kg))

    # no node of this KG has a notable type: a check of a class of the schema stays (the benchmark KG types only
    # some nodes), one of a country is refused (CWQ's rescues wrote "Make sure ?notable_types is Tirana.")
    assert class_check("Country") and not class_check("Jamaica")


def test_a_plan_ends_only_at_a_variable_its_other_steps_join(kg):
    """A plan that found ?x from Jamaica and ?y from Justin Bieber has two parts that no step joins; answering with
    either leaves the other a part of the query that only has to match somewhere. 1 of the 31,810 WebQSP, CWQ and
    GrailQA train and synthetic plans does so, so no such plan ends; the refusals are counted."""
    both = {**JAMAICA, **BIEBER}
    names = ["Jamaica", "Justin Bieber"]
    p = planner(kg, bank_of(STATEMENTS), "")

    def endings(lines):
        return [x for x in offered(p, kg, both, "", *lines) if x.startswith("Finally")]

    languages = "Find the languages spoken of the country Jamaica, assign it to ?x."
    assert endings([languages]) == ["Finally the answer is ?x."]
    assert p.refused == {"repeated_finds_refused": 1}  # the languages of Jamaica again, not an ending
    assert endings([languages, "Find the sibling of the siblings of the person Justin Bieber, assign it to ?y."]) == []
    assert p.refused == {"unjoined_answers_withheld": 2, "repeated_finds_refused": 2}
    assert unjoined(parse_plan(BROTHER, names).steps, "?x") == []
    assert unjoined(parse_plan(BROTHER, names).steps, "?nobody") == ["?gender", "?x"]


def test_a_given_entity_s_own_name_is_found_only_for_a_question_that_asks_a_name(kg):
    """"what year did william jennings bryan run for president?" was planned as "Find the name of William Jennings
    Bryan ... Finally the answer is ?x.": an answer no question of that kind has. A Find line of a given entity's own
    name is offered only when the question asks for a name (as the 4 WebQSP train questions answered so do); each
    refusal is counted. The name of a node the plan found is offered, and ends a plan, as before."""
    named = bank_of(STATEMENTS + [("name", "1", "?entity1 ns:type.object.name ?entity2 .",
                                   "?entity2 is the name of ?entity1")])
    p = planner(kg, named, "")
    own = "Find the name of Jamaica, assign it to ?x."
    first = offered(p, kg, JAMAICA, "what does jamaica speak?")
    assert own not in first and "Find the languages spoken of the country Jamaica, assign it to ?x." in first
    assert p.refused == {"own_name_finds_refused": 1}
    assert own in offered(p, kg, JAMAICA, "what is jamaica called?") and p.refused == {}
    assert own in offered(p, kg, JAMAICA, "What was the NAME of jamaica before?")
    assert "Finally the answer is ?x." in offered(p, kg, JAMAICA, "what is jamaica called?", own)
    found = ["Find the languages spoken of the country Jamaica, assign it to ?x.",
             "Find the name of ?x, assign it to ?name."]
    later = offered(p, kg, JAMAICA, "what does jamaica speak?", *found)
    assert "Finally the answer is ?name." in later and not any(x.startswith("Find the name of Jamaica") for x in later)


def test_a_plan_walks_one_edge_at_most_twice_in_a_row(tmp_path_factory):
    """"what politician has a favorite freebase topic of portsmouth maritime folk festival?" (GrailQA dev, tuning part)
    spent its searches walking to and fro: the user profile whose favorite topics is the festival, that profile's
    favorite topics, the user profiles whose favorite topics are those, ... and never took the profile's person. No
    train plan takes one edge a third time in a row, so such a Find line is not offered (and is counted); twice, as in
    "the same style as", is offered, and so is any other edge."""
    fav = "freebase.user_profile.favorite_topics"
    triples = "".join(f"<{FB}{s}> <{FB}{p}> <{FB}{o}> .\n" for s, p, o in (
        ("m.0p1", fav, "m.0fest"), ("m.0p2", fav, "m.0fest"), ("m.0p1", fav, "m.0g"), ("m.0p3", fav, "m.0g"),
        ("m.0p1", "freebase.user_profile.person", "m.0pol")))
    kg = store_of(tmp_path_factory, triples + f'<{FB}m.0fest> <{FB}type.object.name> "Folk Festival"@en .\n')
    p = planner(kg, bank_of([
        ("whose", "1", f"?entity2 ns:{fav} ?entity1 .", "?entity2 is the user profile whose favorite freebase topics "
                                                         "is ?entity1"),
        ("fav", "1", f"?entity1 ns:{fav} ?entity2 .", "?entity2 is the favorite freebase topics of the user profile "
                                                      "?entity1"),
        ("person", "1", "?entity1 ns:freebase.user_profile.person ?entity2 .",
         "?entity2 is the person of the user profile ?entity1")]), "")
    festival = {"m.0fest": "Folk Festival"}
    walked = ["Find the user profile whose favorite freebase topics is Folk Festival, assign it to ?x.",
              "Find the favorite freebase topics of the user profile ?x, assign it to ?y."]
    assert walked[1] in offered(p, kg, festival, "", walked[0]) and p.refused.get("third_walks_refused") is None
    after = offered(p, kg, festival, "", *walked)
    assert not any(x.startswith("Find the user profile whose favorite freebase topics is ?y") for x in after)
    # refused too: the festival's profiles again, and the favorite topics of ?x again (nothing checked them)
    assert p.refused == {"third_walks_refused": 1, "repeated_finds_refused": 2}
    assert "Find the person of the user profile ?x, assign it to ?person." in after
    assert not any(x.startswith("Find the favorite freebase topics of the user profile ?x") for x in after)


def test_a_plan_finds_a_statement_once_from_a_given_entity(kg, bank):
    """The grounded search offered "Find the languages spoken of the country Jamaica" again after the plan had found
    them, under a new name: the same values, a wasted line. No WebQSP or CWQ train plan finds one statement twice from
    a given entity, so it is not offered (and is counted), while another statement from the entity is. From a
    ?variable it is offered once a Make sure step holds what the first Find found to a value, as 9 of CWQ's train
    plans check two official languages of one country; before that it is not (no train plan does so: "what countries
    are part of the uk?" found the notable types of ?x three times when its check was refused)."""
    p = planner(kg, bank, "")
    spoken = "Find the languages spoken of the country Jamaica, assign it to ?x."
    assert "Find the languages spoken of the country Jamaica, assign it to ?y." in offered(p, kg, JAMAICA, "")
    after = offered(p, kg, JAMAICA, "", spoken)
    assert not any(x.startswith("Find the languages spoken of the country Jamaica") for x in after)
    assert p.refused == {"repeated_finds_refused": 1}
    assert "Find the official language of the country Jamaica, assign it to ?y." in after
    found = ["Find the sibling of the siblings of the person Justin Bieber, assign it to ?x.",
             "Find the gender of the person ?x, assign it to ?gender."]
    gender = offered(p, kg, BIEBER, "", *found)
    assert not any(x.startswith("Find the gender of the person ?x") for x in gender)
    assert p.refused == {"repeated_finds_refused": 2}  # and Justin Bieber's siblings again
    h = grown(p, kg, BIEBER, "", *found)
    h.steps.append(PlanStep("check", "Make sure ?gender is Male.", target="?gender", op="=", value="Male"))
    p.refused = {}
    checked = [x.text for x in p._lines(h, BIEBER, ["Justin Bieber"], p.lm, Neighbourhood(kg), {}, "")]
    assert "Find the gender of the person ?x, assign it to ?gender2." in checked  # the siblings still refused
    h.steps[-1] = PlanStep("check", "Make sure the gender of the person ?x is Male.", target="?x", op="=",
                           value="Male", relation="the gender of the person")  # a check of ?x, not of ?gender
    assert not any(x.text.startswith("Find the gender of the person ?x")
                   for x in p._lines(h, BIEBER, ["Justin Bieber"], p.lm, Neighbourhood(kg), {}, ""))


def test_saved_beam_is_read_back_for_rescoring():
    from memq.evaluate.run import saved_plan

    record = {"id": "q", "plan_raw": "Finally the answer is ?x.", "plan_s": 1.5,
              "plan_beam": [["Finally the answer is ?x.", -0.5], ["Finally the answer is ?y.", -0.9]],
              "plan_cost": {"forward_passes": 7},
              "fallbacks": ["planner: grounded planner -> free generation: the beam ended with no complete plan",
                            "step 1: no recalled statement binds in the KG; kept all"]}
    plan, seconds = saved_plan(record, JAMAICA)
    assert isinstance(plan, Plan) and seconds == 1.5
    assert plan.notes == ["grounded planner -> free generation: the beam ended with no complete plan"]
    assert plan.beam == [BeamPlan("Finally the answer is ?x.", -0.5), BeamPlan("Finally the answer is ?y.", -0.9)]
    assert plan.cost["forward_passes"] == 7 and plan.cost["plan_from"] == "saved"


def test_the_planner_s_statement_is_kept_by_recall_and_survives_a_saved_run(kg, bank):
    """A chosen find step names its statement; recall keeps it even where the text would recall another, and
    says so. A statement the memory lacks falls back to recall by text, traced."""
    from dataclasses import replace

    from memq.evaluate.run import saved_plan

    pipe = Pipeline(Config(planner="given", repair=False), bank=bank, kg=kg)
    text = "Find the gender of the person Justin Bieber, assign it to ?x.\nFinally the answer is ?x."
    plan = parse_plan(text, ["Justin Bieber"])
    by_text = pipe.answer("who are justin bieber's siblings?", BIEBER, plan=plan)
    assert [r.statement.id for r in by_text.recalled] == ["gender"]
    plan.steps[0] = replace(plan.steps[0], statement="sibling")
    answer = pipe.answer("who are justin bieber's siblings?", BIEBER, plan=plan)
    assert [r.statement.id for r in answer.recalled] == ["sibling"]
    assert {i for i, _ in answer.answers} == {"m.0gxnnwq", "m.0jazz01"}
    assert "step 1: planner's statement kept (sibling; recall by text would keep gender)" in answer.trace.fallbacks
    plan.steps[0] = replace(plan.steps[0], statement="nowhere")
    lost = pipe.answer("who are justin bieber's siblings?", BIEBER, plan=plan)
    assert [r.statement.id for r in lost.recalled] == ["gender"]
    assert any("statement nowhere is not in this memory" in f for f in lost.trace.fallbacks)

    planned = planner(kg, bank, BROTHER).plan("which male sibling does justin bieber have?", BIEBER)
    record = {"id": "q", "plan_raw": planned.raw,
              "plan_beam": [[b.text, b.score, [st.to_json() for st in b.steps]] for b in planned.beam]}
    again, _ = saved_plan(record, BIEBER)
    assert again.steps == planned.steps and again.beam == planned.beam
    assert [st.statement for st in again.steps if st.kind == "find"] == ["sibling", "gender"]
    # a run records the plan the choice kept as plan_raw; re-scoring starts the choice again from the best one
    gender = "Find the gender of the person Justin Bieber, assign it to ?x.\nFinally the answer is ?x."
    again, _ = saved_plan({**record, "plan_raw": gender}, BIEBER)
    assert again.raw == planned.beam[0].text and again.steps == planned.steps
    sibling = ("Find the sibling of the siblings of the person Justin Bieber, assign it to ?x.\n"
               "Finally the answer is ?x.")
    odd = parse_plan(gender, ["Justin Bieber"])  # a plan that is not the first of the beam it carries
    odd.beam = [BeamPlan(sibling, -1.0, ()), BeamPlan(gender, -9.0, ())]
    chosen = pipe.answer("who are justin bieber's siblings?", BIEBER, plan=odd)
    assert chosen.plan.raw == sibling and [p["plan"] for p in chosen.trace.plans] == [sibling]
    assert {i for i, _ in chosen.answers} == {"m.0gxnnwq", "m.0jazz01"}
    record["plan_beam"][0][2][0]["colour"] = "red"
    broken, _ = saved_plan(record, BIEBER)
    assert isinstance(broken, MemQError) and "colour" in str(broken)


class TableLM:
    """Token log-probabilities from a fixed random table of (position, previous token, token)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.table: dict = {}
        self.passes = 0

    def _lp(self, pos, prev, tok) -> float:
        key = (pos, prev, tok)
        if key not in self.table:
            self.table[key] = float(np.log(self.rng.uniform(0.01, 1.0)))
        return self.table[key]

    def expand(self, ids, first, children):
        self.passes += 1
        chain = [self._lp(j, ids[j - 1], ids[j]) for j in range(first, len(ids))]
        return np.array(chain), np.array([self._lp(len(ids), ids[-1], c) for c in children])

    def greedy(self, ids, max_new_tokens):  # pragma: no cover - no open candidates here
        raise AssertionError


@pytest.mark.parametrize("seed", range(5))
def test_line_search_finds_the_exact_k_best_lines(seed):
    rng = np.random.default_rng(100 + seed)
    cands = sorted({tuple(int(t) for t in rng.integers(2, 5, size=rng.integers(1, 6))) for _ in range(30)})
    lm = TableLM(seed)
    brute = sorted(((sum(lm.expand([9] + list(c), 1, [])[0]), c) for c in cands), reverse=True)
    lm.passes = 0
    found = best_lines(lm, [9], [list(c) for c in cands], 4, prune=1e9, max_passes=10_000, cost=SearchCost())
    assert [s.ids for s in found] == [c for _, c in brute[:4]]
    assert [s.logprob for s in found] == pytest.approx([s for s, _ in brute[:4]])


@pytest.mark.parametrize("seed", range(5))
def test_with_same_the_k_best_lines_are_k_distinct_steps_and_the_copies_between_are_returned(seed):
    """``same``: lines of one key are one step; the search goes on to the k best keys, and returns every line it
    found on the way, in score order (the caller keeps each key's best)."""
    rng = np.random.default_rng(200 + seed)
    cands = sorted({tuple(int(t) for t in rng.integers(2, 5, size=rng.integers(1, 6))) for _ in range(30)})
    key = {i: int(rng.integers(0, 4)) for i in range(len(cands))}
    lm = TableLM(seed)
    brute = sorted(((sum(lm.expand([9] + list(c), 1, [])[0]), i) for i, c in enumerate(cands)), reverse=True)
    found = best_lines(lm, [9], [list(c) for c in cands], 2, prune=1e9, max_passes=10_000, same=key.get)
    keys = [key[i] for _, i in brute]
    second = next(j for j, k in enumerate(keys) if k != keys[0])
    assert [s.index for s in found] == [i for _, i in brute[:second + 1]]
    assert len({key[s.index] for s in found}) == 2


def test_max_passes_bounds_each_search_not_the_sum_of_searches():
    cost = SearchCost(passes=1000)  # spent by earlier searches of the same question
    found = best_lines(TableLM(0), [9], [[2, 3], [2, 4]], 1, max_passes=5, cost=cost)
    assert len(found) == 1 and cost.passes > 1000


@pytest.mark.parametrize("usable_open", [True, False])
def test_an_open_line_sets_the_prune_bound_once_found_usable(usable_open):
    """A written *Make sure* line that the caller can use bounds the search as a closed line does: a line far
    below it (here "Find ...", 0.001 a character) is not expanded. One it cannot use sets no bound."""
    lm = ScriptedLM("Make sure ?x is Male.")
    cands = [[ord(c) for c in "Make sure"], [ord(c) for c in "Find the gender of ?x, assign it to ?g."]]
    found = best_lines(lm, [1], cands, 2, open_ends=[True, False], prune=5.0, max_passes=10_000,
                       usable=lambda scored: usable_open or scored.index != 0)
    assert lm.decode(found[0].ids).startswith("Make sure ?x is Male.")
    assert [s.index for s in found] == ([0] if usable_open else [0, 1])


def test_bad_search_settings_are_refused_by_name():
    with pytest.raises(ValueError, match="beam"):
        GroundedConfig(beam=0)
    with pytest.raises(ValueError, match="norm 'max'"):
        GroundedConfig(norm="max")
    with pytest.raises(ValueError, match="unknown planner 'grounding'"):
        Config(planner="grounding")
    assert list(itertools.islice(iter(GroundedConfig().__dict__), 1)) == ["beam"]


def test_make_planner_grounded_needs_the_kg_and_the_memory(kg, bank):
    from memq.errors import MemQError
    from memq.plan.planner import make_planner

    with pytest.raises(MemQError, match="needs the KG and the memory bank"):
        make_planner("grounded")
    made = make_planner("grounded", kg=kg, bank=bank, search=GroundedConfig(beam=4))
    assert isinstance(made, GroundedPlanner) and made.config.beam == 4 and made.calls == 0


def test_make_planner_loads_the_ranker_for_its_dataset(kg, bank, monkeypatch):
    """The ranker's runtime may depend on the dataset (memq.plan.ranker.DATASET_RUNTIMES), so it is told which."""
    from memq.plan import ranker as ranker_mod
    from memq.plan.planner import make_planner

    seen = []
    monkeypatch.setattr(ranker_mod, "load_ranker", lambda path, **kw: seen.append((path, kw)))
    make_planner("grounded", kg=kg, bank=bank, ranker="R", dataset="cwq")
    assert seen == [("R", {"dataset": "cwq"})]


@pytest.mark.parametrize("included", [False, True])
def test_a_bank_of_grailqa_s_form_brings_its_planner_and_search_unless_a_flag_says_otherwise(tmp_path, included):
    import argparse
    import json

    from memq.ask import add_search_args, config_from
    from memq.plan.search import GRAILQA_SEARCH, WEBQSP_SEARCH

    classes = tmp_path / "classes"
    classes.mkdir()
    (classes / "manifest.json").write_text(json.dumps({"counts": {"by_structure": {"1": 5, "class": 2}}}))
    bank = classes
    if included:  # a bank that includes it, as banks include the schema's
        bank = tmp_path / "bank"
        bank.mkdir()
        (bank / "manifest.json").write_text(json.dumps({"counts": {"by_structure": {"1": 3}},
                                                        "include": ["../classes"]}))
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "manifest.json").write_text(json.dumps({"counts": {"by_structure": {"1": 3, "2": 1}}, "include": ["."]}))
    parser = argparse.ArgumentParser()
    add_search_args(parser)
    parser.add_argument("--memory")
    config = config_from(parser.parse_args(["--memory", str(bank)]))
    assert config.planner_dataset == "grailqa" and config.distinct_nodes
    assert {k: getattr(config.search, k) for k in GRAILQA_SEARCH} == GRAILQA_SEARCH
    given = config_from(parser.parse_args(["--memory", str(bank), "--beam", "2", "--calibrate", "0"]))
    assert (given.search.beam, given.search.calibrate, given.search.coverage) == (2, 0.0, GRAILQA_SEARCH["coverage"])
    for other in (config_from(parser.parse_args(["--memory", str(plain)])),
                  config_from(parser.parse_args(["--memory", str(bank)]), by_bank=False)):
        assert other.search is None and other.planner_dataset is None and other.distinct_nodes is None
    # a bank of no known dataset is planned as WebQSP's, with WebQSP's search
    assert Pipeline(config_from(parser.parse_args(["--memory", str(plain)]))).search == GroundedConfig(**WEBQSP_SEARCH)


def test_a_config_that_names_only_a_grailqa_bank_answers_as_grailqa(tmp_path):
    """``memq.answer(..., config=Config(memory="memory_bank/grailqa+schema"))`` planned with WebQSP's adapter, ranker
    and search and reconstructed without GrailQA's distinct nodes (only ``memq ask`` read the bank's form), and a bank
    whose own planner was trained on GrailQA and its synthetic programs was read as WebQSP's (two datasets named)."""
    import json

    from memq.datasets import DISTINCT_NODES
    from memq.pipeline.config import bank_dataset
    from memq.plan.search import GRAILQA_SEARCH, WEBQSP_SEARCH

    form = tmp_path / "form"  # GrailQA's form, no planner of its own (memory_bank/grailqa+schema)
    form.mkdir()
    (form / "manifest.json").write_text(json.dumps({"counts": {"by_structure": {"1": 5, "class": 2}}}))
    trained = tmp_path / "trained"  # a bank with its own planner (memory_bank/grailqa)
    (trained / "planner").mkdir(parents=True)
    (trained / "manifest.json").write_text(json.dumps({"counts": {"by_structure": {"1": 5}}}))
    (trained / "planner" / "adapter_config.json").write_text("{}")
    (trained / "planner" / "manifest.json").write_text(
        json.dumps({"data": {"datasets": ["grailqa", "grailqa-synthetic"]}}))
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "manifest.json").write_text(json.dumps({"counts": {"by_structure": {"1": 3}}}))
    assert (bank_dataset(form), bank_dataset(trained), bank_dataset(plain)) == ("grailqa", "grailqa", None)
    for bank in (form, trained):
        pipe = Pipeline(Config(memory=str(bank)))
        assert pipe.planner_source[0] == "grailqa" and pipe.distinct_nodes == ("grailqa" in DISTINCT_NODES)
        assert {k: getattr(pipe.search, k) for k in GRAILQA_SEARCH} == GRAILQA_SEARCH
    assert Pipeline(Config(memory=str(trained))).planner_source[1] == trained / "planner"
    pipe = Pipeline(Config(memory=str(plain)))
    assert pipe.planner_source[0] == "webqsp" and not pipe.distinct_nodes
    assert pipe.search == GroundedConfig(**WEBQSP_SEARCH)
    # what the config says stands
    pipe = Pipeline(Config(memory=str(form), search=GroundedConfig(beam=4), distinct_nodes=False))
    assert pipe.search.beam == 4 and not pipe.distinct_nodes


def test_a_config_that_names_only_a_grailqa_bank_answers_on_grailqa_s_kg(tmp_path, monkeypatch):
    """``Config(memory="memory_bank/grailqa+schema")`` planned as GrailQA but queried the benchmark KG of WebQSP and
    CWQ, which holds none of GrailQA's questions' facts: every answer came from the wrong graph, silently. The KG is
    now the planner's dataset's unless one is named."""
    import json

    from memq.pipeline import BENCHMARK_KG, GRAILQA_KG

    form = tmp_path / "form"  # GrailQA's form of the schema (memory_bank/grailqa+schema)
    form.mkdir()
    (form / "manifest.json").write_text(json.dumps({"counts": {"by_structure": {"1": 5, "class": 2}}}))
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "manifest.json").write_text(json.dumps({"counts": {"by_structure": {"1": 3}}}))
    assert Config(memory=str(form)).kg_file == GRAILQA_KG
    assert Config(memory=str(plain)).kg_file == Config().kg_file == BENCHMARK_KG
    assert Config(memory=str(plain), planner_dataset="grailqa").kg_file == GRAILQA_KG
    assert Config(memory=str(form), kg="my.nt").kg_file == "my.nt"  # a KG named stands
    opened = []
    monkeypatch.setattr("memq.pipeline.pipeline.open_kg", lambda path, where: opened.append((path, where)) or "kg")
    assert Pipeline(Config(memory=str(form))).kg == "kg" and opened == [(GRAILQA_KG, None)]


def test_search_flags_reach_the_config():
    import argparse

    from memq.ask import add_search_args, config_from

    parser = argparse.ArgumentParser()
    parser.add_argument("--planner")
    add_search_args(parser)
    config = config_from(parser.parse_args(["--planner", "grounded", "--beam", "5", "--norm", "mean", "--budget", "90",
                                            "--calibrate", "0.5", "--backtrack", "3", "--value-finds",
                                            "--start-lookahead", "2.5"]))
    assert config.planner == "grounded" and config.search.beam == 5 and config.search.norm == "mean"
    assert config.search.budget == 90 and config.search.calibrate == 0.5
    assert config.search.backtrack == 3 and config.search.value_finds and config.search.start_lookahead == 2.5
    assert not config_from(parser.parse_args(["--no-value-finds"])).search.value_finds
    assert config.search.rescue_hops and not config_from(parser.parse_args(["--no-rescue-hops"])).search.rescue_hops
    assert not config_from(parser.parse_args(["--no-sorted-answers"])).search.sorted_answers
    assert not config_from(parser.parse_args(["--no-classed-answers"])).search.classed_answers
    assert config_from(parser.parse_args(["--distinct-steps"])).search.distinct_steps
    assert config.search.lines == GroundedConfig().lines


def test_no_plan_ends_at_a_variable_a_check_makes_equal_to_a_given_entity(kg):
    """"who did george lucas get engaged to?" was planned as "Find the type of union of the marriage ?y, assign it to
    ?x. Make sure ?x is Marriage. Finally the answer is ?x." (Marriage suggested): its one answer is the entity the
    plan names. None of the 29,512 WebQSP and CWQ train plans ends at a variable a check makes equal to a value, so
    no plan ends at one made equal to a given entity. A value no entity has is matched by name, and where that finds
    nothing self-repair drops the check (CWQ's rescues had "Make sure ?county is us_county." so, and were right), so
    such a check, a variable compared otherwise, or one whose relation a check reads, still ends a plan."""
    from memq.plan.lines import may_end

    p = planner(kg, bank_of(STATEMENTS), "")
    spoken = "Find the languages spoken of the country Jamaica, assign it to ?x."
    h = grown(p, kg, JAMAICA, "", spoken)
    start = Line("open", "Make sure", tuple(p.lm.token_ids("Make sure")))
    for value, ends in (("Jamaica", False), ("jamaica", False), ("not Jamaica", True), ("Jamaican English", True)):
        checked = extend(h, start, written(p, f"Make sure ?x is {value}."), p.lm, "", ["Jamaica"])
        lines = p._lines(checked, JAMAICA, ["Jamaica"], p.lm, Neighbourhood(kg), {}, "")
        assert ("Finally the answer is ?x." in [x.text for x in lines]) is ends, value
    names = ["Jamaica", "English"]
    pinned = parse_plan(f"{spoken}\nMake sure ?x is English.", names).steps
    assert not may_end(pinned, "", "?x", names=names) and may_end(pinned, "", "?x") and may_end(pinned, names=names)
    for other in ("Make sure ?x is not English.", "Make sure ?x < 1990.", "Make sure the gender of ?x is English."):
        assert may_end(parse_plan(f"{spoken}\n{other}", names).steps, "", "?x", names=names), other
