"""The llama.cpp backend: choosing it, falling back to transformers (recorded, never silent), validation; and, when
llama-cpp-python is installed (slow), the same greedy text and log-likelihoods as transformers for SmolLM2 with a
LoRA adapter converted by memq.llm.lora_gguf."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tiny_gguf import write_adapter, write_base

from memq.llm import LLMError, LocalLLM
from memq.pipeline import Config, Pipeline
from memq.plan.planner import FineTunedPlanner, ScriptedPlanner, make_planner

FB = "http://rdf.freebase.com/ns/"
JAMAICA = f"""
<{FB}m.03_r3> <{FB}type.object.name> "Jamaica"@en .
<{FB}m.03_r3> <{FB}location.country.languages_spoken> <{FB}m.01428y> .
<{FB}m.03_r3> <{FB}location.country.languages_spoken> <{FB}m.04ygk0> .
<{FB}m.01428y> <{FB}type.object.name> "Jamaican English"@en .
<{FB}m.04ygk0> <{FB}type.object.name> "Jamaican Creole English Language"@en .
"""


def _no_llama(monkeypatch):
    import memq.llm.llamacpp

    monkeypatch.setattr(memq.llm.llamacpp, "unavailable", lambda: "llama-cpp-python is not importable (test)")


def test_make_llm_falls_back_to_transformers_and_says_why(monkeypatch):
    from memq.llm.llamacpp import LlamaCppLLM, make_llm

    _no_llama(monkeypatch)
    llm, note = make_llm("llamacpp", "smollm2")
    assert isinstance(llm, LocalLLM) and note == (
        "backend llamacpp -> transformers: llama-cpp-python is not importable (test)")
    llm, note = make_llm("transformers", "smollm2")
    assert isinstance(llm, LocalLLM) and note is None
    monkeypatch.undo()
    import memq.llm.llamacpp

    monkeypatch.setattr(memq.llm.llamacpp, "unavailable", lambda: None)
    llm, note = make_llm("llamacpp", "smollm2", adapter="some/adapter")
    assert isinstance(llm, LlamaCppLLM) and note is None and llm.name == "smollm2+adapter"  # nothing loads yet
    llm, note = make_llm("llamacpp", "smollm2", device="cuda")
    assert isinstance(llm, LocalLLM) and "device 'cuda'" in note
    llm, note = make_llm("llamacpp", "/some/transformers/dir")
    assert isinstance(llm, LocalLLM) and "is not a GGUF file" in note
    with pytest.raises(LLMError, match="unknown backend 'vllm'"):
        make_llm("vllm", "smollm2")


def test_validation_names_the_bad_value(monkeypatch):
    from memq.llm.llamacpp import LlamaCppLLM

    with pytest.raises(LLMError, match="threads must be >= 1, got 0"):
        LlamaCppLLM("smollm2", threads=0)
    with pytest.raises(LLMError, match="n_ctx"):
        LlamaCppLLM("smollm2", n_ctx=8)
    with pytest.raises(LLMError, match="batch_size"):
        LlamaCppLLM("smollm2", batch_size=0)
    with pytest.raises(LLMError, match="max_new_tokens"):
        LlamaCppLLM("smollm2").generate(["x"], max_new_tokens=0)
    assert LlamaCppLLM("smollm2").generate([]) == []
    with pytest.raises(ValueError, match="unknown backend 'gpu'"):
        Config(backend="gpu")
    with pytest.raises(Exception, match="unknown backend 'gpu'"):
        make_planner("fewshot", backend="gpu")
    _no_llama(monkeypatch)
    with pytest.raises(LLMError, match="not importable"):
        LlamaCppLLM("smollm2").load()


@pytest.fixture()
def tiny_planner(tmp_path, monkeypatch):
    """A LoRA planner directory whose base is a tiny GGUF file (nothing is loaded by these tests)."""
    monkeypatch.setenv("MEMQ_CACHE", str(tmp_path / "cache"))
    base = write_base(tmp_path / "tiny.gguf")
    adapter, _ = write_adapter(tmp_path / "planner")
    from memq.llm import gguf_source

    sha = gguf_source(str(base))[2]
    (adapter / "manifest.json").write_text(json.dumps({"kind": "lora-planner", "base_model": {
        "name": "tiny", "ref": str(base), "sha256": sha}}))
    return adapter


def test_the_planner_records_its_backend_and_fallback(tiny_planner, monkeypatch):
    from memq.llm.llamacpp import LlamaCppLLM

    _no_llama(monkeypatch)
    planner = FineTunedPlanner(tiny_planner)
    assert planner.backend == "llamacpp" and planner.fallbacks == []
    assert planner.backend_used == "transformers"  # chooses its model (nothing loads)
    assert planner.fallbacks == ["backend llamacpp -> transformers: llama-cpp-python is not importable (test)"]
    monkeypatch.undo()
    import memq.llm.llamacpp

    monkeypatch.setattr(memq.llm.llamacpp, "unavailable", lambda: None)
    planner = FineTunedPlanner(tiny_planner)
    assert isinstance(planner.llm, LlamaCppLLM) and planner.backend_used == "llamacpp" and planner.fallbacks == []
    assert FineTunedPlanner(tiny_planner, backend="transformers").backend_used == "transformers"
    with pytest.raises(Exception, match="unknown backend"):
        FineTunedPlanner(tiny_planner, backend="onnx")


def test_the_trace_names_the_backend_and_its_fallback(tmp_path):
    from memq import datasets
    from memq.decompose import decompose_dataset
    from memq.describe.template import TemplateDescriber
    from memq.kg.oxigraph import OxigraphStore
    from memq.memory.bank import MemoryBank
    from memq.memory.embed import HashingEmbedder
    from memq.types import MemoryRecord

    class Planner(ScriptedPlanner):
        backend_used = "transformers"
        fallbacks = ["backend llamacpp -> transformers: llama-cpp-python is not importable (test)"]

    (tmp_path / "kg.nt").write_text(JAMAICA, encoding="utf-8")
    statements = decompose_dataset([q for q in datasets.load("webqsp", "test") if q.id == "WebQTest-0"])
    descriptions = TemplateDescriber().describe(statements)
    bank = MemoryBank.build([MemoryRecord(s, tuple(d), "template") for s, d in zip(statements, descriptions,
                                                                                     strict=True)], HashingEmbedder())
    question = "what does jamaican people speak?"
    planner = Planner({question: "Find the languages spoken of the country Jamaica, assign it to ?x.\n"
                                 "Finally the answer is ?x."})
    pipe = Pipeline(Config(), bank=bank, kg=OxigraphStore.from_file(tmp_path / "kg.nt"), planner=planner)
    a = pipe.answer(question, {"m.03_r3": "Jamaica"})
    assert a.trace.backend == "transformers"
    assert a.trace.fallbacks[0] == "backend llamacpp -> transformers: llama-cpp-python is not importable (test)"
    assert {i for i, _ in a.answers} == {"m.01428y", "m.04ygk0"}
    given = pipe.answer(question, {"m.03_r3": "Jamaica"}, plan=a.plan)  # no model call: no backend
    assert given.trace.backend is None and not any("backend" in f for f in given.trace.fallbacks)


def test_ask_and_evaluate_take_a_backend():
    from memq.ask import config_from
    from memq.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(["ask", "q", "--entity", "m.0x=X", "--backend", "transformers"])
    assert config_from(args).backend == "transformers"
    assert config_from(parser.parse_args(["ask", "q"])).backend == "llamacpp"
    args = parser.parse_args(["evaluate", "--dataset", "webqsp", "--split", "dev", "--planner", "finetuned",
                              "--backend", "transformers"])
    assert config_from(args).backend == "transformers"
    with pytest.raises(SystemExit):
        parser.parse_args(["ask", "q", "--backend", "onnx"])


def test_evaluate_answers_a_dataset_from_its_own_memory_unless_told_otherwise():
    from pathlib import Path

    from memq.cli import build_parser
    from memq.evaluate.cli import evaluation_config

    parser = build_parser()
    cwq = parser.parse_args(["evaluate", "--dataset", "cwq", "--split", "test", "--planner", "hybrid"])
    assert Path(evaluation_config(cwq).memory).parts[-2:] == ("memory_bank", "cwq")
    webqsp = parser.parse_args(["evaluate", "--dataset", "webqsp", "--split", "dev", "--planner", "oracle"])
    assert Path(evaluation_config(webqsp).memory).parts[-2:] == ("memory_bank", "webqsp")
    told = parser.parse_args(["evaluate", "--dataset", "cwq", "--split", "test", "--planner", "finetuned",
                              "--memory", "elsewhere"])
    assert evaluation_config(told).memory == "elsewhere"


def test_grailqa_is_evaluated_on_its_own_kg_with_its_own_search_unless_told_otherwise():
    from pathlib import Path

    from memq.cli import build_parser
    from memq.evaluate.cli import evaluation_config

    parser = build_parser()
    plain = evaluation_config(parser.parse_args(["evaluate", "--dataset", "grailqa", "--split", "dev",
                                                 "--planner", "grounded"]))
    assert Path(plain.kg_file).name == "grailqa.nq.gz"
    assert Path(plain.memory).name in ("grailqa", "grailqa+schema")  # the schema bank is built on demand
    search = plain.search
    assert (search.beam, search.lines, search.coverage, search.asked_class, search.asked_beam) == (1, 1, 25.0, 25.0, 3)
    assert search.asked_directed is False  # tried on the tuning part: no plan changed
    assert search.asked_redirect is True  # ... but a plan that ends without the class asked for is searched so
    assert search.unseen_top == -1  # zero-shot questions need the ontology's unseen statements beside the others
    told = evaluation_config(parser.parse_args(["evaluate", "--dataset", "grailqa", "--split", "dev", "--planner",
                                                "grounded", "--kg", "mine.nt", "--memory", "bank", "--beam", "3",
                                                "--coverage", "10", "--asked-class", "0", "--asked-beam", "0",
                                                "--asked-directed", "--no-asked-redirect"]))
    assert (told.kg, told.memory, told.search.beam, told.search.lines) == ("mine.nt", "bank", 3, 1)
    assert told.search.coverage == 10.0 and told.search.asked_class == 0.0 and told.search.asked_beam == 0
    assert told.search.asked_directed is True and told.search.asked_redirect is False
    webqsp = evaluation_config(parser.parse_args(["evaluate", "--dataset", "webqsp", "--split", "dev",
                                                  "--planner", "grounded"]))
    assert Path(webqsp.kg_file).name == "benchmark.nq.gz" and webqsp.search.beam == 3 and webqsp.search.coverage == 10.0
    assert webqsp.search.asked_class == 0.0 and webqsp.search.asked_beam == 0 and webqsp.search.unseen_top == 0


def test_each_dataset_searches_with_its_own_settings_and_a_flag_given_replaces_one():
    """WebQSP's search stops 4 nats below the best line (chosen on its dev); CWQ's rescues keep the default 5; a
    flag replaces only the setting it names, the dataset's others stand."""
    from memq.cli import build_parser
    from memq.evaluate.cli import evaluation_config
    from memq.pipeline.config import search_for
    from memq.plan.search import GroundedConfig

    parser = build_parser()

    def search(*argv):
        return evaluation_config(parser.parse_args(["evaluate", "--split", "dev", "--planner", "grounded", *argv]))

    assert search("--dataset", "webqsp").search.prune == 4.0 == search_for("webqsp").prune
    assert search("--dataset", "cwq").search == GroundedConfig() == search_for("cwq") and GroundedConfig().prune == 5.0
    wide = search("--dataset", "webqsp", "--beam", "4").search
    assert (wide.beam, wide.prune) == (4, 4.0)
    assert search("--dataset", "webqsp", "--prune", "6").search.prune == 6.0


