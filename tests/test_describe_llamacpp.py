"""The LLM describer on llama.cpp: several prompts decoded together (memq.llm.parallel), the backend and its
fallback recorded, answer validity counted in a bank's manifest and kept across a resumed build; and, when
llama-cpp-python is installed (slow), the batched text equal to the one-at-a-time text for SmolLM2."""

from __future__ import annotations

import argparse
import json

import pytest

from memq.describe import LLMDescriber, TemplateDescriber
from memq.describe.llm import FALLBACK
from memq.llm import LLMError, LocalLLM
from memq.llm.parallel import common_prefix, decoder_for
from memq.memory import BuildConfig, HashingEmbedder, build_memory
from memq.memory.build import CACHE, read_cache, validity
from memq.types import Statement

S1 = Statement("s1", "1", "?entity1 ns:location.country.currency_used ?entity2 .", ("location.country.currency_used",))
S2 = Statement("s2", "1", "?entity1 ns:people.person.spouse_s ?entity2 .", ("people.person.spouse_s",))
S3 = Statement("s3", "1", "?entity1 ns:film.film.directed_by ?entity2 .", ("film.film.directed_by",))
SF = Statement("sf", "filter", "FILTER(?entity1 = ?value)", ())


class Scripted:
    """Replies per relation marker, in order; a llama.cpp-like generator (backend, threads, parallel)."""

    name = "scripted"
    backend = "llamacpp"
    threads = 1
    parallel = 4

    def __init__(self, replies: dict[str, list[str]]) -> None:
        self.replies = replies

    def generate(self, prompts, max_new_tokens=64, stop=None, chat=True):
        out = []
        for p in prompts:
            tail = p.rsplit("### YOUR TURN", 1)[1]
            out.append(self.replies[next(k for k in self.replies if k in tail)].pop(0))
        return out


def _no_llama(monkeypatch):
    import memq.llm.llamacpp

    monkeypatch.setattr(memq.llm.llamacpp, "unavailable", lambda: "llama-cpp-python is not importable (test)")


def test_common_prefix():
    assert common_prefix([[1, 2, 3], [1, 2, 4], [1, 2]]) == 2
    assert common_prefix([[1, 2, 3]]) == 3
    assert common_prefix([[1], [2]]) == 0
    assert common_prefix([]) == 0


def test_parallel_is_validated_and_passed_through(monkeypatch):
    import memq.llm.llamacpp
    from memq.llm.llamacpp import LlamaCppLLM, make_llm

    with pytest.raises(LLMError, match="parallel must be in 1..64, got 0"):
        LlamaCppLLM("smollm2", parallel=0)
    monkeypatch.setattr(memq.llm.llamacpp, "unavailable", lambda: None)
    llm, note = make_llm("llamacpp", "smollm2", threads=1, parallel=8)
    assert isinstance(llm, LlamaCppLLM) and note is None and (llm.threads, llm.parallel) == (1, 8)


def test_attempts_and_runtime_are_recorded():
    gen = Scripted({"currency_used": ["?entity2 is the currency of ?entity1"],
                    "spouse_s": ["no idea", "?entity2 is the spouse of the person ?entity1"],
                    "directed_by": ["The director.", "Sorry."]})
    d = LLMDescriber(gen, backend_fallback=None)
    got = d.describe_with_info([S1, S2, S3, SF])
    assert [g.attempts for g in got] == [1, 2, 2, 0]
    assert got[2].fallback == FALLBACK and got[3].fallback is None
    assert validity(got) == {"valid_first": 1, "valid_retry": 1, "fallback": 1}
    assert validity(TemplateDescriber().describe_with_info([S1, SF])) is None  # no LLM asked
    assert d.runtime == {"backend": "llamacpp", "threads": 1, "parallel": 4, "retry": "hint", "fallback": None}


