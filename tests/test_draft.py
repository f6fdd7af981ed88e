"""Speculative greedy decoding (memq.llm.draft, Runner.greedy): the n-gram drafter's guesses, and decoding with
drafts giving exactly the tokens of one-token-a-pass greedy decoding, whatever the drafts are, in fewer passes
when they are good. A fake llama.cpp context stands in for the model (the real one is in test_llamacpp.py)."""

from __future__ import annotations

import random
import zlib

import numpy as np
import pytest

from memq.llm.draft import DRAFT, NgramDrafter
from memq.llm.kv_state import Runner
from memq.llm.llamacpp import LlamaCppLLM

EOS, VOCAB = 0, 40


class FakeRunner:
    """A context whose logits after a prefix depend on its last three tokens (deterministically)."""

    eos, n_ctx, n_batch = EOS, 256, 16
    greedy = Runner.greedy  # the real decoding loop, over this fake context

    def __init__(self, eos_after: int = 30) -> None:
        self.ids: list[int] = []
        self.decodes = 0
        self.eos_after = eos_after

    def _row(self, prefix: list[int]) -> np.ndarray:
        rng = np.random.default_rng(zlib.crc32(repr(prefix[-3:]).encode()))
        row = rng.normal(size=VOCAB)
        row[EOS] = 10.0 if len(prefix) >= self.eos_after else -10.0
        return row

    def logits(self, ids: list[int], first: int, keep: bool = True) -> np.ndarray:
        assert len(ids) - first + 1 <= self.n_batch and len(ids) <= self.n_ctx
        self.ids = list(ids)
        self.decodes += 1
        return np.stack([self._row(ids[:i + 1]) for i in range(first - 1, len(ids))])

    def truncate(self, n: int) -> None:
        del self.ids[n:]


class FakeTokenizer:
    def decode(self, ids, skip_special_tokens=False):
        return "".join(f"<{t}>" for t in ids if not (skip_special_tokens and t == EOS))


class Oracle:
    """Drafts the true greedy continuation, with every ``wrong``-th guess replaced."""

    def __init__(self, truth: list[int], prompt: int, wrong: int = 0) -> None:
        self.truth, self.prompt, self.wrong = truth, prompt, wrong

    def draft(self, context, k):
        done = len(context) - self.prompt
        out = list(self.truth[done:done + k])
        if self.wrong and len(out) > 1:
            out[-1] = (out[-1] + 1) % VOCAB
        return out


class Noise:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def draft(self, context, k):
        return [self.rng.randrange(VOCAB) for _ in range(self.rng.randrange(k + 1))]


def _greedy(prompt, drafter=None, max_new=64, stop=None, eos_after=30):
    runner = FakeRunner(eos_after)
    out = LlamaCppLLM._greedy(runner, FakeTokenizer(), prompt, max_new, stop, drafter)
    return out, runner