def test_a_memory_bank_brings_its_own_planner_to_ask_serve_and_answer(tmp_path):
    import json
    from pathlib import Path

    from memq.ask import config_from
    from memq.cli import build_parser
    from memq.pipeline import Config, Pipeline

    bank = tmp_path / "cwq"
    (bank / "planner").mkdir(parents=True)
    (bank / "planner" / "adapter_config.json").write_text("{}")
    (bank / "planner" / "manifest.json").write_text(json.dumps({"data": {"datasets": ["cwq"]}}))
    parser = build_parser()
    pipe = Pipeline(config_from(parser.parse_args(["ask", "q", "--memory", str(bank)])))
    assert pipe.planner_source == ("cwq", bank / "planner")
    assert pipe._planner_choice() == ("hybrid", bank / "planner")  # CWQ's auto, not WebQSP's
    assert Pipeline(Config(memory=str(bank))).planner_source == ("cwq", bank / "planner")  # memq.answer's config too
    told = Pipeline(config_from(parser.parse_args(["ask", "q", "--memory", str(bank), "--adapter", "mine"])))
    assert told.planner_source == ("cwq", Path("mine"))  # a named adapter wins; the questions are CWQ's
    named = Pipeline(Config(memory=str(bank), planner_dataset="webqsp"))  # memq evaluate names its dataset
    assert named.planner_source[0] == "webqsp" and named.planner_source[1] != bank / "planner"
    plain = tmp_path / "plain"  # a bank without a planner changes nothing
    plain.mkdir()
    dataset, adapter = Pipeline(config_from(parser.parse_args(["ask", "q", "--memory", str(plain)]))).planner_source
    assert dataset == "webqsp" and adapter.parts[-2:] != ("plain", "planner")
    dataset, adapter = Pipeline(config_from(parser.parse_args(["ask", "q"]))).planner_source  # the default bank
    assert dataset == "webqsp" and adapter.parts[-3:] == ("memory_bank", "webqsp", "planner")


