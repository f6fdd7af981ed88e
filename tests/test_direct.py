"""The direct-SPARQL ablation (MemQ "w/o PE, QRM"): training pairs, output reading, scoring. No model loads."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from memq import datasets
from memq.errors import PlanParseError, SparqlParseError
from memq.evaluate.direct import (
    PARSE_STAGE,
    DirectSparqlModel,
    direct_prompt,
    evaluate_direct,
    examples_from_plans,
    extract_sparql,
    parse_output,
    train_direct,
)
from memq.evaluate.run import run
from memq.kg.oxigraph import OxigraphStore
from memq.pipeline import Config, Pipeline
from memq.plan.data import template_describe
from memq.plan.derive import DerivationError, derive_plan
from memq.sparql import parse_query
from memq.sparql.model import FB

NAME = f"<{FB}type.object.name>"
TRIPLES = f"""
<{FB}m.03_r3> {NAME} "Jamaica"@en .
<{FB}m.03_r3> <{FB}location.country.languages_spoken> <{FB}m.01428y> .
<{FB}m.03_r3> <{FB}location.country.languages_spoken> <{FB}m.04ygk0> .
<{FB}m.03_r3> <{FB}location.country.languages_spoken> "Patwa"@fr .
<{FB}m.01428y> {NAME} "Jamaican English"@en .
<{FB}m.04ygk0> {NAME} "Jamaican Creole English Language"@en .
"""
GOOD = "SELECT DISTINCT ?x WHERE {\n  ns:m.03_r3 ns:location.country.languages_spoken ?x .\n}"


@pytest.fixture(scope="module")
def training_pairs():
    questions = datasets.load("webqsp", "train")[:40]
    describe = template_describe()
    plans = []
    for q in questions:
        try:
            plans.append(derive_plan(q, describe))
        except DerivationError:
            continue
    examples, skipped = examples_from_plans(plans, {q.id: q for q in questions})
    return plans, examples, skipped, {q.id: q for q in questions}


def test_training_pairs_follow_the_planner_data_with_boilerplate_removed(training_pairs):
    plans, examples, skipped, questions = training_pairs
    assert len(plans) >= 30 and len(examples) + len(skipped) == len(plans)
    assert [e.question_id for e in examples] == [p.question_id for p in plans if p.question_id not in dict(skipped)]
    for ex, plan in zip(examples, (p for p in plans if p.question_id not in dict(skipped)), strict=True):
        assert ex.entities == plan.entities and ex.parse_id == plan.parse_id
        assert "PREFIX" not in ex.text and "langMatches" not in ex.text
        for mid, name in ex.entities:
            assert f"{name} ({mid})" in ex.prompt
            assert f"?x != ns:{mid})" not in ex.text
        query = parse_output(ex.text, [m for m, _ in ex.entities])  # the target itself parses
        gold = parse_query(next(p for p in questions[ex.question_id].parses if p.parse_id == ex.parse_id).sparql)
        assert query.where.all_triples() == gold.where.all_triples()


def test_boilerplate_comes_back_as_the_gold_query_has_it(training_pairs):
    _, examples, _, questions = training_pairs
    ex = next(e for e in examples if e.question_id == "WebQTrn-1")
    gold = parse_query(questions["WebQTrn-1"].parses[0].sparql)
    rebuilt = parse_output(ex.text, [m for m, _ in ex.entities])
    assert set(rebuilt.where.filters) >= set(gold.where.filters)  # memq's rule also excludes the film entity
    extra = set(rebuilt.where.filters) - set(gold.where.filters)
    assert {(c.op, c.args[1].local) for c in extra} == {("!=", "m.0ddt_")}


@pytest.mark.parametrize("raw", [
    f"```sparql\n{GOOD}\n```\nThis query finds the languages.",
    f"Here is the query:\n{GOOD} The answer is ?x.",
    f"PREFIX ns: <{FB}>\n{GOOD}\n\nExplanation: languages spoken",
    f"```\n{GOOD}\n```",
])
def test_extract_sparql_from_messy_output(raw):
    text = extract_sparql(raw)
    assert text.endswith("}") and "SELECT DISTINCT ?x" in text and "answer" not in text.lower()
    query = parse_output(raw, ["m.03_r3"])
    assert len(query.where.all_triples()) == 1 and len(query.where.filters) == 2  # language + != topic


def test_extract_keeps_order_and_limit():
    raw = GOOD + "\nORDER BY ?x\nLIMIT 1\nand then some words"
    assert extract_sparql(raw).splitlines()[-2:] == ["ORDER BY ?x", "LIMIT 1"]
    assert parse_output(raw, ["m.03_r3"]).limit == 1


def test_output_without_a_query_raises():
    with pytest.raises(SparqlParseError):
        extract_sparql("I do not know.")
    with pytest.raises(SparqlParseError):
        parse_output("SELECT ?x WHERE { ns:m.03_r3 ns:location.country.languages_spoken ", ["m.03_r3"])


class FakeLLM:
    """Scripted outputs keyed by a fragment of the question."""

    def __init__(self, script: dict[str, str]):
        self.script, self.calls, self.prompts = script, 0, []

    def generate(self, prompts, max_new_tokens=64, stop=None, chat=True):
        self.calls += len(prompts)
        self.prompts += prompts
        return [next((v for k, v in self.script.items() if k in p), "no idea") for p in prompts]


class RaisingPlanner:
    name, calls = "raising", 0

    def plan(self, question, entities):
        raise PlanParseError("scripted planner failure")


@pytest.fixture(scope="module")
def pipe(tmp_path_factory):
    path = tmp_path_factory.mktemp("kg") / "kg.nt"
    path.write_text(TRIPLES, encoding="utf-8")
    bank = SimpleNamespace(search=lambda text, k: [])  # the direct model reads no memory; memq evaluate warms it up
    return Pipeline(Config(planner="given"), kg=OxigraphStore.from_file(path), bank=bank, planner=RaisingPlanner())


def _q(qid):
    return next(q for q in datasets.load("webqsp", "test") if q.id == qid)


def test_direct_answer_scores_like_memq(pipe):
    q = _q("WebQTest-0")
    rec = evaluate_direct(pipe, q, f"```sparql\n{GOOD}\n```", generate_s=0.5)
    assert rec["f1"] == 1.0 and rec["hits@1"] == 1.0 and rec["error"] is None
    assert [n for _, n in rec["answers"]] == ["Jamaican Creole English Language", "Jamaican English"]  # by name
    assert rec["ehr"] == 1.0 and rec["latency_s"] >= 0.5 and "langMatches" in rec["sparql"]


def test_malformed_output_scores_zero(pipe):
    rec = evaluate_direct(pipe, _q("WebQTest-0"), "SELECT ?x WHERE { ns:m.03_r3 ns:location.")
    assert rec["f1"] == 0.0 and rec["hits@1"] == 0.0 and rec["error"] == PARSE_STAGE and rec["answers"] == []


def test_run_with_ablation_is_resumable(pipe, tmp_path):
    llm = FakeLLM({"jamaican people speak": GOOD, "": "SELECT ?x WHERE { broken"})
    model = DirectSparqlModel(llm=llm, batch_size=2)
    per_q = tmp_path / "pq.jsonl"
    plain = run("webqsp", "test", "finetuned", limit=3, per_question=per_q, progress=False, pipeline=pipe)
    assert "ablation" not in plain and plain["f1"] < 1.0
    summary = run("webqsp", "test", "finetuned", limit=3, per_question=per_q, progress=False, pipeline=pipe,
                  ablation="direct-sparql", ablation_model=model)
    block = summary["ablation"]
    assert block["questions"] == 3 and llm.calls == 3 and "(m.03_r3)" in llm.prompts[0]
    assert {"hits@1", "f1", "ehr", "ged", "p50_s", "llm_calls_per_question", "errors"} <= set(block)
    assert block["errors"][PARSE_STAGE] == 2 and block["llm_calls_per_question"] == 1.0
    assert 0.3 < block["f1"] < 0.34  # WebQTest-0 right, the two malformed outputs 0
    records = {}
    for line in per_q.read_text().splitlines():
        rec = json.loads(line)
        records[rec["id"]] = rec
    assert all("ablation" in r for r in records.values()) and records["WebQTest-0"]["ablation"]["f1"] == 1.0
    again = run("webqsp", "test", "finetuned", limit=3, per_question=per_q, progress=False, pipeline=pipe,
                ablation="direct-sparql", ablation_model=model)
    assert llm.calls == 3 and again["ablation"] == block  # nothing re-generated


def test_a_rescoring_run_reuses_the_saved_ablation_outputs(pipe, tmp_path):
    llm = FakeLLM({"jamaican people speak": GOOD, "": "SELECT ?x WHERE { broken"})
    first = tmp_path / "first.jsonl"
    before = run("webqsp", "test", "finetuned", limit=2, per_question=first, progress=False, pipeline=pipe,
                 ablation="direct-sparql", ablation_model=DirectSparqlModel(llm=llm, batch_size=2))
    assert llm.calls == 2
    # rescoring with --plans: the plans and the direct-SPARQL outputs come from the first run; a question the
    # file lacks is generated afresh
    later = FakeLLM({"": "SELECT ?x WHERE { broken"})
    again = run("webqsp", "test", "finetuned", limit=3, per_question=tmp_path / "again.jsonl", progress=False,
                pipeline=pipe, ablation="direct-sparql", ablation_model=DirectSparqlModel(llm=later, batch_size=2),
                plans_from=first)
    assert later.calls == 1 and again["plans_from"] == {"file": "first.jsonl", "questions": 2, "ablation_outputs": 2}
    records = [json.loads(line) for line in (tmp_path / "again.jsonl").read_text().splitlines()]
    assert [r["ablation"].get("raw_from") for r in records] == ["first.jsonl", "first.jsonl", None]
    assert before["ablation"]["f1"] == 0.5 and again["ablation"]["f1"] == round(1 / 3, 4)  # WebQTest-0 right


def test_train_direct_uses_the_planner_trainer_with_the_direct_prompt(training_pairs, monkeypatch, tmp_path):
    from memq.plan import finetune

    seen = {}

    def fake_train(plans, out_dir, cfg, **kw):
        seen["prompt"] = finetune.planner_prompt(plans[0].question, plans[0].entities)
        seen["target"] = plans[0].text
        (tmp_path / "manifest.json").write_text(json.dumps({"kind": "lora-planner"}))
        return finetune.TrainResult(tmp_path, 1, [1.0], 0.1)

    monkeypatch.setattr(finetune, "train", fake_train)
    original = finetune.planner_prompt
    _, examples, _, _ = training_pairs
    train_direct(examples[:2], tmp_path, finetune.TrainConfig(max_steps=1))
    assert seen["prompt"] == direct_prompt(examples[0].question, examples[0].entities)
    assert seen["target"] == examples[0].text and finetune.planner_prompt is original
    assert json.loads((tmp_path / "manifest.json").read_text())["kind"] == "lora-direct-sparql"


def test_like_copies_the_planners_training_data():
    import argparse

    from memq.errors import MemQError
    from memq.evaluate.direct_cli import _same_data

    data = {"datasets": ["cwq"], "limit": None}
    args = argparse.Namespace(data=None, limit=None)
    _same_data(args, data)
    assert (args.data, args.limit) == ("cwq", None)
    with pytest.raises(MemQError, match="'webqsp'.*'cwq'"):
        _same_data(argparse.Namespace(data="webqsp", limit=None), data)
    with pytest.raises(MemQError, match="--limit 50"):
        _same_data(argparse.Namespace(data=None, limit=50), data)
