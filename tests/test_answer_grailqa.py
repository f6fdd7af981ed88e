"""answer() for GrailQA's questions: no topic entity (the plan starts from a class), and entities whose names
the public API would refuse (a quotation; a name with a double quote), on a small real KG."""

from __future__ import annotations

import pytest
from test_answer import SpyKG  # records every query that reaches the store

import memq
from memq import datasets
from memq.datasets import GoldParse, GoldQuestion
from memq.describe.template import TemplateDescriber
from memq.kg.oxigraph import OxigraphStore
from memq.memory.bank import MemoryBank
from memq.memory.embed import HashingEmbedder
from memq.pipeline import Config, Pipeline
from memq.plan.derive import derive_plan
from memq.plan.format import needs_entity, parse_plan
from memq.sparql import parse_query
from memq.types import MemoryRecord, Plan

FB = "http://rdf.freebase.com/ns/"
INT = "<http://www.w3.org/2001/XMLSchema#integer>"
NAME = f"<{FB}type.object.name>"
BUILDING = f"<{FB}architecture.building>"
TYPE = f"<{FB}type.object.type>"
FLOORS = f"<{FB}architecture.building.floors>"
QUOTE = ("Consciously or unconsciously, every one of us does render some service or other. If we cultivate the habit "
         "of doing this service deliberately, our desire for service will steadily grow stronger, and will make, not "
         "only our own happiness, but that of the world at large.")
ARTIST = 'Kongar-ol Ondar and Paul "Earthquake" Pena'
ARTIST_NT = ARTIST.replace('"', '\\"')
TRIPLES = f"""
<{FB}m.0low> {TYPE} {BUILDING} .
<{FB}m.0low> {NAME} "Low House"@en .
<{FB}m.0low> {FLOORS} "3"^^{INT} .
<{FB}m.0mid> {TYPE} {BUILDING} .
<{FB}m.0mid> {NAME} "Mid Tower"@en .
<{FB}m.0mid> {FLOORS} "8"^^{INT} .
<{FB}m.0high> {TYPE} {BUILDING} .
<{FB}m.0high> {NAME} "High Tower"@en .
<{FB}m.0high> {FLOORS} "40"^^{INT} .
<{FB}m.0subj> {TYPE} <{FB}media_common.quotation_subject> .
<{FB}m.0subj> {NAME} "Service"@en .
<{FB}m.0subj> <{FB}media_common.quotation_subject.quotations_about_this_subject> <{FB}m.048h7nw> .
<{FB}m.048h7nw> {NAME} "{QUOTE}"@en .
<{FB}m.0rec> {TYPE} <{FB}music.recording> .
<{FB}m.0rec> {NAME} "Tuva Song"@en .
<{FB}m.0rec> <{FB}music.recording.artist> <{FB}m.01tlrxl> .
<{FB}m.01tlrxl> {NAME} "{ARTIST_NT}"@en .
"""
PREFIX = "PREFIX : <http://rdf.freebase.com/ns/>\n"
FLOORS_QUERY = PREFIX + """SELECT (?x0 AS ?value) WHERE {
SELECT DISTINCT ?x0  WHERE {
?x0 :type.object.type :architecture.building .
FILTER (?x1 < "9"^^<http://www.w3.org/2001/XMLSchema#integer>)
?x0 :architecture.building.floors ?x1 .
FILTER ( ?x0 != ?x1  )
}
}"""
QUOTE_QUERY = PREFIX + """SELECT (?x0 AS ?value) WHERE {
SELECT DISTINCT ?x0  WHERE {
?x0 :type.object.type :media_common.quotation_subject .
VALUES ?x1 { :m.048h7nw }
?x0 :media_common.quotation_subject.quotations_about_this_subject ?x1 .
FILTER ( ?x0 != ?x1  )
}
}"""
ARTIST_QUERY = PREFIX + """SELECT (?x0 AS ?value) WHERE {
SELECT DISTINCT ?x0  WHERE {
?x0 :type.object.type :music.recording .
VALUES ?x1 { :m.01tlrxl }
?x0 :music.recording.artist ?x1 .
FILTER ( ?x0 != ?x1  )
}
}"""


def _question(qid: str, text: str, sparql: str, entities=()) -> GoldQuestion:
    return GoldQuestion(qid, text, "grailqa", "test", (GoldParse(qid, sparql, tuple(entities), None),))


QUESTIONS = [
    _question("floors", "which building has less than 9 floors?", FLOORS_QUERY),
    _question("quote", "the quote is about what subject?", QUOTE_QUERY, [("m.048h7nw", QUOTE)]),
    _question("artist", "which recordings are by this artist?", ARTIST_QUERY, [("m.01tlrxl", ARTIST)]),
]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from memq.decompose import decompose_dataset

    path = tmp_path_factory.mktemp("kg") / "kg.nt"
    path.write_text(TRIPLES, encoding="utf-8")
    kg = SpyKG(OxigraphStore.from_file(path))
    describer = TemplateDescriber()
    statements = decompose_dataset(QUESTIONS)
    records = [MemoryRecord(s, tuple(d), "template") for s, d in zip(statements, describer.describe(statements),
                                                                     strict=True)]
    bank = MemoryBank.build(records, HashingEmbedder())
    pipe = Pipeline(Config(planner="given", distinct_nodes=True), bank=bank, kg=kg, planner=None)
    describe = lambda s: describer.describe([s])[0][0]  # noqa: E731
    return pipe, kg, describe


