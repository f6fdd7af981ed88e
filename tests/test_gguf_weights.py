"""memq.llm.gguf_weights: the shipped GGUF's weights dequantised once to f16 for llama.cpp, cached and verified."""

from __future__ import annotations

import json

import pytest

from memq.llm import LLMError, gguf_source
from memq.llm.gguf_weights import f16_gguf, quantised_types, weights_from_env


def test_the_weights_setting_is_checked_by_name(monkeypatch):
    from memq.llm.llamacpp import LlamaCppLLM

    monkeypatch.delenv("MEMQ_LLAMA_WEIGHTS", raising=False)
    assert weights_from_env() == "f16" and LlamaCppLLM("smollm2").weights == "f16"
    monkeypatch.setenv("MEMQ_LLAMA_WEIGHTS", "shipped")
    assert LlamaCppLLM("smollm2").weights == "shipped" and LlamaCppLLM("smollm2", weights="f16").weights == "f16"
    monkeypatch.setenv("MEMQ_LLAMA_WEIGHTS", "bf16")
    assert weights_from_env() == "bf16" and LlamaCppLLM("smollm2").weights == "bf16"
    monkeypatch.setenv("MEMQ_LLAMA_WEIGHTS", "q4")
    with pytest.raises(LLMError, match="MEMQ_LLAMA_WEIGHTS must be one of f16, shipped, q8_0, bf16, got 'q4'"):
        weights_from_env()
    with pytest.raises(LLMError, match="weights must be one of f16, shipped, q8_0, bf16, got 'int8'"):
        LlamaCppLLM("smollm2", weights="int8")


def test_quantised_weights_are_written_once_as_f16_and_verified(tmp_path, monkeypatch, caplog):
    pytest.importorskip("llama_cpp")
    monkeypatch.setenv("MEMQ_CACHE", str(tmp_path))
    _, shipped, digest = gguf_source("smollm2")  # SmolLM2-135M, mostly Q4_1
    assert "Q4_1" in quantised_types(shipped)
    path, sha, seconds = f16_gguf(shipped, digest)
    assert seconds > 0 and path.parent == tmp_path / "gguf" and quantised_types(path) == []
    manifest = json.loads(path.with_suffix(".json").read_text())
    assert manifest["source_sha256"] == digest and manifest["sha256"] == sha
    assert f16_gguf(shipped, digest) == (path, sha, 0.0)  # cached, verified
    with path.open("r+b") as fh:  # a damaged file: another size, so its sha256 is read again
        fh.truncate(path.stat().st_size - 1024)
    with caplog.at_level("WARNING"):
        again, sha2, seconds = f16_gguf(shipped, digest)
    assert "does not match its manifest's sha256" in caplog.text and seconds > 0 and (again, sha2) == (path, sha)


def test_q8_0_weights_are_quantised_from_the_f16_file_once_and_verified(tmp_path, monkeypatch):
    pytest.importorskip("llama_cpp")
    from memq.llm.gguf_weights import q8_gguf

    monkeypatch.setenv("MEMQ_CACHE", str(tmp_path))
    _, shipped, digest = gguf_source("smollm2")
    path, sha, seconds = q8_gguf(shipped, digest)
    assert seconds > 0 and "Q8_0" in quantised_types(path) and "Q4_1" not in quantised_types(path)
    f16, f16_sha, _ = f16_gguf(shipped, digest)
    manifest = json.loads(path.with_suffix(".json").read_text())
    assert manifest["source_sha256"] == f16_sha and manifest["weights"] == "q8_0" and manifest["sha256"] == sha
    assert q8_gguf(shipped, digest) == (path, sha, 0.0)  # cached, verified