def test_loaded_models_are_closed_at_exit_parallel_contexts_first(monkeypatch):
    """llama_cpp's own finalizers fail once the interpreter tears its modules down (a traceback at every exit), so
    memq frees what it loaded in an atexit hook: the describer's parallel contexts, then each model."""
    import threading
    from types import SimpleNamespace

    from memq.llm import llamacpp, parallel

    closed = []
    decoder = SimpleNamespace(close=lambda: closed.append("context"), lock=threading.Lock())
    runner = SimpleNamespace(llama=SimpleNamespace(close=lambda: closed.append("model")), lock=threading.Lock())
    monkeypatch.setattr(parallel, "_DECODERS", {("k",): decoder})
    busy = SimpleNamespace(llama=SimpleNamespace(close=lambda: closed.append("busy")), lock=threading.Lock())
    busy.lock.acquire()  # another thread is decoding with it
    monkeypatch.setattr(llamacpp, "_LOADED", {("k",): runner, ("b",): busy})
    monkeypatch.setattr(llamacpp, "CLOSE_WAIT", 0.01)
    llamacpp.close_models()
    assert closed == ["context", "model"] and not parallel._DECODERS and not llamacpp._LOADED  # not the busy one
    llamacpp.close_models()  # nothing left: nothing done twice
    assert closed == ["context", "model"]


