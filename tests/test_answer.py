"""answer(): end to end on a small real KG, and the input validation at the API boundary."""

from __future__ import annotations

import re

import pytest

from memq import datasets
from memq.describe.template import TemplateDescriber
from memq.errors import MemQError
from memq.kg.oxigraph import OxigraphStore
from memq.memory.bank import MemoryBank
from memq.memory.embed import HashingEmbedder
from memq.pipeline import Config, Pipeline
from memq.plan.derive import derive_plan
from memq.sparql import parse_query
from memq.types import MemoryRecord, Plan

FB = "http://rdf.freebase.com/ns/"
NAME = f"<{FB}type.object.name>"
TRIPLES = f"""
<{FB}m.03_r3> {NAME} "Jamaica"@en .
<{FB}m.03_r3> <{FB}location.country.languages_spoken> <{FB}m.01428y> .
<{FB}m.03_r3> <{FB}location.country.languages_spoken> <{FB}m.04ygk0> .
<{FB}m.03_r3> <{FB}location.country.official_language> <{FB}m.01428y> .
<{FB}m.01428y> {NAME} "Jamaican English"@en .
<{FB}m.04ygk0> {NAME} "Jamaican Creole English Language"@en .
<{FB}m.06w2sn5> {NAME} "Justin Bieber"@en .
<{FB}m.06w2sn5> <{FB}people.person.sibling_s> <http://memq.dev/synthetic/cvt1> .
<http://memq.dev/synthetic/cvt1> <{FB}people.sibling_relationship.sibling> <{FB}m.0gxnnwq> .
<{FB}m.06w2sn5> <{FB}people.person.sibling_s> <http://memq.dev/synthetic/cvt2> .
<http://memq.dev/synthetic/cvt2> <{FB}people.sibling_relationship.sibling> <{FB}m.0jazz01> .
<{FB}m.0gxnnwq> {NAME} "Jaxon Bieber"@en .
<{FB}m.0gxnnwq> <{FB}people.person.gender> <{FB}m.05zppz> .
<{FB}m.0jazz01> {NAME} "Jazmyn Bieber"@en .
<{FB}m.0jazz01> <{FB}people.person.gender> <{FB}m.02zsn> .
<{FB}m.05zppz> {NAME} "Male"@en .
<{FB}m.02zsn> {NAME} "Female"@en .
"""


class SpyKG:
    """Records every query that reaches the store."""

    def __init__(self, kg):
        self.kg, self.queries = kg, []

    def select(self, query, timeout=None):
        self.queries.append(query)
        return self.kg.select(query, timeout=timeout)

    def names(self, ids):
        return self.kg.names(ids)


def _question(dataset, split, qid):
    return next(q for q in datasets.load(dataset, split) if q.id == qid)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    path = tmp_path_factory.mktemp("kg") / "kg.nt"
    path.write_text(TRIPLES, encoding="utf-8")
    kg = SpyKG(OxigraphStore.from_file(path))
    describer = TemplateDescriber()
    questions = [_question("webqsp", "test", "WebQTest-0"), _question("webqsp", "train", "WebQTrn-0")]
    from memq.decompose import decompose_dataset

    statements = decompose_dataset(questions)
    records = [MemoryRecord(s, tuple(d), "template")
               for s, d in zip(statements, describer.describe(statements), strict=True)]
    bank = MemoryBank.build(records, HashingEmbedder())
    pipe = Pipeline(Config(planner="given"), bank=bank, kg=kg, planner=None)
    describe = lambda s: describer.describe([s])[0][0]  # noqa: E731
    return pipe, kg, questions, describe


def _oracle(question, describe) -> Plan:
    return Plan(steps=list(derive_plan(question, describe).steps))


def test_oracle_plan_answers_webqtest_0_with_its_gold_answers(setup):
    pipe, kg, (jamaica, _), describe = setup
    a = pipe.answer(jamaica.question, dict(jamaica.parses[0].topic_entities), plan=_oracle(jamaica, describe))
    assert sorted(i for i, _ in a.answers) == sorted(i for i, _ in jamaica.parses[0].answers)
    assert a.recalled and a.recalled[0].score > 0.99
    assert "timings" not in a.trace.fallbacks and "total" in a.trace.timings
    parse_query(a.sparql)


def test_an_embedder_fallback_is_in_the_trace(setup, monkeypatch):
    """MiniLM on torch instead of onnxruntime gives the same vectors, but the trace still says so."""
    pipe, _, questions, describe = setup
    monkeypatch.setattr(pipe.bank.embedder, "fallback", "MiniLM runs on torch: test", raising=False)
    jamaica = questions[0]
    a = pipe.answer(jamaica.question, dict(jamaica.parses[0].topic_entities), plan=_oracle(jamaica, describe))
    assert a.answers and a.trace.fallbacks.count("recall: MiniLM runs on torch: test") == 1


