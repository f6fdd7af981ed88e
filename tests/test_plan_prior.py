"""The question prior (memq.plan.prior) and the line search's bonus that carries it into the grounded planner."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_plan_grounded import JAMAICA, TableLM, bank, kg, planner  # noqa: F401 (fixtures)

from memq.errors import MemQError
from memq.memory.embed import HashingEmbedder
from memq.plan.grounded import GroundedConfig
from memq.plan.linesearch import SearchCost, best_lines
from memq.plan.prior import QuestionPrior, bonuses, source_questions

OFFICIAL = "Find the official language of the country Jamaica, assign it to ?x.\nFinally the answer is ?x."
SPOKEN = "Find the languages spoken of the country Jamaica, assign it to ?x.\nFinally the answer is ?x."


def toy_prior(neighbours: int = 2) -> QuestionPrior:
    emb = HashingEmbedder()
    questions = {"t1": "what language do they speak in jamaica", "t2": "what languages are spoken in cuba",
                 "t3": "what currency does jamaica use"}
    uses = {"t1": ("spoken",), "t2": ("spoken", "official"), "t3": ("currency",)}
    ids = sorted(questions)
    return QuestionPrior(ids, emb.encode([questions[i] for i in ids]), uses, emb, neighbours=neighbours)


# --------------------------------------------------------------------------- the line search's bonus

@pytest.mark.parametrize("seed", range(5))
def test_line_search_with_bonuses_finds_the_exact_k_best_by_log_probability_plus_bonus(seed):
    rng = np.random.default_rng(200 + seed)
    cands = sorted({tuple(int(t) for t in rng.integers(2, 5, size=rng.integers(1, 6))) for _ in range(30)})
    bonus = [0.0 if rng.random() < 0.3 else -float(rng.uniform(0, 4)) for _ in cands]
    lm = TableLM(seed)
    brute = sorted(((sum(lm.expand([9] + list(c), 1, [])[0]) + b, c) for c, b in zip(cands, bonus, strict=True)),
                   reverse=True)
    found = best_lines(lm, [9], [list(c) for c in cands], 4, bonus=bonus, prune=1e9, max_passes=10_000,
                       cost=SearchCost())
    assert [s.ids for s in found] == [c for _, c in brute[:4]]
    assert [s.score for s in found] == pytest.approx([s for s, _ in brute[:4]])
    assert [s.bonus for s in found] == [bonus[s.index] for s in found]
    # without the bonus the ranking is the model's alone, as before
    plain = best_lines(lm, [9], [list(c) for c in cands], 4, prune=1e9, max_passes=10_000)
    assert all(s.bonus == 0 and s.score == s.logprob for s in plain)


def test_a_positive_bonus_or_one_too_many_is_refused_by_name():
    with pytest.raises(ValueError, match=r"bonus 1 is 0\.5"):
        best_lines(TableLM(0), [9], [[2], [3]], 1, bonus=[0.0, 0.5])
    with pytest.raises(ValueError, match="3 bonuses for 2 candidates"):
        best_lines(TableLM(0), [9], [[2], [3]], 1, bonus=[0.0, 0.0, 0.0])


# --------------------------------------------------------------------------- support and bonuses

def test_support_is_each_statement_s_share_of_the_neighbours_similarity():
    prior = toy_prior(neighbours=2)
    near = prior.nearest("what language is spoken in jamaica")
    assert [i for i, _ in near] == ["t1", "t2"]
    (_, s1), (_, s2) = near
    support = prior.support("what language is spoken in jamaica")
    assert support["spoken"] == pytest.approx(1.0)
    assert support["official"] == pytest.approx(s2 / (s1 + s2))
    assert "currency" not in support  # t3 is not among the 2 nearest
    assert set(toy_prior(neighbours=3).support("what language is spoken in jamaica")) == {"spoken", "official",
                                                                                           "currency"}


def test_bonuses_are_zero_for_the_best_supported_line_and_for_lines_that_are_not_finds():
    support = {"a": 1.0, "b": 0.5}
    out = bonuses(support, ["a", "b", "c", None], weight=2.0, floor=0.1)
    assert out[0] == 0.0 and out[3] == 0.0
    assert out[1] == pytest.approx(2.0 * (math.log(0.6) - math.log(1.1)))
    assert out[2] == pytest.approx(2.0 * (math.log(0.1) - math.log(1.1)))
    assert bonuses(support, ["a", "b"], weight=0.0, floor=0.1) == [0.0, 0.0]
    assert bonuses({}, ["x", "y"], weight=1.0, floor=0.1) == [0.0, 0.0]  # no votes: no preference
    with pytest.raises(ValueError, match="weight must be >= 0"):
        bonuses(support, ["a"], weight=-1.0, floor=0.1)


def test_bad_prior_settings_are_refused_by_name():
    with pytest.raises(ValueError, match="prior must be >= 0"):
        GroundedConfig(prior=-0.5)
    with pytest.raises(ValueError, match="prior_floor must be > 0"):
        GroundedConfig(prior_floor=0.0)
    with pytest.raises(ValueError, match="neighbours must be an int >= 1"):
        GroundedConfig(neighbours=0)
    with pytest.raises(MemQError, match="2 question ids but vectors of shape"):
        QuestionPrior(["a", "b"], np.zeros((3, 8)), {"a": (), "b": ()}, HashingEmbedder(8))


# --------------------------------------------------------------------------- from the memory bank

class _Rec:
    def __init__(self, sid, qids):
        self.statement = type("S", (), {"id": sid, "question_ids": tuple(qids)})()


class FakeBank:
    def __init__(self, records, embedder):
        self.records = records
        self.sources = [("webqsp-train",)] * len(records)
        self.embedder = embedder


def _split_ids():
    from memq.datasets import load
    from memq.plan.data import split_of

    questions = load("webqsp", "train")
    train = [q for q in questions if split_of(q.id) == "train"][:3]
    dev = [q for q in questions if split_of(q.id) == "dev"][:2]
    return train, dev


class CountingEmbedder(HashingEmbedder):
    def __init__(self):
        super().__init__(64)
        self.texts = 0

    def encode(self, texts):
        self.texts += len(texts)
        return super().encode(texts)


def test_dev_questions_never_vote_and_the_texts_come_from_the_dataset():
    train, dev = _split_ids()
    records = [_Rec("s1", [train[0].id, dev[0].id]), _Rec("s2", [train[1].id, train[2].id]), _Rec("s3", [dev[1].id])]
    ids, texts, uses = source_questions(FakeBank(records, HashingEmbedder()))
    assert ids == sorted(q.id for q in train) and not {q.id for q in dev} & set(ids)
    assert texts == [{q.id: q.question for q in train}[i] for i in ids]
    assert uses[train[0].id] == ("s1",) and uses[train[1].id] == ("s2",)
    # a bank whose sources name no training questions (the schema alone) has no prior
    schema_only = FakeBank(records, HashingEmbedder())
    schema_only.sources = [("schema",)] * len(records)
    assert QuestionPrior.from_bank(schema_only, cache=False) is None


def test_every_grailqa_train_question_and_synthetic_program_votes_as_its_dev_questions_are_a_file_of_their_own():
    from memq.memory.build import gold_questions
    from memq.plan.data import split_of

    grail = gold_questions("grailqa-train")
    carved = [q for q in grail if split_of(q.id) == "dev"][:2]  # the side WebQSP's and CWQ's dev is carved from
    synthetic = next(q for q in gold_questions("grailqa-synthetic") if split_of(q.id) == "dev")
    assert len(carved) == 2
    fake = FakeBank([_Rec("g1", [carved[0].id]), _Rec("g2", [carved[1].id, grail[0].id, synthetic.id])],
                    HashingEmbedder())
    fake.sources = [("grailqa-train",), ("grailqa-synthetic", "grailqa-train", "schema")]
    ids, texts, uses = source_questions(fake)
    assert set(ids) == {carved[0].id, carved[1].id, grail[0].id, synthetic.id} and uses[carved[1].id] == ("g2",)
    assert texts[ids.index(synthetic.id)] == synthetic.question
    train, dev = _split_ids()  # beside it, WebQSP's dev side still keeps out
    fake = FakeBank([_Rec("g1", [carved[0].id]), _Rec("w1", [train[0].id, dev[0].id])], HashingEmbedder())
    fake.sources = [("grailqa-train",), ("webqsp-train",)]
    assert source_questions(fake)[0] == sorted([carved[0].id, train[0].id])


def test_the_training_questions_vectors_are_cached_and_a_bad_cache_file_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMQ_CACHE", str(tmp_path))
    train, _ = _split_ids()
    emb = CountingEmbedder()
    fake = FakeBank([_Rec("s1", [q.id for q in train])], emb)
    first = QuestionPrior.from_bank(fake)
    assert emb.texts == 3
    (saved,) = (tmp_path / "prior").glob("*.npy")
    second = QuestionPrior.from_bank(fake)
    assert emb.texts == 3 and np.array_equal(first.vectors, second.vectors)  # read back, not embedded again
    saved.write_bytes(b"not a numpy file")
    third = QuestionPrior.from_bank(fake)
    assert emb.texts == 6 and np.array_equal(first.vectors, third.vectors)
    assert np.load(saved).shape == (3, 64)  # rewritten


# --------------------------------------------------------------------------- in the grounded planner

def test_a_strong_prior_overrides_the_model_and_the_cost_records_its_weight(kg, bank):  # noqa: F811
    question = "what language do they speak in jamaica?"
    model_only = planner(kg, bank, OFFICIAL, prior=0.0).plan(question, JAMAICA)
    assert model_only.raw == OFFICIAL and model_only.cost["prior_weight"] == 0.0
    p = planner(kg, bank, OFFICIAL, prior=500.0)
    p._prior, p._prior_built = toy_prior(), True  # votes for "spoken" (support 1.0) over "official"
    plan = p.plan(question, JAMAICA)
    assert plan.raw == SPOKEN and plan.cost["prior_weight"] == 500.0
    assert plan.beam[0][1] < 0 and not plan.notes
    weak = planner(kg, bank, OFFICIAL, prior=0.01)
    weak._prior, weak._prior_built = toy_prior(), True
    assert weak.plan(question, JAMAICA).raw == OFFICIAL  # a weak prior leaves a confident model alone


def test_a_bank_without_training_questions_turns_the_prior_off_and_says_so(kg, bank):  # noqa: F811
    plan = planner(kg, bank, OFFICIAL, prior=1.5).plan("what language do they speak in jamaica?", JAMAICA)
    assert plan.raw == OFFICIAL and plan.cost["prior_weight"] == 0.0
    assert plan.notes == ["question prior off: the memory bank's sources name no training questions"]


def test_prior_flags_reach_the_config():
    import argparse

    from memq.ask import add_search_args, config_from
    from memq.pipeline import Pipeline

    parser = argparse.ArgumentParser()
    parser.add_argument("--planner")
    add_search_args(parser)
    config = config_from(parser.parse_args(["--planner", "grounded", "--prior", "0", "--neighbours", "20",
                                            "--prior-floor", "0.3"]))
    assert (config.search.prior, config.search.neighbours, config.search.prior_floor) == (0.0, 20, 0.3)
    assert Pipeline(config_from(parser.parse_args([]))).search.prior == GroundedConfig().prior


def test_a_branch_whose_lines_all_carry_a_low_bonus_is_not_expanded_before_its_bound_is_reached():
    class Likes2(TableLM):  # token 2 is far likelier than 5 after the prefix
        def _lp(self, pos, prev, tok):
            return {2: -0.1, 5: -2.0}.get(tok, -0.5) if pos == 1 else -0.5

    lm = Likes2(0)
    cost = SearchCost()
    found = best_lines(lm, [9], [[2, 3], [2, 4], [5, 6]], 1, bonus=[-50.0, -50.0, 0.0], cost=cost)
    assert [s.ids for s in found] == [(5, 6)]
    assert found[0].score == pytest.approx(-2.5)
    # the root, then the branch of 5; the branch of 2 (bound -0.1 - 50) is never expanded
    assert cost.passes == lm.passes == 2


@pytest.mark.parametrize("seed", range(3))
def test_the_search_stops_at_the_k_best_usable_lines_and_returns_the_unusable_ones_before_them(seed):
    rng = np.random.default_rng(300 + seed)
    cands = sorted({tuple(int(t) for t in rng.integers(2, 5, size=rng.integers(1, 6))) for _ in range(30)})
    lm = TableLM(seed)
    order = [c for _, c in sorted(((sum(lm.expand([9] + list(c), 1, [])[0]), c) for c in cands), reverse=True)]
    unusable = {order[0], order[2]}  # the best line and the third cannot be used
    asked = []

    def usable(line):
        asked.append(line.ids)
        return line.ids not in unusable

    found = best_lines(lm, [9], [list(c) for c in cands], 2, prune=1e9, max_passes=10_000, usable=usable)
    assert [s.ids for s in found] == order[:4]  # two usable lines, and the two unusable ones ranked above them
    assert asked == order[:4]  # each line found is asked once, best first


@pytest.mark.parametrize("seed", range(5))
def test_deferred_candidates_are_found_as_if_given_at_once_and_made_only_when_reached(seed):
    rng = np.random.default_rng(400 + seed)
    cands = sorted({tuple(int(t) for t in rng.integers(2, 6, size=rng.integers(1, 6))) for _ in range(30)})
    bonus = [0.0 if rng.random() < 0.3 else -float(rng.uniform(0, 4)) for _ in cands]
    later = [i for i, c in enumerate(cands) if c[0] == 5 and len(c) > 1]  # the lines under token 5 come later
    now = [i for i in range(len(cands)) if i not in later]
    made = []

    def make():
        made.append(True)
        return [(list(cands[i]), bonus[i]) for i in later]

    lm = TableLM(seed)
    for c in cands:  # the table's entries drawn in one order, whatever order the searches ask in
        lm.expand([9] + list(c), 1, [])
    eager_cost, lazy_cost = SearchCost(), SearchCost()
    eager = best_lines(lm, [9], [list(cands[i]) for i in now + later], 4, prune=1e9, max_passes=10_000,
                       bonus=[bonus[i] for i in now + later], cost=eager_cost)
    lazy = best_lines(lm, [9], [list(cands[i]) for i in now], 4, prune=1e9, max_passes=10_000,
                      bonus=[bonus[i] for i in now], deferred=[([5], make)], cost=lazy_cost)
    assert [(s.index, s.ids, s.score) for s in lazy] == [(s.index, s.ids, s.score) for s in eager]
    assert len(made) <= 1
    assert lazy_cost.passes == eager_cost.passes  # once made, they wait for their own bound


def test_deferred_candidates_are_not_made_where_the_search_never_goes():
    class Likes2(TableLM):
        def _lp(self, pos, prev, tok):
            return {2: -0.1, 5: -9.0}.get(tok, -0.5) if pos == 1 else -0.5

    def make():
        raise AssertionError("made, though the search never reached its path")

    found = best_lines(Likes2(0), [9], [[2, 3], [2, 4]], 2, prune=5.0, deferred=[([5], make)])
    assert [s.ids for s in found] == [(2, 3), (2, 4)]
    with pytest.raises(ValueError, match="does not continue its path"):
        best_lines(Likes2(0), [9], [[7]], 1, prune=1e9, deferred=[([2], lambda: [([3, 4], 0.0)])])


def test_deferred_candidates_once_made_wait_for_their_own_bound():
    class Likes5(TableLM):  # token 5 (where the deferred lines start) is the likelier
        def _lp(self, pos, prev, tok):
            return {2: -2.0, 5: -0.1}.get(tok, -0.5) if pos == 1 else -0.5

    made = []

    def make():
        made.append(True)
        return [([5, 6], -50.0), ([5, 7], -50.0)]

    lm, cost = Likes5(0), SearchCost()
    found = best_lines(lm, [9], [[2, 3]], 1, deferred=[([5], make)], cost=cost)
    assert [s.ids for s in found] == [(2, 3)] and made == [True]
    assert cost.passes == 2  # the root and the branch of 2; the branch of 5, made, is not expanded at -50