def _oracle(question, describe) -> Plan:
    derived = derive_plan(question, describe)
    return Plan(steps=list(derived.steps), raw="\n".join(s.text for s in derived.steps))


def test_a_plan_that_starts_from_a_class_is_answered_with_no_entity(setup):
    pipe, _, describe = setup
    plan = _oracle(QUESTIONS[0], describe)
    assert plan.steps[0].kind == "class" and plan.steps[0].op == "find"
    assert needs_entity(plan.steps) is None
    answer = pipe.answer(QUESTIONS[0].question, {}, plan=plan)
    assert [name for _, name in answer.answers] == ["Low House", "Mid Tower"]
    answer = pipe.answer(QUESTIONS[0].question, [], plan=plan)  # an empty list reads the same
    assert [mid for mid, _ in answer.answers] == ["m.0low", "m.0mid"]


def test_memq_answer_takes_no_entity_with_a_plan(setup, monkeypatch):
    from memq import api

    pipe, _, describe = setup
    monkeypatch.setitem(api._PIPELINES, pipe.config, pipe)
    plan = _oracle(QUESTIONS[0], describe)
    answer = memq.answer(QUESTIONS[0].question, {}, config=pipe.config, plan=plan)
    assert [mid for mid, _ in answer.answers] == ["m.0low", "m.0mid"]
    with pytest.raises(ValueError, match="give at least one topic entity, or leave entities out"):
        memq.answer(QUESTIONS[0].question, {}, config=pipe.config)  # no plan: still the clear error


def test_no_entity_is_a_clear_error_where_the_plan_or_planner_needs_one(setup):
    pipe, kg, _ = setup
    before = len(kg.queries)
    plan = parse_plan("Find the spouse of Richard Nixon, assign it to ?x.\nFinally the answer is ?x.",
                      ["Richard Nixon"])
    assert "does not start from a class" in needs_entity(plan.steps)
    with pytest.raises(ValueError, match="the plan does not start from a class .*'Find the spouse of Richard Nixon"):
        pipe.answer("who is nixon's wife?", {}, plan=plan)
    with pytest.raises(ValueError, match=r"the plan does not start from a class \(its first step is \(none\)\)"):
        pipe.answer("who is nixon's wife?", {}, plan=Plan(steps=[]))
    mixed = parse_plan("Find every person, assign it to ?x.\nFind the spouse of Richard Nixon, assign it to ?y.\n"
                       "Finally the answer is ?y.", ["Richard Nixon"])
    with pytest.raises(ValueError, match="plan step 'Find the spouse of Richard Nixon, .*' starts from an entity"):
        pipe.answer("who is nixon's wife?", {}, plan=mixed)
    webqsp = Pipeline(Config(memory=str(pipe.config.memory), planner="fewshot"), bank=pipe.bank, kg=kg)
    with pytest.raises(ValueError, match="the fewshot planner plans from topic entities"):
        webqsp.answer("who is nixon's wife?", {})
    assert len(kg.queries) == before  # refused before anything reached the KG
    assert webqsp._planner is None  # and before the planner loaded


class AskedFor:
    """The classes of a bank with class statements, reduced to the one a question asks for."""

    def __init__(self, name: str) -> None:
        self.name = name

    def asked(self, question, entities=()):
        return self.name if self.name in question else None


class ClassPlanner:
    """A planner that, as the grounded one on a bank with class statements, may plan a question with no entity."""

    plans_without_entities = True
    classes = AskedFor("building")

    def __init__(self, plan: Plan) -> None:
        self.given, self.entities = plan, None

    def plan(self, question, entities, optional=(), unprompted=()):
        self.entities = dict(entities)
        return self.given