def test_cvt_and_check_steps_find_the_brother(setup):
    pipe, kg, (_, bieber), describe = setup
    a = pipe.answer(bieber.question, dict(bieber.parses[0].topic_entities), plan=_oracle(bieber, describe))
    assert a.answers == [("m.0gxnnwq", "Jaxon Bieber")]
    assert "FILTER" in a.sparql


def test_relaxing_a_check_is_traced(setup):
    pipe, kg, (_, bieber), describe = setup
    plan = _oracle(bieber, describe)
    from dataclasses import replace

    # A check nobody passes: the query finds nothing, and self-repair must say what it did.
    steps = [replace(s, value="1999") if s.kind == "check" else s for s in plan.steps]
    a = pipe.answer(bieber.question, dict(bieber.parses[0].topic_entities), plan=Plan(steps=steps))
    assert {i for i, _ in a.answers} == {"m.0gxnnwq", "m.0jazz01"}  # the check was dropped ...
    assert "self-repair: dropped the last 1 Make sure step(s)" in a.trace.fallbacks  # ... and traced
    assert a.trace.attempts[-1] == {"action": "relax-checks", "dropped_last": 1, "rows": 2}

    repairless = Pipeline(replace(pipe.config, repair=False), bank=pipe.bank, kg=kg)
    assert repairless.answer(bieber.question, dict(bieber.parses[0].topic_entities),
                             plan=Plan(steps=steps)).answers == []


BAD_INPUTS = [
    ("", {"m.03_r3": "Jamaica"}),
    ("   ", {"m.03_r3": "Jamaica"}),
    (None, {"m.03_r3": "Jamaica"}),
    (42, {"m.03_r3": "Jamaica"}),
    ("q" * 2001, {"m.03_r3": "Jamaica"}),
    ("what?", {}),
    ("what?", []),
    ("what?", ["Jamaica", ("m.03_r3", "Jamaica")]),
    ("what?", ["Jam\x00aica"]),
    ("what?", ["  "]),
    ("what?", ["x" * 201]),
    ("what?", "m.03_r3"),
    ("what?", [("m.03_r3",)]),
    ("what?", {"m.03_r3": ""}),
    ("what?", {"m.03_r3": None}),
    ("what?", {"m.03_r3>": "Jamaica"}),
    ("what?", {'m.03_r3"': "Jamaica"}),
    ("what?", {"m.03_r3 } ": "Jamaica"}),
    ("what?", {"m.03_r3\n": "Jamaica"}),
    ("what?", {"<http://example.org/x>": "Jamaica"}),
    ("what?", {"m.03_r3 . ?s ?p ?o": "Jamaica"}),
    ("what?", {"M.03_R3": "Jamaica"}),
    ("what?", {"ns:m.03_r3": "Jamaica"}),
    ("what?", {"m.": "Jamaica"}),
    ("what?", {"m.03_r3{": "Jamaica"}),
    ("what?", {"m.03_r3": "Jamaica}"}),
    ("what?", {"m.03_r3": "{Jamaica"}),
    ("what?", {"m.03_r3": "Ja>maica"}),
    ("what?", {"m.03_r3": "Jamaica\nSELECT * WHERE { ?s ?p ?o }"}),
    ("what?", {"m.03_r3": "Jamaica\\"}),
]


@pytest.mark.parametrize("question, entities", BAD_INPUTS)
def test_bad_input_is_rejected_before_anything_reaches_the_kg(setup, question, entities):
    pipe, kg, _, _ = setup
    before = len(kg.queries)
    with pytest.raises((ValueError, MemQError)) as err:
        pipe.answer(question, entities, plan=Plan(steps=[]))
    assert len(kg.queries) == before
    assert str(err.value)