class Constrained(Scripted):
    """A Scripted generator that takes ``require`` (constrained decoding) and records what it was given."""

    def __init__(self, replies: dict[str, list[str]]) -> None:
        super().__init__(replies)
        self.required: list = []

    def generate(self, prompts, max_new_tokens=64, stop=None, chat=True, require=None):
        self.required.append(require)
        return super().generate(prompts, max_new_tokens, stop, chat)


def test_a_constraining_generator_gets_the_required_variables_on_the_retry_only():
    s4 = Statement("s4", "3", "?entity1 ns:film.actor.film ?cvt .\n?cvt ns:film.performance.character ?entity2 .\n"
                              "?cvt ns:film.performance.film ?entity3 .", ("film.actor.film",))
    gen = Constrained({"currency_used": ["?entity2 is the currency", "?entity2 is the currency of ?entity1"],
                       "performance.film": ["?entity3 is a film", "?entity3 is the film of ?entity1 as ?entity2"]})
    d = LLMDescriber(gen)
    got = d.describe_with_info([S1, s4])
    assert gen.required == [None, [("?entity1",), ("?entity1", "?entity2")]]
    assert [g.attempts for g in got] == [2, 2] and all(g.fallback is None for g in got)
    assert d.retry_mode == "constrained" and d.runtime["retry"] == "constrained"
    hinted = LLMDescriber(Scripted({}), model_name=d.model_name)
    assert hinted.retry_mode == "hint" and hinted.prompt_hash != d.prompt_hash  # a cache of one is not the other's


def test_ending_tokens_marks_line_and_sentence_ends():
    from memq.llm.parallel import ending_tokens

    class Tok:
        texts = ["the", ".", " end.\n", "?", "entity", "#", "!", ";", " of"]

        def decode(self, ids, skip_special_tokens=False):
            return "".join(self.texts[i] for i in ids)

    assert ending_tokens(Tok(), 9).tolist() == [False, True, True, False, False, True, True, True, False]


def test_the_manifest_counts_validity_and_a_resumed_build_keeps_it(tmp_path):
    replies = {"currency_used": ["?entity2 is the currency of ?entity1"],
               "spouse_s": ["no idea", "?entity2 is the spouse of the person ?entity1"],
               "directed_by": ["The director.", "Sorry."]}
    d = LLMDescriber(Scripted({k: list(v) for k, v in replies.items()}), backend_fallback="backend llamacpp -> x")
    bank = build_memory([S1, S2, S3, SF], d, HashingEmbedder(), tmp_path, config=BuildConfig(progress=False))
    described = bank.manifest["describer"]
    assert described["validity"] == {"valid_first": 1, "valid_retry": 1, "fallback": 1}
    assert described["runtime"]["fallback"] == "backend llamacpp -> x" and described["runtime"]["threads"] == 1
    lines = [json.loads(x) for x in (tmp_path / CACHE).read_text().splitlines()]
    assert [x["attempts"] for x in lines] == [1, 2, 2, 0]
    assert read_cache(tmp_path / CACHE, d.prompt_hash)["s2"].attempts == 2
    again = LLMDescriber(Scripted({}), backend_fallback=None)  # answers nothing: everything comes from the cache
    bank = build_memory([S1, S2, S3, SF], again, HashingEmbedder(), tmp_path, config=BuildConfig(progress=False))
    assert bank.manifest["describer"]["validity"] == {"valid_first": 1, "valid_retry": 1, "fallback": 1}


def _build_args(**kw):
    base = dict(describer="local", max_new_tokens=40, local_model="smollm2", backend="llamacpp", llm_threads=1,
                device="cpu", batch_size=8)
    return argparse.Namespace(**{**base, **kw})