# --------------------------------------------------------------------------- slow: the real runtime, SmolLM2
# SmolLM2-135M is a 4-bit file and llama.cpp also rounds activations to 8 bits, so the two backends' log-probabilities
# differ by a few hundredths of a nat per token, and greedy text can part where the tiny model is unsure. The tests
# compare log-probabilities, and greedy tokens only where transformers' choice wins by a clear margin.

PROMPT = "Name a colour."
CONTINUATION = "The colour is a rare and precious gem, found in a few places on the planet, and it is called blue."
ALL = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _lora(targets: list[str], out) -> str:
    """A LoRA adapter on SmolLM2 with random, clearly non-zero B matrices, saved by peft."""
    import torch
    from peft import LoraConfig, get_peft_model

    from memq.llm import load_pretrained

    model, _, _ = load_pretrained("smollm2", fresh=True)
    peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=targets))
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.3)
    peft_model.save_pretrained(str(out))
    return str(out)


def _transformers_logprobs(llm: LocalLLM, prompt: str, continuation: str):
    """log p of each continuation token after the chat-formatted prompt, from the transformers model."""
    import torch

    model, tok, _ = llm.load()
    p = tok(llm.format(prompt), add_special_tokens=False)["input_ids"]
    c = tok(continuation, add_special_tokens=False)["input_ids"]
    with torch.inference_mode():
        logp = torch.log_softmax(model(torch.tensor([p + c])).logits[0].float(), dim=-1)
    return np.array([float(logp[len(p) - 1 + i, t]) for i, t in enumerate(c)])


def _llamacpp_logprobs(llm, prompt: str, continuation: str):
    loaded = llm.load()
    p = llm._ids(llm.format(prompt), True)
    c = list(loaded.tokenizer(continuation, add_special_tokens=False)["input_ids"])
    rows = loaded.runner.logits(p + c, len(p))[:-1].astype(np.float64)
    rows -= rows.max(axis=1, keepdims=True)
    logz = np.log(np.exp(rows).sum(axis=1))
    return np.array([rows[i, t] - logz[i] for i, t in enumerate(c)])