def test_memq_answer_has_the_request_limits_and_the_pipeline_keeps_the_dataset_ones(setup, monkeypatch):
    import memq
    from memq import api
    from memq.pipeline import validate

    pipe, kg, _, _ = setup
    monkeypatch.setitem(api._PIPELINES, pipe.config, pipe)  # memq.answer(config=pipe.config) uses this pipeline
    many = [(f"m.0{i:02d}", f"Thing {i}") for i in range(21)]
    before = len(kg.queries)
    with pytest.raises(ValueError, match="question is 1001 characters long; at most 1000 are accepted"):
        memq.answer("q" * 1001, {"m.03_r3": "Jamaica"}, config=pipe.config, plan=Plan(steps=[]))
    with pytest.raises(ValueError, match="21 topic entities given; at most 20 are accepted"):
        memq.answer("who?", many, config=pipe.config, plan=Plan(steps=[]))
    with pytest.raises(ValueError, match="21 topic entities given"):
        memq.answer("who?", dict(many), config=pipe.config, plan=Plan(steps=[]))
    assert len(kg.queries) == before
    assert api.check_request("q" * 1000, many[:20]) == ("q" * 1000, dict(many[:20]))  # the limits themselves pass
    # evaluation calls Pipeline.answer, with the wider limits: one WebQSP test question has 86 topic entities
    assert len(validate("q" * 1500, {f"m.0{i:02d}": "x" for i in range(86)})[1]) == 86
    # and gold names the public request refuses (GrailQA: a double quote; a quotation entity named by its quote)
    for name in ('Paul "Earthquake" Pena', "x" * 2000):
        with pytest.raises(ValueError, match="contains characters a name cannot have"):
            api.check_request("who?", {"m.03_r3": name})
        assert validate("who?", {"m.03_r3": name}, strict_names=False)[1] == {"m.03_r3": name}


def test_unknown_entity_id_is_a_clear_error_and_only_escaped_queries_ran(setup):
    pipe, kg, _, _ = setup
    before = len(kg.queries)
    with pytest.raises(MemQError, match="unknown entity id 'm.0nosuchthing'"):
        pipe.answer("who?", {"m.0nosuchthing": "Nobody"}, plan=Plan(steps=[]))
    for q in kg.queries[before:]:
        parse_query(q)
        assert "<http://rdf.freebase.com/ns/m.0nosuchthing>" in q


def _saved_plans(tmp_path, question, plan):
    """An earlier fine-tuned run's per-question file holding ``plan`` for ``question``, planned in 2.5 s."""
    import json

    saved = tmp_path / "earlier.jsonl"
    saved.write_text(json.dumps({"id": question.id, "planner": "finetuned", "plan_s": 2.5,
                                 "plan_raw": "\n".join(s.text for s in plan.steps)}) + "\n")
    return saved


def test_saved_plans_are_rescored_without_calling_a_planner(setup, tmp_path):
    import json

    from memq.evaluate.run import run

    pipe, kg, (jamaica, _), describe = setup
    plan = _oracle(jamaica, describe)
    saved = _saved_plans(tmp_path, jamaica, plan)
    per_q = tmp_path / "now.jsonl"
    summary = run("webqsp", "test", "finetuned", limit=1, per_question=per_q, progress=False, pipeline=pipe,
                  plans_from=saved)  # the pipeline has no planner: a model call would fail the question
    assert summary["f1"] == 1.0 and summary["llm_calls_per_question"] == 1.0  # the call it cost back then
    # a file outside the repository and the working directory is named, not located (records are committed)
    assert summary["plans_from"] == {"file": "earlier.jsonl", "questions": 1}
    rec = json.loads(per_q.read_text())
    assert rec["plan_from"] == "earlier.jsonl" and rec["plan_s"] == 2.5 and rec["latency_s"] >= 2.5

    older = tmp_path / "older.jsonl"  # runs before batched planning timed the plan in the trace
    older.write_text(json.dumps({"id": jamaica.id, "planner": "finetuned", "timings": {"plan": 7.0},
                                 "plan": [s.text for s in plan.steps]}) + "\n")
    summary = run("webqsp", "test", "finetuned", limit=1, progress=False, pipeline=pipe, plans_from=older)
    assert summary["f1"] == 1.0 and summary["p50_s"] >= 7.0

    with pytest.raises(ValueError, match="fewshot"):
        run("webqsp", "test", "fewshot", limit=1, progress=False, pipeline=pipe, plans_from=saved)


def test_a_plans_file_that_overrides_an_earlier_ones_plan_is_said_so(setup, tmp_path, caplog):
    """Several --plans files are read as one, a later file's record of a question standing: shards hold no
    question twice, so a question whose plan differs in two files is counted in the summary and logged, and the
    same plan twice (a file given again) is not."""
    import json

    from memq.evaluate.run import run

    pipe, kg, (jamaica, _), describe = setup
    plan = _oracle(jamaica, describe)
    saved = _saved_plans(tmp_path, jamaica, plan)
    again = tmp_path / "again.jsonl"
    again.write_text(saved.read_text().replace('"plan_s": 2.5', '"plan_s": 9.0'))  # the same plan, timed otherwise
    summary = run("webqsp", "test", "finetuned", limit=1, progress=False, pipeline=pipe, plans_from=[saved, again])
    assert summary["plans_from"] == {"file": "earlier.jsonl, again.jsonl", "questions": 1}
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"id": jamaica.id, "planner": "finetuned", "plan_raw": "Finally the answer is ?x."})
                     + "\n")
    with caplog.at_level("WARNING", logger="memq.evaluate.run"):
        summary = run("webqsp", "test", "finetuned", limit=1, progress=False, pipeline=pipe,
                      plans_from=[saved, other])
    assert summary["plans_from"]["overridden_by_a_later_file"] == 1 and summary["f1"] == 0.0
    assert f"1 question(s) have another plan in a later --plans file, whose plan stands: {jamaica.id}" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="memq.evaluate.run"):  # replaced twice, still one question
        summary = run("webqsp", "test", "finetuned", limit=1, progress=False, pipeline=pipe,
                      plans_from=[saved, other, again])
    assert summary["plans_from"]["overridden_by_a_later_file"] == 1 and summary["f1"] == 1.0
    assert f"1 question(s) have another plan in a later --plans file, whose plan stands: {jamaica.id}" in caplog.text