def test_cli_local_describer_runs_on_llamacpp_or_records_why_not(monkeypatch, capsys):
    import memq.llm.llamacpp
    from memq.llm.llamacpp import LlamaCppLLM
    from memq.memory.cli import _describer

    monkeypatch.setattr(memq.llm.llamacpp, "unavailable", lambda: None)
    d = _describer(_build_args())
    assert isinstance(d.generator, LlamaCppLLM) and d.runtime["parallel"] == 8 and d.runtime["threads"] == 1
    assert d.backend_fallback is None  # nothing is loaded yet
    _no_llama(monkeypatch)
    d = _describer(_build_args())
    assert isinstance(d.generator, LocalLLM)
    assert d.runtime["backend"] == "transformers"
    assert d.runtime["fallback"] == "backend llamacpp -> transformers: llama-cpp-python is not importable (test)"
    assert "note: backend llamacpp -> transformers" in capsys.readouterr().err
    d = _describer(_build_args(backend="transformers"))
    assert isinstance(d.generator, LocalLLM) and d.backend_fallback is None
    with pytest.raises(Exception, match="--llm-threads must be >= 1, got 0"):
        _describer(_build_args(llm_threads=0))


@pytest.mark.slow
def test_batched_decoding_gives_the_one_at_a_time_text(tmp_path):
    pytest.importorskip("llama_cpp")
    from memq.llm.llamacpp import LlamaCppLLM

    prompts = ["Repeat exactly: the quick brown fox jumps over the lazy dog", "Count from 1 to 10.",
               "What is 2+2?", "Repeat exactly: hello world", "Name a colour."]
    one = LlamaCppLLM("smollm2", threads=1)
    many = LlamaCppLLM("smollm2", threads=1, parallel=3)  # two batches: 3 prompts, then 2
    expected = one.generate(prompts, max_new_tokens=16)
    assert many.generate(prompts, max_new_tokens=16) == expected
    assert many.calls == 5 and many.tokens == one.tokens
    assert many.generate(prompts[:2], max_new_tokens=16, stop=[" fox"]) == [expected[0].split(" fox")[0],
                                                                           expected[1]]
    decoder = decoder_for(many)
    before = decoder.decoded
    many.generate(prompts[1:3], max_new_tokens=1)  # the chat header is held in sequence 0: not evaluated again
    shared = common_prefix([many.prompt_ids(p) for p in prompts[1:3]])
    assert shared > 5 and decoder.decoded - before == sum(len(many.prompt_ids(p)) - shared for p in prompts[1:3])
    small = LlamaCppLLM("smollm2", threads=1, parallel=4, n_ctx=128)  # 4 prompts do not fit: split in halves
    assert small.generate(prompts[:4], max_new_tokens=8) == [t for t in one.generate(prompts[:4], max_new_tokens=8)]
    with pytest.raises(LLMError, match="exceeds the llama.cpp context"):
        small.generate(["a long prompt " * 60, "x"], max_new_tokens=8)
    # constrained: an answer that must hold a string it never writes runs to max_new_tokens, ending nowhere
    before = one.tokens
    held = one.generate(["Name a colour."], max_new_tokens=12, require=[("zqxv",)])
    assert one.tokens - before == 12 and not any(e in held[0] for e in ("\n", ".", "!", ";"))
    assert "4" in one.generate(["What is 2+2?"], max_new_tokens=12, require=[("4",)])[0]
    with pytest.raises(LLMError, match="require has 1 entries for 2 prompts"):
        many.generate(prompts[:2], max_new_tokens=4, require=[("x",)])


@pytest.mark.slow
def test_the_describer_on_llamacpp_describes_real_statements():
    pytest.importorskip("llama_cpp")
    from memq.llm.llamacpp import LlamaCppLLM

    d = LLMDescriber(LlamaCppLLM("smollm2", threads=1, parallel=4))
    got = d.describe_with_info([S1, S2, S3, SF])
    assert all(g.descriptions for g in got) and got[3].describer == "template"
    assert sum(validity(got).values()) == 3 == d.stats["valid_first"] + d.stats["valid_retry"] + d.stats["fallback"]
