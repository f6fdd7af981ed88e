"""The llama.cpp runner's kept branch states (memq.llm.kv_state.Runner): a request that goes back to a branch it cut
starts from that branch's saved KV state, evaluates only the tokens after it, and gets the logits it got before."""

from __future__ import annotations

import ctypes
import threading
import zlib
from collections import OrderedDict
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from memq.llm.base import LLMError
from memq.llm.kv_state import (
    SEQUENCES,
    SNAPSHOTS,
    Runner,
    log_softmax_at,
    log_softmax_row,
    sequences_from_env,
    snapshots_from_env,
)

VOCAB = 16


class FakeLlama:
    """llama.cpp's calls that Runner.logits makes, over one sequence whose KV cache is its list of tokens. A token's
    logits depend on every token before it, so a wrong cache gives wrong logits; a decode must continue the cache."""

    def __init__(self, refuse: bool = False) -> None:
        self.kv: list[int] = []
        self.rows: list[ctypes.Array] = []
        self.refuse = refuse
        self.restores = 0

    def llama_memory_seq_rm(self, memory, seq, p0, p1):
        assert seq == 0 and p1 == -1
        del self.kv[max(p0, 0):]

    def llama_decode(self, ctx, batch):
        assert batch.pos[0] == len(self.kv), "a decode must continue the cached tokens"
        self.rows = []
        for j in range(batch.n_tokens):
            self.kv.append(batch.token[j])
            rng = np.random.default_rng(zlib.crc32(repr(self.kv).encode()))
            self.rows.append((ctypes.c_float * VOCAB)(*rng.normal(size=VOCAB)))
        return 0

    def llama_get_logits_ith(self, ctx, j):
        return ctypes.cast(self.rows[j], ctypes.POINTER(ctypes.c_float))

    def llama_state_seq_get_size(self, ctx, seq):
        return 4 * len(self.kv)

    def llama_state_seq_get_data(self, ctx, buffer, size, seq):
        data = np.asarray(self.kv, dtype=np.int32).tobytes()
        ctypes.memmove(buffer, data, len(data))
        return len(data)

    def llama_state_seq_set_data(self, ctx, buffer, size, seq):
        assert not self.kv, "a state is put back into an empty sequence"
        if self.refuse:
            return 0
        self.restores += 1
        self.kv = np.frombuffer(ctypes.string_at(buffer, size), dtype=np.int32).tolist()
        return size


def _runner(keep: int, lib: FakeLlama) -> Runner:
    runner = Runner.__new__(Runner)  # a Runner over a fake llama.cpp
    runner.lib, runner.llama, runner.memory, runner.state = lib, SimpleNamespace(ctx="ctx"), "memory", None
    runner.n_vocab, runner.n_ctx, runner.n_batch, runner._save_state = VOCAB, 512, 64, False
    runner.batch = SimpleNamespace(n_tokens=0, token=[0] * 64, pos=[0] * 64, n_seq_id=[0] * 64,
                                   seq_id=[[0] for _ in range(64)], logits=[False] * 64)
    runner.decodes = runner.decoded = runner.restored = 0
    runner.governor, runner.passes_by_threads = None, {}
    runner.ids, runner.keep, runner.snapshots = [], keep, OrderedDict()
    return runner


PROMPT = list(range(1, 30))
# a line search's requests: two partial plans (lines 20.. and 40..) and their next tokens, back and forth
REQUESTS = [(PROMPT + [20, 21, 22], 30), (PROMPT + [40, 41, 42, 43], 30), (PROMPT + [20, 21, 22, 23, 24], 33),
            (PROMPT + [40, 41, 42, 43, 44], 34), (PROMPT + [20, 21, 22, 23, 24, 25], 35),
            (PROMPT + [20, 21, 9], 32), (PROMPT + [40, 41, 42, 43, 44, 45], 35)]


def test_a_branch_cut_and_gone_back_to_starts_from_its_kept_state_with_the_same_logits():
    plain, kept = _runner(0, FakeLlama()), _runner(16, FakeLlama())
    for ids, first in REQUESTS:
        assert np.array_equal(plain.logits(ids, first), kept.logits(ids, first))
        assert kept.ids == plain.ids == ids
    assert kept.restored == kept.lib.restores == 4  # the 3rd, 4th, 5th and last requests went back to a branch
    assert plain.decoded == 59 and kept.decoded == 42  # after a branch is put back, only the tokens it lacks
    assert plain.snapshots == {} and len(kept.snapshots) == 6  # one per branch cut


def test_the_least_recently_used_state_goes_first_and_a_refused_one_is_evaluated_in_full(monkeypatch):
    from memq.llm import kv_state

    two = _runner(2, FakeLlama())
    for ids, first in REQUESTS:
        two.logits(ids, first)
    # the 2nd request's branch was given up before the 4th went back to it, and the 4th's before the 7th
    assert len(two.snapshots) == 2 and two.restored == 2 and two.decoded == 51
    monkeypatch.setattr(kv_state, "SNAPSHOT_BYTES", 2 * 4 * 35)  # room for two states (the fake's: 4 bytes a token)
    small = _runner(16, FakeLlama())
    for ids, first in REQUESTS:
        small.logits(ids, first)
    assert len(small.snapshots) == 2 and small.restored == 2 and small.decoded == 51
    refused, plain = _runner(16, FakeLlama(refuse=True)), _runner(0, FakeLlama())
    for ids, first in REQUESTS:
        assert np.array_equal(refused.logits(ids, first), plain.logits(ids, first))
    assert refused.restored == 0 and refused.decoded > plain.decoded  # each refusal evaluated the prompt again