def test_evaluate_loads_before_the_first_question_and_not_the_planner_it_does_not_need(setup, tmp_path, monkeypatch):
    """memq evaluate warms the pipeline up before the first question (the loads are in no question's time, and the
    summary says how long they took); the planner only when some question is planned afresh, so that re-scoring
    saved plans loads no model; nothing when a resumed run has nothing left to answer."""
    import json

    from memq.evaluate.run import run

    pipe, kg, (jamaica, _), describe = setup
    calls, warm = [], pipe.warm_up

    def watched(step=None, planner=True):
        calls.append(planner)
        if planner:  # this pipeline has no planner: stop the run there
            raise LookupError("the planner was warmed up")
        return warm(step, planner)

    monkeypatch.setattr(pipe, "warm_up", watched)
    saved = _saved_plans(tmp_path, jamaica, _oracle(jamaica, describe))
    per_q = tmp_path / "now.jsonl"
    summary = run("webqsp", "test", "finetuned", limit=1, per_question=per_q, progress=False, pipeline=pipe,
                  plans_from=saved)
    assert calls == [False] and summary["warm_up_s"] >= 0 and summary["f1"] == 1.0
    assert json.loads(per_q.read_text())["plan_s"] == 2.5  # the question keeps the time its plan cost
    again = run("webqsp", "test", "finetuned", limit=1, per_question=per_q, progress=False, pipeline=pipe,
                plans_from=saved)
    assert calls == [False] and "warm_up_s" not in again
    calls.clear()
    with pytest.raises(LookupError, match="planner was warmed"):  # a question to plan afresh: the planner is warmed
        run("webqsp", "test", "finetuned", limit=1, progress=False, pipeline=pipe)
    assert calls == [True]


def test_tied_statements_are_picked_by_the_kg_then_swapped_when_a_check_needs_the_other(tmp_path):
    from memq.types import PlanStep, Statement

    # Two statements that read alike (a relation and its reverse). Both bind for Jamaica; only the reverse
    # reaches Jamaican English, which the check asks for.
    kg_text = "\n".join([
        f"<{FB}m.03_r3> {NAME} \"Jamaica\"@en .",
        f"<{FB}m.01428y> {NAME} \"Jamaican English\"@en .",
        f"<{FB}m.04ygk0> {NAME} \"Jamaican Creole English Language\"@en .",
        f"<{FB}m.03_r3> <{FB}x.country.languages> <{FB}m.04ygk0> .",
        f"<{FB}m.01428y> <{FB}x.language.countries> <{FB}m.03_r3> .",
    ]) + "\n"
    (tmp_path / "kg.nt").write_text(kg_text, encoding="utf-8")
    desc = "?entity2 is the languages of ?entity1"
    forward = Statement("fwd000000001", "1", "?entity1 ns:x.country.languages ?entity2 .", ("x.country.languages",),
                        ("WebQTrn-1",))
    reverse = Statement("rev000000001", "1", "?entity2 ns:x.language.countries ?entity1 .",
                        ("x.language.countries",))
    bank = MemoryBank.build([MemoryRecord(forward, (desc,), "template"), MemoryRecord(reverse, (desc,), "template")],
                            HashingEmbedder())
    pipe = Pipeline(Config(planner="given"), bank=bank, kg=OxigraphStore.from_file(tmp_path / "kg.nt"))
    entities = {"m.03_r3": "Jamaica", "m.01428y": "Jamaican English"}
    find = PlanStep("find", "Find the languages of Jamaica, assign it to ?x.", source="Jamaica",
                    relation="the languages of Jamaica", target="?x")
    check = PlanStep("check", "Make sure ?x is Jamaican English.", target="?x", op="=", value="Jamaican English")
    answer = PlanStep("answer", "Finally the answer is ?x.", target="?x")

    plain = pipe.answer("what languages does jamaica speak?", entities, plan=Plan(steps=[find, answer]))
    assert plain.answers == [("m.04ygk0", "Jamaican Creole English Language")]  # seen in training wins the tie
    assert any("2 tied statements bind; kept fwd000000001" in f for f in plain.trace.fallbacks)

    checked = pipe.answer("which jamaican language is english?", entities, plan=Plan(steps=[find, check, answer]))
    assert checked.answers == [("m.01428y", "Jamaican English")]
    # grounded choice swaps the tie before the query runs: with the preferred statement the pattern and its check
    # have no row (memq.reconstruct.ground; before issue 35 self-repair swapped it after the query found nothing)
    assert ("step 1: took tied statement rev000000001, with which the whole pattern, checks included, has a row"
            in checked.trace.fallbacks)
    assert not any("self-repair" in f for f in checked.trace.fallbacks)