@pytest.mark.slow
@pytest.mark.parametrize("targets", [["q_proj", "k_proj"], ALL], ids=["q-k-rows", "all-projections"])
def test_the_converted_adapter_changes_llamacpp_as_peft_changes_transformers(targets, tmp_path):
    """The adapter's effect per token under llama.cpp tracks its effect under transformers (a q/k row order
    left unpermuted gives a correlation near 0.3 and a gap several times larger)."""
    pytest.importorskip("llama_cpp")
    import memq.llm.base
    from memq.llm.llamacpp import LlamaCppLLM

    adapter = _lora(targets, tmp_path / "lora")
    memq.llm.base._LOADED.clear()
    base_tf = _transformers_logprobs(LocalLLM("smollm2"), PROMPT, CONTINUATION)
    base_cpp = _llamacpp_logprobs(LlamaCppLLM("smollm2"), PROMPT, CONTINUATION)
    tuned_tf = _transformers_logprobs(LocalLLM("smollm2", adapter=adapter), PROMPT, CONTINUATION)
    tuned_cpp = _llamacpp_logprobs(LlamaCppLLM("smollm2", adapter=adapter), PROMPT, CONTINUATION)
    effect = np.abs(tuned_tf - base_tf).mean()
    gap = np.abs(tuned_cpp - tuned_tf).mean()
    corr = np.corrcoef(tuned_tf - base_tf, tuned_cpp - base_cpp)[0, 1]
    assert np.abs(base_cpp - base_tf).mean() < 0.1  # the backends agree without an adapter
    assert effect > 0.15, effect  # the adapter matters ...
    assert gap < 0.15 and gap < effect / 2, (gap, effect)  # ... and llama.cpp applies it as peft does
    assert corr > 0.9, corr


@pytest.mark.slow
def test_greedy_generation_scoring_and_the_prompt_cache(tmp_path):
    pytest.importorskip("llama_cpp")
    import torch

    from memq.llm.llamacpp import LlamaCppLLM

    tf, cpp = LocalLLM("smollm2"), LlamaCppLLM("smollm2")
    model, tok, _ = tf.load()
    assert cpp.load().runner.eos == model.generation_config.eos_token_id  # the same stop rule
    checked = 0
    for prompt in ("Repeat exactly: the quick brown fox jumps over the lazy dog", "Count from 1 to 10.",
                   "What is 2+2?"):
        ids = tok(tf.format(prompt), add_special_tokens=False)["input_ids"]
        assert ids == cpp._ids(cpp.format(prompt), True)  # the same text, the same tokens
        loaded = cpp.load()
        got = cpp._greedy(loaded.runner, loaded.tokenizer, ids, 12, None)
        for i, token in enumerate(got):  # transformers' greedy choice, while it wins by >= 0.5 nat
            with torch.inference_mode():
                top = torch.topk(torch.log_softmax(model(torch.tensor([ids + got[:i]])).logits[0, -1], -1), 2)
            if float(top.values[0] - top.values[1]) < 0.5:
                break
            assert token == int(top.indices[0]), (prompt, i)
            checked += 1
        # its greedy tokens are the argmax of the logits of the whole sequence evaluated at once (a batch runs other
        # kernels than one token at a time, so again only where the choice is clear)
        for row, token in zip(loaded.runner.logits(ids + got, len(ids))[:-1], got, strict=True):
            second, first = np.sort(row)[-2:]
            if first - second < 0.5:
                break
            assert int(row.argmax()) == token
    assert checked >= 15
    repeat = ["Repeat exactly: the quick brown fox jumps over the lazy dog"]
    assert cpp.generate(repeat, max_new_tokens=24) == tf.generate(repeat, max_new_tokens=24) == [
        "The quick brown fox jumps over the lazy dog."]  # stopped at EOS, special tokens dropped
    assert cpp.generate(repeat, max_new_tokens=24, stop=[" fox", "lazy"]) == ["The quick brown"]
    assert cpp.calls == 2 and cpp.tokens > 0
    drafted = LlamaCppLLM("smollm2")  # speculative decoding (memq.llm.draft): the same text in fewer passes
    drafted.draft_from("the fox", lambda: ["The quick brown fox jumps over the lazy dog."])
    passes = drafted.counters[0]
    assert drafted.generate(repeat, max_new_tokens=24) == ["The quick brown fox jumps over the lazy dog."]
    assert drafted.drafts.startswith("the fox") and ": 1 texts" in drafted.drafts  # built, or loaded if saved before
    assert drafted.counters[0] - passes <= 6 < drafted.tokens

    scores = cpp.score("What is the capital of France?", ["The capital of France is Paris.",
                                                          "The capital of France is London."])
    assert scores[0] > scores[1]
    assert cpp.score("What is the capital of France?", ["The capital of France is Paris."])[0] == pytest.approx(
        scores[0], abs=1e-3)  # the cached prompt gives the same number
    assert cpp.generate(["Say yes. " * 150], max_new_tokens=4)  # a prompt longer than one llama.cpp batch (512)
    with pytest.raises(LLMError, match="exceeds the llama.cpp context"):
        LlamaCppLLM("smollm2", n_ctx=256).generate(["a long prompt " * 200], max_new_tokens=8)