def test_an_entity_linked_from_the_words_of_the_class_asked_for_is_dropped():
    """"which building has less than 9 floors?" linked P&O Building from "building", and the grounded planner then
    started from it: a question that names the class it asks for names no entity with those words. Dropped and
    traced (the trace's link is marked), unless ``LinkConfig.class_words``; an entity from other words stays."""
    from dataclasses import replace

    from memq.link.index import EntityIndex
    from memq.link.linker import Linker
    from memq.plan.asked import class_word, of_class
    from memq.types import Trace

    assert class_word("building", {"building"}) and class_word("engines", {"rocket", "engine"})
    assert class_word("cities", {"city"}) and not class_word("of", {"unit", "frequency"})
    assert not class_word("tower", {"building"}) and not class_word("s", {"building"})
    assert of_class("unit of", {"unit", "frequency"}) and of_class("rocket engines", {"rocket", "engine"})
    assert not of_class("la", {"city"}) and not of_class("of the", {"city"}) and not of_class("big city", {"city"})
    index = EntityIndex(["m.0po", "m.0low"], [50, 3], ["P&O Building", "Low House"], [(), ()])
    for keep in (False, True):
        config = Config(planner="given", link=replace(Config().link, class_words=keep, fit_weight=0.0))
        pipe = Pipeline(config, bank=None, kg=None, planner=ClassPlanner(Plan(steps=[])), linker=Linker(index))
        trace = Trace()
        entities, optional, _ = pipe.link("which building is next to low house?", None, trace)
        given = {**entities, **optional}
        assert "m.0low" in given and ("m.0po" in given) == keep
        dropped = [f for f in trace.fallbacks if "dropped: read from 'building'" in f]
        assert len(dropped) == (0 if keep else 1)
        assert [x.get("class_word", False) for x in trace.links if x["id"] == "m.0po"] == [not keep]


def test_a_question_that_links_nothing_is_planned_from_a_class_where_the_planner_can(setup):
    """``memq.answer("which video game is released in 1990-05-09?")`` on GrailQA's memory: the question names no
    entity, so linking finds none, and the grounded planner can start from a class. It is answered without topic
    entities, traced; a caller's names that are not found, and a planner that plans from entities, still stop."""
    from memq.errors import LinkingError
    from memq.link.index import EntityIndex
    from memq.link.linker import Linker

    pipe, kg, describe = setup
    nothing = Linker(EntityIndex([], [], [], []))
    planner = ClassPlanner(_oracle(QUESTIONS[0], describe))
    grail = Pipeline(pipe.config, bank=pipe.bank, kg=kg, planner=planner, linker=nothing)
    answer = grail.answer(QUESTIONS[0].question)
    assert [name for _, name in answer.answers] == ["Low House", "Mid Tower"] and planner.entities == {}
    assert any(f.startswith("entity linking: no topic entity found in the question") and
               f.endswith("answered without topic entities (a plan that starts from a class needs none)")
               for f in answer.trace.fallbacks)
    with pytest.raises(LinkingError, match="no entity of the index is named 'Nowhere'"):
        grail.answer(QUESTIONS[0].question, ["Nowhere"])  # the caller's names are all required
    webqsp = Pipeline(Config(memory=str(pipe.config.memory), planner="fewshot"), bank=pipe.bank, kg=kg,
                      linker=nothing)
    with pytest.raises(LinkingError, match="no topic entity found in the question"):
        webqsp.answer("who is nixon's wife?")
    assert webqsp._planner is None  # refused before the planner loaded


@pytest.mark.parametrize("question", QUESTIONS[1:], ids=["quotation", "double-quote"])
def test_gold_entity_names_the_public_api_refuses_are_answered_by_id(setup, question):
    pipe, kg, describe = setup
    entities = dict(question.parses[0].topic_entities)
    with pytest.raises(ValueError, match="contains characters a name cannot have"):
        memq.api.check_request(question.question, entities)  # the public limits stay
    before = len(kg.queries)
    answer = pipe.answer(question.question, entities, plan=_oracle(question, describe))
    assert answer.answers == [{"quote": ("m.0subj", "Service"), "artist": ("m.0rec", "Tuva Song")}[question.id]]
    for q in kg.queries[before:]:  # the name never reaches SPARQL; the id does, as an IRI
        parse_query(q)
        assert next(iter(entities.values()))[:20] not in q
    assert f"<{FB}{next(iter(entities))}>" in answer.sparql


def test_names_still_refused_where_they_cannot_be_names(setup):
    pipe, _, describe = setup
    plan = _oracle(QUESTIONS[2], describe)
    with pytest.raises(ValueError, match="contains characters a name cannot have"):
        pipe.answer("which?", {"m.01tlrxl": "Pena\n} UNION {"}, plan=plan)
    with pytest.raises(ValueError, match="longer than 2000 characters"):
        pipe.answer("which?", {"m.01tlrxl": "x" * 2001}, plan=plan)
    with pytest.raises(ValueError, match="not a Freebase entity id"):
        pipe.answer("which?", {'"9"^^xsd:integer': "9"}, plan=plan)


def test_grailqa_literal_values_are_constants_never_topic_entities():
    """GrailQA's VALUES with a literal (``VALUES ?x1 { "195"^^xsd:integer }``) is a constant of the query: the
    question's topic entities leave it out, and the derived plan checks it as a value."""
    found = 0
    for q in datasets.load("grailqa", "train"):
        sparql = q.parses[0].sparql
        if 'VALUES ?x1 { "' not in sparql:
            continue
        found += 1
        assert all(mid.startswith(("m.", "g.")) for mid, _ in q.parses[0].topic_entities)
        if found == 5:
            break
    assert found == 5