def _bank(statements: list[tuple], tmp_path, kg_text: str) -> Pipeline:
    """A pipeline over a hand-made KG and memory: ``statements`` are (Statement, description) pairs."""
    (tmp_path / "kg.nt").write_text(kg_text, encoding="utf-8")
    bank = MemoryBank.build([MemoryRecord(s, (d,), "template") for s, d in statements], HashingEmbedder())
    return Pipeline(Config(planner="given"), bank=bank, kg=OxigraphStore.from_file(tmp_path / "kg.nt"))


def test_a_number_check_matches_numbers_freebase_keeps_as_text(tmp_path):
    from memq.plan.format import parse_plan
    from memq.types import Statement

    # A roster's jersey number is type.rawstring in Freebase: "22", not 22. A numeric = on it is a type
    # error, so the check found nothing and self-repair dropped it, answering every player.
    roster = [("cvt1", "m.0p22", '"22"'), ("cvt2", "m.0p23", '"23"'),
              ("cvt3", "m.0pint", '"22"^^<http://www.w3.org/2001/XMLSchema#integer>')]
    kg_text = f"<{FB}m.0team> {NAME} \"Miami Dolphins\"@en .\n" + "".join(
        f"<{FB}m.0team> <{FB}x.team.roster> <{FB}{c}> .\n<{FB}{c}> <{FB}x.roster.player> <{FB}{p}> .\n"
        f"<{FB}{c}> <{FB}x.roster.number> {n} .\n<{FB}{p}> {NAME} \"{p}\"@en .\n" for c, p, n in roster)
    pipe = _bank([(Statement(f"{r}00000000000"[:12], "1", f"?entity1 ns:x.{r} ?entity2 .", (f"x.{r}",), ("q",)),
                   f"?entity2 is the {r.split('.')[1]} of ?entity1") for r in ("team.roster", "roster.player",
                                                                             "roster.number")],
                 tmp_path, kg_text)
    plan = parse_plan("Find the roster of Miami Dolphins, assign it to ?y.\n"
                      "Find the player of ?y, assign it to ?x.\nFind the number of ?y, assign it to ?n.\n"
                      "Make sure ?n is 22.\nFinally the answer is ?x.", ["Miami Dolphins"])
    got = pipe.answer("who is number 22 on miami dolphins?", {"m.0team": "Miami Dolphins"}, plan=plan)
    assert sorted(m for m, _ in got.answers) == ["m.0p22", "m.0pint"]
    assert not any("self-repair" in f for f in got.trace.fallbacks)