@pytest.mark.parametrize("name, read, bad, edge, default", [
    ("MEMQ_LLAMA_SNAPSHOTS", snapshots_from_env, ["-1", "many", "257"], 0, SNAPSHOTS),
    ("MEMQ_LLAMA_SEQUENCES", sequences_from_env, ["0", "many", "17"], 1, SEQUENCES)])
def test_a_bad_snapshot_or_sequence_count_is_named(monkeypatch, name, read, bad, edge, default):
    for value in bad:
        monkeypatch.setenv(name, value)
        with pytest.raises(LLMError, match=repr(value)):
            read()
    monkeypatch.setenv(name, str(edge))
    assert read() == edge
    monkeypatch.delenv(name)
    assert read() == default
    assert (SNAPSHOTS, SEQUENCES) == (16, 4)


@pytest.mark.slow
def test_llama_cpp_answers_a_branch_gone_back_to_from_its_kept_state(monkeypatch):
    pytest.importorskip("llama_cpp")
    from memq.llm.llamacpp import LlamaCppLLM

    rows = {}
    for keep in ("16", "0"):
        monkeypatch.setenv("MEMQ_LLAMA_SNAPSHOTS", keep)
        llm = LlamaCppLLM("smollm2", n_ctx=1024 + int(keep))  # a context of its own each
        runner = llm.load().runner
        prompt = llm.prompt_ids("Name three colours.")
        red, one = llm.token_ids(" red, green and blue"), llm.token_ids(" one, two and three")
        runner.logits(prompt + red, len(prompt))
        runner.logits(prompt + one, len(prompt))
        decoded = runner.decoded
        rows[keep] = runner.logits(prompt + red + [red[0]], len(prompt + red) + 1)
        assert runner.decoded - decoded == (1 if keep == "16" else len(red) + 1)
        assert runner.restored == (keep == "16")
    # the same logits up to rounding: without the kept state the branch was evaluated again in a smaller batch,
    # which runs other kernels (logits of about 20 differ by a few thousandths)
    assert np.allclose(rows["16"], rows["0"], atol=0.02) and rows["16"].argmax() == rows["0"].argmax()


def _line_model(runner: Runner):
    """A LlamaCppLLM whose loaded model is ``runner`` (nothing loads): its own expand, the calibration's line model."""
    from memq.llm.llamacpp import LlamaCppLLM, Loaded

    runner.lock = threading.Lock()
    lm = LlamaCppLLM("smollm2")
    lm._loaded = Loaded(runner, None, Path("fake.gguf"), None)
    return lm


def test_the_calibration_evaluates_a_head_s_shared_start_once_and_sums_the_same():
    from memq.plan.calibrate import null_logprobs
    from memq.plan.linesearch import SearchCost

    prompt = [2, 3, 4, 5]
    # four statement heads as the first step offers them: two share "Find the place of", one repeats
    heads = [(7, 8, 9, 10, 11), (7, 8, 12, 13), (7, 8, 9, 10, 14, 15), (7, 8, 12, 13)]
    alone = _runner(0, FakeLlama())
    lm = _line_model(alone)
    expected = {}
    for head in heads:  # each head in a pass of its own after the prompt, as before
        alone.logits(list(range(1, 9)), 8)  # another request in between: nothing is shared by chance
        expected[head] = float(np.sum(lm.expand(prompt + list(head), len(prompt), ())[0]))
    shared = _runner(0, FakeLlama())
    cost = SearchCost()
    assert null_logprobs(heads, prompt, _line_model(shared), cost) == expected  # bit for bit
    # in sorted order (9 10 11 | 9 10 14 15 | 12 13) a head evaluates what it does not share with the one before
    # it, and the shared part's last token again for the row after it: 5, then 10 14 15, then 8 12 13; a pass of
    # its own would evaluate the prompt's last token and the whole head (6 + 7 + 5)
    assert shared.decoded == len(prompt) + 5 + 3 + 3 and cost.passes == 3 and cost.tokens == 5 + 2 + 2


def test_one_row_normalised_once_gives_the_log_probabilities_of_the_row_repeated_bit_for_bit():
    """The children of a node of the grounded planner's prefix tree are scored from one row of logits; normalising
    it once must give exactly what normalising one copy per child gave, so that no plan moves."""
    rng = np.random.default_rng(7)
    for size in (16, 151_936):  # a toy vocabulary and Qwen2.5's
        row = (rng.standard_normal(size) * 6).astype(np.float32)
        ids = [int(t) for t in rng.integers(0, size, 37)] + [int(np.argmax(row))]
        once = log_softmax_row(row, ids)
        assert once.dtype == np.float64 and once.shape == (len(ids),)
        assert np.array_equal(once, log_softmax_at(row[None, :].repeat(len(ids), axis=0), ids))
    assert log_softmax_row(row, []).shape == (0,)