def test_bf16_weights_are_dequantised_from_the_shipped_file_once_and_verified(tmp_path, monkeypatch):
    pytest.importorskip("llama_cpp")
    import gguf as gguf_lib

    from memq.llm.gguf_weights import bf16_gguf

    monkeypatch.setenv("MEMQ_CACHE", str(tmp_path))
    _, shipped, digest = gguf_source("smollm2")
    path, sha, seconds = bf16_gguf(shipped, digest)
    types = {t.tensor_type for t in gguf_lib.GGUFReader(str(path)).tensors}
    assert seconds > 0 and gguf_lib.GGMLQuantizationType.BF16 in types and quantised_types(path) == []
    manifest = json.loads(path.with_suffix(".json").read_text())
    assert manifest["source_sha256"] == digest and manifest["weights"] == "bf16" and manifest["sha256"] == sha
    assert path.name.endswith(f"-bf16-{digest[:8]}.gguf") and bf16_gguf(shipped, digest) == (path, sha, 0.0)


def test_unquantised_weights_are_used_as_they_are(tmp_path, monkeypatch):
    from tiny_gguf import write_base

    monkeypatch.setenv("MEMQ_CACHE", str(tmp_path / "cache"))
    base = write_base(tmp_path / "tiny.gguf")  # float32 tensors
    assert f16_gguf(base, "ab" * 32) == (base, "ab" * 32, 0.0)


def test_a_dataset_s_planner_runs_on_its_own_weights_where_the_cpu_multiplies_them_unless_told(monkeypatch):
    import memq.llm.gguf_weights as gw
    from memq.plan.planner import DATASET_WEIGHTS, default_adapter, default_weights

    monkeypatch.delenv("MEMQ_LLAMA_WEIGHTS", raising=False)
    assert DATASET_WEIGHTS == {"grailqa": "bf16", "webqsp": "bf16"}
    grail, webqsp, cwq = default_adapter("grailqa"), default_adapter("webqsp"), default_adapter("cwq")
    monkeypatch.setattr(gw, "native_bf16", lambda: True)
    assert default_weights(grail) == default_weights(webqsp) == "bf16" and default_weights(cwq) == "f16"
    assert default_weights(grail / ".." / "planner") == "bf16"  # the same directory, however it is written
    monkeypatch.setattr(gw, "native_bf16", lambda: False)  # widened in software: f16 stays
    assert default_weights(grail) == "f16"
    monkeypatch.setattr(gw, "native_bf16", lambda: True)
    monkeypatch.setenv("MEMQ_LLAMA_WEIGHTS", "f16")  # the setting wins
    assert default_weights(grail) == "f16"
    monkeypatch.setenv("MEMQ_LLAMA_WEIGHTS", "q8_0")
    assert default_weights(webqsp) == "q8_0"
    monkeypatch.setenv("MEMQ_LLAMA_WEIGHTS", "bf17")
    with pytest.raises(LLMError, match="got 'bf17'"):
        default_weights(grail)



def test_webqsp_s_and_grailqa_s_planners_run_with_their_adapters_merged_in_unless_told(monkeypatch):
    from memq.llm.llamacpp import LlamaCppLLM
    from memq.plan.planner import DATASET_LORA, default_adapter, default_lora

    monkeypatch.delenv("MEMQ_LLAMA_LORA", raising=False)
    assert DATASET_LORA == {"grailqa": "merged", "webqsp": "merged"}
    grail, webqsp, cwq = default_adapter("grailqa"), default_adapter("webqsp"), default_adapter("cwq")
    assert default_lora(webqsp) == default_lora(webqsp / ".." / "planner") == default_lora(grail) == "merged"
    assert default_lora(cwq) == "runtime"  # a tie on dev, its test rows not planned again: the adapter as before
    monkeypatch.setenv("MEMQ_LLAMA_WEIGHTS", "q8_0")  # quantised weights take no adapter in: at run time, as before
    assert default_lora(webqsp) == "runtime"
    monkeypatch.delenv("MEMQ_LLAMA_WEIGHTS")
    monkeypatch.setenv("MEMQ_LLAMA_LORA", "runtime")  # the setting wins
    assert default_lora(webqsp) == "runtime"
    monkeypatch.setenv("MEMQ_LLAMA_LORA", "merged")
    assert default_lora(cwq) == "merged" and LlamaCppLLM("smollm2").lora == "merged"
    assert LlamaCppLLM("smollm2", lora="runtime").lora == "runtime"  # a given value wins over the setting
    with pytest.raises(LLMError, match="lora must be one of runtime, merged, got 'fused'"):
        LlamaCppLLM("smollm2", lora="fused")