def test_a_check_of_a_relation_no_filter_statement_expresses_finds_the_relation_and_checks_its_value(tmp_path):
    from memq.plan.format import parse_plan
    from memq.types import Statement

    # "Make sure the gender of ?y is Male." with no filter statement in memory was checked by rule as ?y = Male,
    # which no parent passes: self-repair dropped it, and the mother's date of death was answered too.
    people = [("m.0dad", "Male", '"1991-01-01"'), ("m.0mum", "Female", '"2003-05-05"')]
    kg_text = (f"<{FB}m.05zppz> {NAME} \"Male\"@en .\n<{FB}m.02zsn> {NAME} \"Female\"@en .\n"
               f"<{FB}m.0cooper> {NAME} \"Bradley Cooper\"@en .\n") + "".join(
        f"<{FB}m.0cooper> <{FB}x.person.parents> <{FB}{p}> .\n<{FB}{p}> {NAME} \"{p}\"@en .\n"
        f"<{FB}{p}> <{FB}x.person.date_of_death> {d} .\n"
        f"<{FB}{p}> <{FB}x.person.gender> <{FB}{'m.05zppz' if g == 'Male' else 'm.02zsn'}> .\n" for p, g, d in people)
    pipe = _bank([(Statement(f"{r}00000000000"[:12], "1", f"?entity1 ns:x.person.{r} ?entity2 .",
                             (f"x.person.{r}",), ("q",)), f"?entity2 is the {r.replace('_', ' ')} of ?entity1")
                  for r in ("parents", "date_of_death", "gender")], tmp_path, kg_text)
    text = ("Find the parents of Bradley Cooper, assign it to ?y.\nFind the date of death of ?y, assign it to ?x.\n"
            "Make sure the {} of ?y is Male.\nFinally the answer is ?x.")
    plan = parse_plan(text.format("gender"), ["Bradley Cooper"])
    got = pipe.answer("when did bradley cooper's dad die?", {"m.0cooper": "Bradley Cooper"}, plan=plan)
    assert [m for m, _ in got.answers] == ["1991-01-01"]
    assert "step 3: no filter statement recalled; the relation is found (gender000000) and its value checked" \
        in got.trace.fallbacks
    assert not any("self-repair" in f for f in got.trace.fallbacks)
    assert [r.statement.id for r in got.recalled] == ["parents00000", "date_of_deat", "gender000000"]

    # a plan that names a ?variable as the relation's value would be named (?checked_3) keeps it: the value gets
    # another name
    named = text.replace("?y", "?checked_3")
    got = pipe.answer("when did bradley cooper's dad die?", {"m.0cooper": "Bradley Cooper"},
                      plan=parse_plan(named.format("gender"), ["Bradley Cooper"]))
    assert [m for m, _ in got.answers] == ["1991-01-01"]
    assert not any("self-repair" in f for f in got.trace.fallbacks)

    # a relation that binds nowhere from ?y is checked by rule as before, and self-repair drops the check
    plan = parse_plan(text.format("parents"), ["Bradley Cooper"])
    got = pipe.answer("when did bradley cooper's dad die?", {"m.0cooper": "Bradley Cooper"}, plan=plan)
    assert sorted(m for m, _ in got.answers) == ["1991-01-01", "2003-05-05"]
    assert "step 3: the checked relation binds with 0 of 1 recalled statements; checked by rule" in got.trace.fallbacks
    assert "self-repair: dropped the last 1 Make sure step(s)" in got.trace.fallbacks


def test_tied_filter_statements_prefer_freebase_commons(tmp_path):
    from memq.decompose import decompose_query
    from memq.plan.format import parse_plan
    from memq.types import Statement

    def time_filter(rel: str) -> Statement:  # WebQSP's temporal check, as the schema source writes it
        query = (f"PREFIX ns: <{FB}>\nSELECT DISTINCT ?x WHERE {{ ns:m.0 ns:{rel} ?x .\n"
                 f"FILTER(NOT EXISTS {{?x ns:{rel} ?sk0}} || EXISTS {{?x ns:{rel} ?sk1 . "
                 f'FILTER(xsd:datetime(?sk1) <= "2015-08-10"^^xsd:dateTime) }}) }}')
        d = decompose_query(parse_query(query), "", ["m.0"])
        return next(b.statement for b in d.bounds if b.statement.structure == "filter")

    # base.ihistory.event.start_date has the label and so the description of time.event.start_date; the
    # KG's events carry the commons one, so the base. statement would keep every event. (The description is
    # the step's search text, so that the hashing embedder recalls both at similarity 1.)
    desc = "the start date of the event ?entity1 <= ?value"
    date = "<http://www.w3.org/2001/XMLSchema#dateTime>"
    kg_text = (f"<{FB}m.0bih> {NAME} \"Bosnia\"@en .\n"
               + "".join(f"<{FB}m.0bih> <{FB}x.location.events> <{FB}{e}> .\n<{FB}{e}> {NAME} \"{e}\"@en .\n"
                         f"<{FB}{e}> <{FB}time.event.start_date> \"{y}-01-01T00:00:00\"^^{date} .\n"
                         for e, y in (("m.0war", 1992), ("m.0later", 2005))))
    events = Statement("events000000", "1", "?entity1 ns:x.location.events ?entity2 .", ("x.location.events",), ("q",))
    filters = [time_filter("time.event.start_date"), time_filter("base.ihistory.event.start_date")]
    pipe = _bank([(events, "?entity2 is the events of ?entity1")] + [(f, desc) for f in filters], tmp_path, kg_text)
    plan = parse_plan("Find the events of Bosnia, assign it to ?x.\n"
                      "Make sure the start date of the event ?x is on or before 1999-12-31.\n"
                      "Finally the answer is ?x.", ["Bosnia"])
    got = pipe.answer("what happened in bosnia in the 90s?", {"m.0bih": "Bosnia"}, plan=plan)
    assert [m for m, _ in got.answers] == ["m.0war"]
    commons = filters[0].id
    assert any(f"2 tied filter statements; kept {commons}" in f for f in got.trace.fallbacks)
    assert "time.event.start_date" in got.sparql and "base.ihistory" not in got.sparql


