"""Planners with fake LLMs (few-shot retrieval and prompts, batching, scripted), and plan-only evaluation."""

from __future__ import annotations

import argparse

import pytest

from memq.errors import MemQError, PlanParseError
from memq.memory.embed import HashingEmbedder
from memq.plan.cli import make_planner
from memq.plan.data import derive_split
from memq.plan.evaluate import evaluate, score_plan, summarise
from memq.plan.fewshot import STOP, FewShotPlanner
from memq.plan.planner import Planner, ScriptedPlanner
from memq.plan.prompt import TABLE9, planner_prompt


class EchoLLM:
    """Answers every prompt with a fixed text; records prompts and calls."""

    name = "echo"
    batch_size = 3

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.calls = 0
        self.seen: list[tuple[str, int, list[str] | None]] = []

    def generate(self, prompts, max_new_tokens=64, stop=None, chat=True):
        assert len(prompts) <= self.batch_size
        self.calls += len(prompts)
        self.seen += [(p, max_new_tokens, stop) for p in prompts]
        return [self.reply for _ in prompts]


@pytest.fixture(scope="module")
def examples():
    return derive_split("webqsp", "train", limit=60).plans


def test_table9_prompt_lists_entity_names_one_per_line():
    text = planner_prompt("who is justin bieber's brother?", [("m.06w2sn5", "Justin Bieber"), ("m.05zppz", "Male")])
    assert text.startswith("You are given a problem to solve step by step.")
    assert text.endswith("Question:\nwho is justin bieber's brother?\nTopic Entities:\nJustin Bieber\nMale")
    assert (planner_prompt("q?", {"m.1": "Justin Bieber", "m.2": "Male"})
            == planner_prompt("q?", ["Justin Bieber", "Male"]))
    assert "{question}" in TABLE9 and "{topic_entities}" in TABLE9
    with pytest.raises(ValueError, match="question"):
        planner_prompt("  ", [])


def test_fewshot_retrieves_similar_questions_and_builds_the_prompt(examples):
    target = examples[7]
    llm = EchoLLM("Find the x of y, assign it to ?x.\nFinally the answer is ?x.")
    planner = FewShotPlanner(llm, examples, k=3, embedder=HashingEmbedder())
    planner.warm_up()  # memq serve's, before the first question: the examples' embeddings
    assert planner._matrix is not None and planner._matrix.shape[0] == len(examples) and llm.calls == 0
    near = planner.nearest(target.question + " please")
    assert near[0].question_id == target.question_id and len(near) == 3
    assert all(e.question_id != target.question_id for e in planner.nearest(target.question))  # itself is skipped
    prompt = planner.prompt(target.question + " please", target.entities)
    assert prompt.count("Plan:") == 4 and prompt.rstrip().endswith("Plan:")
    assert prompt.index(target.text) > prompt.index("Here are some examples.")  # the closest sits last
    plan = planner.plan("who is x?", ["y"])
    assert [s.kind for s in plan.steps] == ["find", "answer"]
    assert llm.seen[-1][2] == STOP and planner.calls == 1
    assert isinstance(planner, Planner)


def test_batched_plan_many_keeps_order_and_reports_unreadable(examples):
    llm = EchoLLM("no plan here")
    planner = FewShotPlanner(llm, examples, k=0, embedder=HashingEmbedder())
    out = planner.plan_many([(e.question, e.entities) for e in examples[:7]])
    assert len(out) == 7 and all(isinstance(o, PlanParseError) for o in out)
    assert llm.calls == 7


def test_scores_exact_and_step_counts(examples):
    gold = examples[0]
    exact = score_plan(gold, "Step 1: " + gold.text.upper().replace("?X", "?x"))
    assert exact.exact and exact.steps_ok and exact.kinds_ok and exact.parsed
    wrong = score_plan(gold, gold.text.replace("assign it to ?x", "assign it to ?z", 1))
    assert not wrong.exact and wrong.steps_ok
    garbage = score_plan(gold, "I do not know")
    assert not garbage.parsed and not garbage.steps_ok
    summary = summarise([exact, wrong, garbage])
    assert summary["questions"] == 3
    assert summary["exact_match"] == pytest.approx(1 / 3, abs=1e-3)
    assert summary["step_count_accuracy"] == pytest.approx(2 / 3, abs=1e-3)
    assert summary["parse_rate"] == pytest.approx(2 / 3, abs=1e-3)


def test_evaluate_a_scripted_planner(examples):
    golds = examples[:5]
    script = {g.question: g.text for g in golds[:4]}
    script[golds[4].question] = "nonsense"
    metrics, scores = evaluate(ScriptedPlanner(script), golds)
    assert metrics["exact_match"] == pytest.approx(0.8)
    assert [s.exact for s in scores] == [True, True, True, True, False]
    with pytest.raises(MemQError, match="no plan"):
        ScriptedPlanner({}).plan("q", [])


def test_missing_adapter_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMQ_CACHE", str(tmp_path))
    args = argparse.Namespace(fewshot=False, adapter=str(tmp_path / "nope"), dataset="webqsp", device="cpu",
                              batch_size=2)
    with pytest.raises(MemQError, match="no planner adapter"):
        make_planner(args)
    from memq.plan import make_planner as by_name

    with pytest.raises(MemQError, match="unknown planner 'given'"):
        by_name("given")
    assert by_name("fewshot", model="smollm2", k=2).name == "fewshot:smollm2:k=2"  # cheap: nothing loads yet


def test_the_pipeline_names_its_fine_tuned_adapter_without_loading_it(tmp_path, monkeypatch):
    from pathlib import Path

    from memq.pipeline import Config, Pipeline

    monkeypatch.setenv("MEMQ_CACHE", str(tmp_path))
    assert Pipeline(Config(planner="finetuned", adapter="some/adapter")).planner_adapter == Path("some/adapter")
    assert Pipeline(Config(planner="given")).planner_adapter is None
    assert Pipeline(Config(planner="fewshot")).planner_adapter is None
    given = Pipeline(Config(planner="given"), planner=ScriptedPlanner({}))
    assert given.planner_adapter is None  # a planner handed in has no adapter
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "adapter_config.json").write_text("{}")
    assert Pipeline(Config(planner="auto", adapter=str(tmp_path / "a"))).planner_adapter == tmp_path / "a"
    assert Pipeline(Config(planner="auto", adapter=str(tmp_path / "none"))).planner_adapter is None
    # auto: grounded where it won on dev and llama.cpp can score lines, hybrid for CWQ, else free generation,
    # else few-shot
    adapter = str(tmp_path / "a")
    assert Pipeline(Config(planner="auto", adapter=adapter))._planner_choice()[0] == "grounded"
    assert Pipeline(Config(planner="auto", adapter=adapter, backend="transformers"))._planner_choice()[0] == "finetuned"
    assert Pipeline(Config(planner="auto", adapter=adapter, planner_dataset="cwq"))._planner_choice()[0] == "hybrid"
    assert Pipeline(Config(planner="auto", adapter=adapter, planner_dataset="cwq",
                           backend="transformers"))._planner_choice()[0] == "finetuned"
    assert Pipeline(Config(planner="hybrid", adapter=adapter)).planner_adapter == tmp_path / "a"
    assert Pipeline(Config(planner="auto", adapter=str(tmp_path / "none")))._planner_choice()[0] == "fewshot"