@pytest.mark.parametrize("seed", range(6))
def test_drafts_never_change_the_greedy_tokens(seed):
    prompt = [random.Random(seed).randrange(1, VOCAB) for _ in range(12)]
    plain, runner = _greedy(prompt)
    assert plain[-1] == EOS and len(plain) == 30 - len(prompt) + 1  # the fake model ends where it should
    for drafter in (Oracle(plain, len(prompt)), Oracle(plain, len(prompt), wrong=1), Noise(seed),
                    NgramDrafter([plain, prompt], eos=EOS)):
        got, spec = _greedy(prompt, drafter)
        assert got == plain
        assert spec.ids == runner.ids  # the KV cache ends as one-token-a-pass decoding leaves it
    _, good = _greedy(prompt, Oracle(plain, len(prompt)))
    assert good.decodes <= 1 + -(-len(plain) // (DRAFT + 1))  # the prompt, then the chosen token and DRAFT more a pass
    assert good.decodes < runner.decodes


def test_max_new_tokens_and_stop_strings_end_a_draft_where_greedy_ends():
    prompt = [5, 6, 7, 8]
    plain, _ = _greedy(prompt, max_new=200, eos_after=60)
    for max_new in (1, 2, 5, 9):
        assert _greedy(prompt, Oracle(plain, len(prompt)), max_new=max_new)[0] == plain[:max_new]
    stop = f"<{plain[4]}>"
    cut = next(i for i in range(len(plain)) if stop in FakeTokenizer().decode(plain[:i + 1]))
    got, runner = _greedy(prompt, Oracle(plain, len(prompt)), stop=[stop], eos_after=60)
    assert got == plain[:cut + 1]
    assert runner.ids == prompt + got[:-1]


def test_the_ngram_drafter_guesses_formulaic_continuations():
    plans = [[1, 2, 3, 4, 5, 6], [9, 2, 3, 4, 5, 6], [7, 2, 3, 4, 8, 6]]
    drafter = NgramDrafter(plans, eos=EOS, order=4, min_context=2, min_share=0.5)
    assert drafter.draft([1, 2, 3], k=3) == [4, 5, 6]  # each token the likeliest after the last (up to) 4
    assert drafter.draft([1, 2, 3], k=10) == [4, 5, 6, EOS]  # a chain stops where the model has no guess
    assert drafter.draft([7, 2, 3, 4, 8], k=2) == [6, EOS]  # the longest context known decides
    strict = NgramDrafter(plans, eos=EOS, order=4, min_context=2, min_share=0.9)
    assert drafter.draft([20, 3, 4], k=1) == [5]  # 5 follows "3 4" in 2 plans of 3
    assert strict.draft([20, 3, 4], k=3) == []  # ... too few for 0.9 (and nothing earlier to copy)
    # no guess from the model: copy what followed the last earlier occurrence of the context's tail
    assert drafter.draft([20, 21, 22, 23, 30, 21, 22], k=2) == [23, 30]
    assert drafter.draft([20, 21, 30, 31], k=2) == []


@pytest.mark.parametrize("kwargs", [{"min_context": 0}, {"min_context": 6}, {"min_share": 0.0}, {"min_share": 1.5}])
def test_the_drafter_refuses_bad_settings(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        NgramDrafter([[1, 2, 3]], **kwargs)


def test_the_llamacpp_model_builds_its_drafter_on_load_and_says_from_what(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from memq.errors import MemQError

    monkeypatch.setenv("MEMQ_CACHE", str(tmp_path))
    calls = []

    def tokenizer(text, add_special_tokens=True):
        calls.append(text)
        return {"input_ids": [ord(c) for c in text]}

    def loaded(texts, what="plans"):
        llm = LlamaCppLLM("smollm2")
        llm._loaded = SimpleNamespace(tokenizer=tokenizer, runner=SimpleNamespace(eos=EOS),
                                      tokenizer_key="chars")  # what load() leaves
        llm.draft_from(what, texts)
        return llm

    plans = ["Find the x of y.", "Find the z of y."]
    llm = loaded(lambda: plans)
    assert llm.drafter is not None and llm.drafts.startswith("plans (model saved in drafts/): 2 texts, ")
    assert llm.drafter.draft([ord(c) for c in "Find"], k=5) == [ord(c) for c in " the "]
    assert calls == plans
    again = loaded(lambda: plans)  # a new process: the saved model, nothing tokenized
    assert calls == plans and again.drafts.startswith("plans: 2 texts, ") and again.drafter.table == llm.drafter.table

    def read_only(self, path):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(NgramDrafter, "save", read_only)
    unsaved = loaded(lambda: ["Make sure ?x is y."])  # a cache it cannot write: drafts all the same
    assert unsaved.drafter is not None and unsaved.drafts.startswith(
        "plans (model not saved: Permission denied): 1 texts")

    def missing():
        raise MemQError("planner data file not found: somewhere")
    llm = loaded(missing, "training plans")
    assert llm.drafter is None and llm.drafts == "none (training plans: planner data file not found: somewhere)"
    monkeypatch.setenv("MEMQ_LLAMA_DRAFT", "0")
    llm = loaded(lambda: ["Find the x of y."])
    assert llm.drafter is None and llm.drafts == "none (MEMQ_LLAMA_DRAFT=0)"


def test_the_finetuned_planner_drafts_from_the_plans_its_adapter_was_trained_on(monkeypatch):
    import memq.llm.llamacpp
    from memq.errors import MemQError
    from memq.plan.data import data_hash, load_split
    from memq.plan.planner import FineTunedPlanner, default_adapter, read_manifest, training_plans

    manifest = read_manifest(default_adapter("webqsp"))
    plans = load_split("webqsp", "train")
    assert data_hash(plans) == manifest["data"]["sha256"]  # the committed adapter's training data, derived anew
    assert training_plans(manifest) == [p.text for p in plans]
    assert training_plans(manifest, 10) == [p.text for p in plans[:10]]
    with pytest.raises(MemQError, match="names no training data"):
        training_plans({"kind": "lora-planner"})
    monkeypatch.setattr(memq.llm.llamacpp, "unavailable", lambda: None)
    llm = FineTunedPlanner(default_adapter("webqsp")).llm  # nothing loads until it plans
    assert isinstance(llm, LlamaCppLLM) and llm._draft_source[0] == "training plans of planner"


def test_a_bad_training_plans_file_is_an_error_naming_its_line(tmp_path, monkeypatch):
    from memq.errors import MemQError
    from memq.plan.data import default_data_path
    from memq.plan.planner import training_plans

    monkeypatch.setenv("MEMQ_CACHE", str(tmp_path))
    path = default_data_path("webqsp", "train")
    path.parent.mkdir(parents=True)
    path.write_text('{"plan": "Find the x of y, assign it to ?x."}\n{"question": "no plan"}\n')
    manifest = {"data": {"datasets": ["webqsp"]}}
    assert training_plans(manifest, 1) == ["Find the x of y, assign it to ?x."]
    with pytest.raises(MemQError, match=r"webqsp-train-v\d+\.jsonl:2: not a planner data record"):
        training_plans(manifest)


def test_a_saved_drafter_is_keyed_by_its_texts_tokenizer_and_settings(tmp_path):
    drafter = NgramDrafter([[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 3, 4]], eos=EOS, order=3, min_context=1, min_share=0.6)
    drafter.save(tmp_path / "d.json")
    back = NgramDrafter.load(tmp_path / "d.json")
    assert back.table == drafter.table and (back.order, back.min_context, back.min_share) == (3, 1, 0.6)
    assert back.draft([7, 1], k=4) == drafter.draft([7, 1], k=4) == [2, 3, 4, EOS]
    key = NgramDrafter.key(["a b"], "tok-1", EOS)
    assert len({key, NgramDrafter.key(["a c"], "tok-1", EOS), NgramDrafter.key(["a b"], "tok-2", EOS),
                NgramDrafter.key(["a b"], "tok-1", 1), NgramDrafter.key(["a b"], "tok-1", EOS, order=3)}) == 5
    for bad in ("", "{", '{"format": 99}', '{"format": 1, "order": 3}', "[1, 2]"):
        (tmp_path / "bad.json").write_text(bad)
        assert NgramDrafter.load(tmp_path / "bad.json") is None  # rebuilt by the caller
    assert NgramDrafter.load(tmp_path / "missing.json") is None


@pytest.mark.parametrize("seed", range(4))
def test_a_line_written_with_drafts_has_the_same_tokens_and_log_probabilities(seed):
    """The grounded planner's open lines (LlamaCppLLM.greedy): drafted tokens keep the log-probabilities that
    one-token-a-pass decoding gives them, so the search scores the line as before."""
    prompt = [random.Random(seed).randrange(1, VOCAB) for _ in range(12)]

    def done(new):
        return new[-1] in (EOS, 7)  # 7 stands for a token holding a newline

    plain = FakeRunner().greedy(prompt, 48, done, None, logprobs=True)
    for drafter in (Oracle(plain[0], len(prompt)), Oracle(plain[0], len(prompt), wrong=1), Noise(seed)):
        runner = FakeRunner()
        got = runner.greedy(prompt, 48, done, drafter, logprobs=True)
        assert got[0] == plain[0]
        assert np.allclose(got[1], plain[1], atol=1e-12) and len(got[1]) == len(got[0])
        assert runner.ids == prompt + plain[0][:-1]  # the last token is not evaluated, as without drafts