def test_statements_split_from_one_cvt_share_it_again(tmp_path):
    from memq.decompose import decompose_dataset

    # WebQTest-1539 "who is ryan reynolds married to 2012?": the gold CVT has four ends (Ryan, the spouse,
    # the type of union, the start date), so it is split into two structure-3 statements. Given one CVT
    # each, the type could hold on one marriage and the latest start date on another.
    question = _question("webqsp", "test", "WebQTest-1539")
    date = "<http://www.w3.org/2001/XMLSchema#dateTime>"
    marriages = [("cvtA", "m.02114t", "m.04ztj", 2008), ("cvtB", "m.02114t", "m.0partner", 2015),
                 ("cvtC", "m.06_bq1", "m.04ztj", 2012)]
    kg_text = "".join(f"<{FB}{m}> {NAME} \"{n}\"@en .\n" for m, n in (
        ("m.036hf4", "Ryan Reynolds"), ("m.04ztj", "Marriage"), ("m.0partner", "Domestic partnership"),
        ("m.02114t", "Scarlett Johansson"), ("m.06_bq1", "Blake Lively"))) + "".join(
        f"<{FB}m.036hf4> <{FB}people.person.spouse_s> <{FB}{c}> .\n<{FB}{c}> <{FB}people.marriage.spouse> <{FB}{s}> .\n"
        f"<{FB}{c}> <{FB}people.marriage.type_of_union> <{FB}{t}> .\n"
        f"<{FB}{c}> <{FB}people.marriage.from> \"{y}-01-01T00:00:00\"^^{date} .\n" for c, s, t, y in marriages)
    describer = TemplateDescriber()
    statements = decompose_dataset([question])
    assert sum(s.structure == "3" for s in statements) == 2
    pipe = _bank([(s, d[0]) for s, d in zip(statements, describer.describe(statements), strict=True)], tmp_path,
                 kg_text)
    got = pipe.answer(question.question, dict(question.parses[0].topic_entities),
                      plan=_oracle(question, lambda s: describer.describe([s])[0][0]))
    assert got.answers == [("m.06_bq1", "Blake Lively")]
    assert len(set(re.findall(r"\?cvt\w*", got.sparql))) == 1


def test_shards_cover_the_split_once_and_their_files_rescore_together(setup, tmp_path):
    import argparse
    import json

    from memq.datasets import load
    from memq.evaluate.cli import _shard
    from memq.evaluate.run import run

    pipe, _, _, _ = setup
    first = [q.id for q in load("webqsp", "test")[:5]]
    saved = tmp_path / "plans.jsonl"  # plans for the first 5 test questions: no model call in any shard
    saved.write_text("".join(json.dumps({"id": i, "planner": "finetuned", "plan_s": 1.0,
                                         "plan_raw": "Finally the answer is ?x."}) + "\n" for i in first))
    files, seen = [], []
    for k in (1, 2):
        files.append(tmp_path / f"shard{k}.jsonl")
        summary = run("webqsp", "test", "finetuned", limit=5, per_question=files[-1], progress=False, pipeline=pipe,
                      plans_from=saved, shard=(k, 2))
        assert summary["shard"]["index"] == k and "not all of it" in summary["shard"]["note"]
        seen.append([json.loads(line)["id"] for line in files[-1].read_text().splitlines()])
    assert seen == [first[0::2], first[1::2]]
    whole = run("webqsp", "test", "finetuned", limit=5, progress=False, pipeline=pipe, plans_from=files)
    assert whole["questions"] == 5 and whole["plans_from"]["questions"] == 5 and "shard" not in whole
    assert whole["plans_from"]["file"] == "shard1.jsonl, shard2.jsonl"
    with pytest.raises(ValueError, match=r"shard must be \(k, n\) with 1 <= k <= n, got \(3, 2\)"):
        run("webqsp", "test", "finetuned", limit=5, progress=False, pipeline=pipe, plans_from=saved, shard=(3, 2))
    assert _shard("2/14") == (2, 14)
    for bad in ("0/2", "3/2", "2", "a/b"):
        with pytest.raises(argparse.ArgumentTypeError, match=f"got '{bad}'"):
            _shard(bad)


