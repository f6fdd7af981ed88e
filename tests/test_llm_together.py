"""Line searches answered together (memq.llm.together, Runner.logits_many): several sequences in one forward pass,
each request getting the logits it gets alone, and the searches finding the lines they find one after another.
A fake llama.cpp context with several sequences stands in for the model."""

from __future__ import annotations

import ctypes
import random
import threading
import zlib
from collections import OrderedDict
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from memq.llm.base import LLMError
from memq.llm.kv_state import Runner
from memq.plan.linesearch import best_lines, best_lines_together, line_search

VOCAB = 16
NEWLINE = 7  # the fake tokenizer's token that holds a newline


class FakeLlama:
    """llama.cpp's calls that a Runner makes, over several sequences whose KV cells are lists of tokens. A token's
    logits depend on every token before it in its sequence, so a wrong cell gives wrong logits; a decode must continue
    each sequence's cells."""

    def __init__(self) -> None:
        self.kv: dict[int, list[int]] = {}
        self.rows: list[ctypes.Array] = []
        self.passes: list[int] = []  # the tokens of each decode
        self.copies = 0

    def llama_memory_seq_rm(self, memory, seq, p0, p1):
        assert p1 == -1
        del self.kv.setdefault(seq, [])[max(p0, 0):]

    def llama_memory_seq_cp(self, memory, src, dst, p0, p1):
        assert p0 == 0 and not self.kv.get(dst), "a sequence is copied into an empty one"
        self.kv[dst] = list(self.kv[src][:p1])
        self.copies += 1

    def llama_decode(self, ctx, batch):
        self.rows = []
        for j in range(batch.n_tokens):
            kv = self.kv.setdefault(batch.seq_id[j][0], [])
            assert batch.pos[j] == len(kv), "a decode must continue the sequence's cells"
            kv.append(batch.token[j])
            rng = np.random.default_rng(zlib.crc32(repr(kv).encode()))
            self.rows.append((ctypes.c_float * VOCAB)(*rng.normal(size=VOCAB)))
        self.passes.append(batch.n_tokens)
        return 0

    def llama_get_logits_ith(self, ctx, j):
        return ctypes.cast(self.rows[j], ctypes.POINTER(ctypes.c_float))

    def llama_state_seq_get_size(self, ctx, seq):
        return 4 * len(self.kv.get(seq, []))

    def llama_state_seq_get_data(self, ctx, buffer, size, seq):
        data = np.asarray(self.kv.get(seq, []), dtype=np.int32).tobytes()
        ctypes.memmove(buffer, data, len(data))
        return len(data)

    def llama_state_seq_set_data(self, ctx, buffer, size, seq):
        assert not self.kv.get(seq), "a state is put back into an empty sequence"
        self.kv[seq] = np.frombuffer(ctypes.string_at(buffer, size), dtype=np.int32).tolist()
        return size


def _runner(keep: int = 16, sequences: int = 4, n_batch: int = 64) -> Runner:
    runner = Runner.__new__(Runner)  # a Runner over a fake llama.cpp
    runner.lib, runner.llama, runner.memory, runner.state = FakeLlama(), SimpleNamespace(ctx="ctx"), "memory", None
    runner.n_vocab, runner.n_ctx, runner.n_batch, runner._save_state = VOCAB, 512, n_batch, False
    runner.batch = SimpleNamespace(n_tokens=0, token=[0] * n_batch, pos=[0] * n_batch, n_seq_id=[0] * n_batch,
                                   seq_id=[[0] for _ in range(n_batch)], logits=[False] * n_batch)
    runner.decodes = runner.decoded = runner.restored = 0
    runner.governor, runner.passes_by_threads, runner.eos = None, {}, 0
    runner.seqs, runner.keep, runner.snapshots, runner.sequences = {0: []}, keep, OrderedDict(), sequences
    runner.lock = threading.Lock()
    return runner


PROMPT = list(range(1, 30))


def test_requests_answered_together_get_the_logits_each_gets_alone_in_one_pass():
    alone, together = _runner(), _runner()
    rounds = [  # the planner's first step (the prompt), then three partial plans' requests round by round:
        {0: (PROMPT + [20], 30)},  # branches, going back, swapping places
        {0: (PROMPT + [20, 21], 30), 1: (PROMPT + [40, 41, 42], 30), 2: (PROMPT + [9], 30)},
        {0: (PROMPT + [20, 21, 22, 23], 32), 1: (PROMPT + [40, 41, 42, 43], 33), 2: (PROMPT + [9, 8, 7], 31)},
        {0: (PROMPT + [40, 41, 42, 43, 44], 34), 1: (PROMPT + [20, 21, 22, 23, 24], 33), 2: (PROMPT + [9, 5], 31)},
        {0: (PROMPT + [20, 21, 22, 23, 24, 25], 35), 1: (PROMPT + [40, 41, 42, 43, 44, 45], 35)},
    ]
    for requests in rounds:
        passes = len(together.lib.passes)
        got = together.logits_many({s: (ids, first, True) for s, (ids, first) in requests.items()})
        assert len(together.lib.passes) == passes + 1  # one forward pass for all of them
        for s, (ids, first) in requests.items():
            assert np.array_equal(got[s], alone.logits(ids, first))
            assert together.seqs[s] == ids == together.lib.kv[s]  # each sequence holds its request
    # a pass a round, not a request; the prompt was evaluated once, and swapped branches were taken from the
    # sequence that held them, so no more tokens were evaluated than one request at a time with kept states
    assert together.decodes == len(rounds) < alone.decodes == sum(map(len, rounds))
    assert together.decoded <= alone.decoded and together.lib.copies >= 3