@pytest.mark.slow
def test_a_new_process_starts_from_the_saved_prompt_state(tmp_path, monkeypatch, caplog):
    pytest.importorskip("llama_cpp")
    import memq.llm.llamacpp
    from memq.llm.llamacpp import LlamaCppLLM

    monkeypatch.setenv("MEMQ_CACHE", str(tmp_path))
    monkeypatch.setattr(memq.llm.llamacpp, "_LOADED", {})  # no model loaded by an earlier test (its state is elsewhere)
    prompts = ["Repeat exactly: the quick brown fox jumps over the lazy dog", "Count from 1 to 10."]
    first = LlamaCppLLM("smollm2").generate(prompts[:1], max_new_tokens=16)
    saved = list(tmp_path.glob("gguf/prompt-states/*/state.json"))
    assert len(saved) == 1 and json.loads(saved[0].read_text())["tokens"]

    def fresh():  # what a new process sees: no loaded model, the cache on disk
        memq.llm.llamacpp._LOADED.clear()
        return LlamaCppLLM("smollm2")

    llm = fresh()
    runner = llm.load().runner
    assert runner.ids == [] and runner.state is not None
    assert llm.generate(prompts[:1], max_new_tokens=16) == first  # the whole prompt came from the saved state
    assert runner.state is None  # restored once, nothing saved again
    second = llm.generate(prompts[1:], max_new_tokens=16)  # shares the chat header only
    assert fresh().generate(prompts[1:], max_new_tokens=16) == second

    data = saved[0].with_name("state.bin")
    data.write_bytes(data.read_bytes()[:-8] + b"\0" * 8)  # corrupt: refused, deleted, the prompt evaluated in full
    llm = fresh()
    with caplog.at_level("WARNING", logger="memq.llm.kv_state"):
        assert llm.generate(prompts[:1], max_new_tokens=16) == first
    assert "sha256 does not match" in caplog.text
    assert json.loads(saved[0].read_text())["tokens"]  # saved anew from this prompt


@pytest.mark.slow
def test_the_calibration_s_shared_heads_get_the_log_probabilities_of_whole_passes():
    """llama.cpp gives a token the same logits whether its pass starts at it or before it (two tokens or more: one
    token alone runs other kernels), so a head whose start is kept from the head before it sums to the same bits."""
    pytest.importorskip("llama_cpp")
    from memq.llm.llamacpp import LlamaCppLLM
    from memq.plan.calibrate import null_logprobs

    lm = LlamaCppLLM("smollm2")
    prefix = lm.prompt_ids("Question:\n?\nTopic entities: Jamaica (m.03_r3)")
    lines = ["Find the languages spoken of the country Jamaica, assign it to ?",
             "Find the official language of the country Jamaica, assign it to ?",
             "Find the languages spoken of the place Jamaica, assign it to ?",
             "Find the capital of the country Jamaica, assign it to ?", "Find every country, assign it to ?"]
    heads = [tuple(lm.token_ids(line)) for line in lines]
    whole = {}
    for head in heads:
        lm.expand(lm.prompt_ids("another question"), 1, ())  # nothing kept from the head before
        whole[head] = float(np.sum(lm.expand(prefix + list(head), len(prefix), ())[0]))
    decoded = lm.counters[1]
    assert null_logprobs(heads, prefix, lm) == whole
    assert lm.counters[1] - decoded < sum(map(len, heads))


@pytest.mark.slow
def test_a_script_that_loaded_a_model_exits_without_a_traceback():
    import subprocess
    import sys

    pytest.importorskip("llama_cpp")
    script = ("from memq.llm.llamacpp import LlamaCppLLM\n"
              "print(LlamaCppLLM('smollm2', n_ctx=512).generate(['Say hi.'], max_new_tokens=2))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