def test_a_negative_limit_is_refused_with_its_value(setup, capsys):
    """``memq evaluate --limit -1`` sliced from the end: it evaluated all the questions but the last, silently."""
    from memq.cli import build_parser
    from memq.evaluate.run import run

    pipe, _, _, _ = setup
    with pytest.raises(ValueError, match="whole number >= 0; got -1"):
        run("webqsp", "test", "finetuned", limit=-1, progress=False, pipeline=pipe)
    parser = build_parser()
    for argv in (["evaluate", "--dataset", "webqsp", "--split", "dev", "--planner", "grounded", "--limit", "-1"],
                 ["kg", "check", "--dataset", "webqsp", "--limit", "x"]):
        with pytest.raises(SystemExit):
            parser.parse_args(argv)
        assert f"argument --limit: takes a whole number >= 0, got '{argv[-1]}'" in capsys.readouterr().err
    assert parser.parse_args(["evaluate", "--dataset", "webqsp", "--split", "dev", "--planner", "grounded",
                              "--limit", "0"]).limit == 0  # --entities linked --limit 0: linking alone


def test_a_split_without_gold_answers_has_no_f1_and_record_stores_its_dev_figures(setup, tmp_path):
    import argparse
    import json

    from memq.evaluate.cli import record_plan_only, recorded_adapter
    from memq.evaluate.run import questions_for, run

    pipe, _, _, _ = setup
    first = [q.id for q in questions_for("cwq", "dev")[:2]]
    saved = tmp_path / "dev.jsonl"  # what `memq planner eval --out` writes, cut to what --plans reads
    saved.write_text("".join(json.dumps({"id": i, "planner": "finetuned", "plan_raw": "Finally the answer is ?x."})
                             + "\n" for i in first))
    summary = run("cwq", "dev", "finetuned", limit=2, progress=False, pipeline=pipe, plans_from=saved)
    assert summary["questions"] == 2 and summary["answered_questions"] == 0
    assert summary["f1"] is None and summary["hits@1"] is None  # no gold answers: no answer metric, not 0.0
    assert 0.0 <= summary["ehr"] <= 1.0

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "manifest.json").write_text(json.dumps({"dev_metrics": {"questions": 300, "exact_match": 0.5}}))
    manifest = record_plan_only(adapter, summary, limit=2, summary_file=None)
    block = manifest["dev_metrics"]["plan_only_evaluation"]
    assert manifest["dev_metrics"]["exact_match"] == 0.5  # the plan-only figures are added, nothing is lost
    assert block["questions"] == 2 and block["f1"] is None and "no gold answers" in block["note"]
    assert block["plans_from"] == "dev.jsonl" and block["limit"] == 2

    def args(**kw):
        base = {"split": "dev", "planner": "finetuned", "shard": None, "dataset": "cwq"}
        return argparse.Namespace(**{**base, **kw})

    config = argparse.Namespace(adapter=str(adapter))
    assert recorded_adapter(args(), config) == adapter
    with pytest.raises(MemQError, match="--split test --planner finetuned"):
        recorded_adapter(args(split="test"), config)
    with pytest.raises(MemQError, match="--planner grounded"):
        recorded_adapter(args(planner="grounded"), config)
    with pytest.raises(MemQError, match="not shard 1/2"):
        recorded_adapter(args(shard=(1, 2)), config)
    with pytest.raises(MemQError, match="no adapter manifest"):
        recorded_adapter(args(), argparse.Namespace(adapter=str(tmp_path / "nowhere")))


def test_memq_ask_prints_an_answer_without_a_name_once():
    """A literal answer ("1.0") or a node the KG names by its IRI was printed twice: "1.0 (1.0)"."""
    from memq.ask import show
    from memq.types import Answer, Plan, Trace

    a = Answer("q?", [("m.01428y", "Jamaican English"), ("1.0", "1.0"), ("http://memq.dev/synthetic/ent_1", "")], "",
               Plan(steps=[]), [], Trace())
    line = next(x for x in show(a).splitlines() if x.startswith("answers:"))
    assert line == "answers: Jamaican English (m.01428y), 1.0, http://memq.dev/synthetic/ent_1"


def test_an_output_file_s_folder_is_made_before_the_run(tmp_path):
    """``memq evaluate --json out/s.json`` ran every question, then could not write the summary: out/ did not exist.
    The folders of --json and --per-question are made first; one that cannot be made stops the run at once."""
    from memq.errors import MemQError
    from memq.evaluate.cli import output_folder

    output_folder(str(tmp_path / "a" / "b" / "s.json"), "--json")
    assert (tmp_path / "a" / "b").is_dir()
    (tmp_path / "file").write_text("x")
    with pytest.raises(MemQError, match="--per-question .*file.*its folder cannot be made"):
        output_folder(str(tmp_path / "file" / "q.jsonl"), "--per-question")
    output_folder(None, "--json")  # not given: nothing to make