def test_a_round_past_the_batch_is_split_and_bad_requests_are_named():
    small = _runner(n_batch=8)
    got = small.logits_many({0: (PROMPT, 1, True), 1: (PROMPT[:5], 2, True)})
    assert small.lib.passes[0] == 8 and sum(small.lib.passes) == len(PROMPT) + 5  # no copy: nothing shared yet
    assert np.array_equal(got[0], _runner().logits(PROMPT, 1)) and len(got[1]) == 4
    with pytest.raises(LLMError, match=r"sequences 0\.\.3, got \[4\]"):
        small.logits_many({4: (PROMPT, 1, True)})
    with pytest.raises(LLMError, match="a request of 29 tokens from 30"):
        small.logits_many({0: (PROMPT, 30, True)})


def test_past_the_context_the_sequences_no_request_uses_are_let_go():
    runner = _runner()
    runner.n_ctx = 120
    runner.logits_many({0: (PROMPT, 1, True), 3: (PROMPT[:20], 1, True)})
    assert runner.seqs[3] == runner.lib.kv[3] == PROMPT[:20]
    runner.logits_many({0: (PROMPT + [9] * 10, 30, True), 1: (PROMPT + [8] * 10, 30, True)})  # 49 held + 78 asked
    assert runner.seqs[3] == runner.lib.kv[3] == [] and runner.seqs[1] == runner.lib.kv[1] == PROMPT + [8] * 10


class FakeLM:
    """A LlamaCppLLM over a fake runner: expand through the runner's logits, greedy with its tokenizer."""

    def __init__(self, runner: Runner) -> None:
        from memq.llm.llamacpp import LlamaCppLLM, Loaded

        tok = SimpleNamespace(decode=lambda ids, **_: "\n" if ids and ids[-1] == NEWLINE else "x")
        self.lm = LlamaCppLLM("smollm2")
        self.lm._loaded = Loaded(runner, tok, Path("fake.gguf"), None)


def _searches(seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for _ in range(3):
        cands = [[rng.randrange(8, VOCAB) for _ in range(rng.randrange(1, 5))] for _ in range(6)]
        out.append(dict(prefix=PROMPT + [rng.randrange(8, VOCAB) for _ in range(rng.randrange(1, 4))],
                        candidates=cands, open_ends=[i == 5 for i in range(6)],
                        bonus=[-rng.random() for _ in range(6)]))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_searches_run_together_find_the_lines_they_find_one_after_another(seed):
    alone = FakeLM(_runner()).lm
    expected = [best_lines(alone, s["prefix"], s["candidates"], 2, open_ends=s["open_ends"], bonus=s["bonus"],
                           prune=50.0, max_new_tokens=6) for s in _searches(seed)]
    runner = _runner(sequences=2)  # three searches, two sequences: the third waits for one to end
    together = FakeLM(runner).lm
    got = best_lines_together(together, [line_search(s["prefix"], s["candidates"], 2, open_ends=s["open_ends"],
                                                     bonus=s["bonus"], prune=50.0, max_new_tokens=6)
                                         for s in _searches(seed)])
    assert got == expected
    assert runner.decodes < alone.load().runner.decodes  # fewer forward passes for the same lines
    assert together.calls == alone.calls


def test_a_model_that_answers_one_request_at_a_time_runs_the_searches_in_turn():
    class OneAtATime:
        def __init__(self):
            self.calls = []

        def expand(self, ids, first, children):
            self.calls.append(len(ids))
            return np.full(len(ids) - first, -0.1), np.full(len(children), -np.log(max(len(children), 1)))

        def greedy(self, ids, max_new_tokens):
            raise AssertionError("no open line")

    model = OneAtATime()
    searches = [line_search([1, 2], [[3, 4], [5]], 1), line_search([1, 2, 6], [[3], [5, 4]], 1)]
    got = best_lines_together(model, searches)
    assert [[s.ids for s in found] for found in got] == [[(5,)], [(3,)]]
    assert model.calls == [2, 4, 3, 5]  # the first search's passes, then the second's


@pytest.mark.slow
def test_llama_cpp_answers_requests_together_as_it_answers_them_alone():
    pytest.importorskip("llama_cpp")
    from memq.llm.llamacpp import LlamaCppLLM

    llm = LlamaCppLLM("smollm2", n_ctx=1536)  # a context of its own
    runner = llm.load().runner
    assert runner.sequences == 4
    prompt = llm.prompt_ids("Name three colours.")
    red, one = llm.token_ids(" red, green and blue"), llm.token_ids(" one, two and three")
    runner.logits(prompt + red[:1], len(prompt))  # the planner's first step: the prompt in sequence 0
    together = runner.logits_many({0: (prompt + red, len(prompt) + 1, True), 1: (prompt + one, len(prompt), True)})
    assert runner.seqs[1] == prompt + one
    alone = {0: runner.logits(prompt + red, len(prompt) + 1), 1: runner.logits(prompt + one, len(prompt))}
    for s in (0, 1):  # the same logits up to the rounding of a product over more rows
        assert together[s].shape == alone[s].shape
        assert np.allclose(together[s], alone[s], atol=0.05)
        assert (together[s].argmax(axis=1) == alone[s].argmax(axis=1)).all()
