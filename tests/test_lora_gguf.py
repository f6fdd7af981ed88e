"""memq.llm.lora_gguf: a peft LoRA adapter -> a GGUF LoRA adapter (layout, scale, q/k row order), its verified cache,
and the errors that name what cannot be converted. No llama.cpp needed: a tiny base GGUF is written here."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tiny_gguf import (
    GGUF_NAMES,
    N_BLOCK,
    N_FF,
    N_HEAD,
    N_HEAD_KV,
    SHAPES,
    permute_rows,
    read,
    write_adapter,
    write_base,
)

from memq.llm import LLMError
from memq.llm.lora_gguf import adapter_gguf, convert


def test_layout_scale_and_llama_qk_rows(tmp_path):
    base = write_base(tmp_path / "base.gguf")
    adapter, tensors = write_adapter(tmp_path / "planner", r=2, alpha=8)
    assert convert(adapter, base, tmp_path / "a.gguf") == N_BLOCK * len(SHAPES)
    fields, got = read(tmp_path / "a.gguf")
    assert fields["general.type"] == "adapter" and fields["adapter.type"] == "lora"
    assert fields["general.architecture"] == "llama"
    assert fields["adapter.lora.alpha"] == 0.0  # llama.cpp: scale 1, peft's alpha / r is inside lora_b
    assert len(got) == 2 * N_BLOCK * len(SHAPES)
    for b in range(N_BLOCK):
        for module, name in GGUF_NAMES.items():
            a = tensors[f"base_model.model.model.layers.{b}.{module}.lora_A.weight"]
            bb = tensors[f"base_model.model.model.layers.{b}.{module}.lora_B.weight"] * (8 / 2)
            if name == "attn_q":
                bb = permute_rows(bb, N_HEAD)
            elif name == "attn_k":
                bb = permute_rows(bb, N_HEAD_KV)
            np.testing.assert_array_equal(got[f"blk.{b}.{name}.weight.lora_a"], a)
            np.testing.assert_allclose(got[f"blk.{b}.{name}.weight.lora_b"], bb, rtol=1e-6)


def test_qwen2_keeps_row_order_and_rslora_scales_by_sqrt_r(tmp_path):
    base = write_base(tmp_path / "base.gguf", arch="qwen2")
    adapter, tensors = write_adapter(tmp_path / "planner", r=4, alpha=8, use_rslora=True)
    convert(adapter, base, tmp_path / "a.gguf")
    _, got = read(tmp_path / "a.gguf")
    want = tensors["base_model.model.model.layers.1.self_attn.q_proj.lora_B.weight"] * (8 / 4 ** 0.5)
    np.testing.assert_allclose(got["blk.1.attn_q.weight.lora_b"], want, rtol=1e-6)


def test_cache_is_keyed_verified_and_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMQ_CACHE", str(tmp_path / "cache"))
    base = write_base(tmp_path / "base.gguf")
    adapter, _ = write_adapter(tmp_path / "planner")
    first = adapter_gguf(adapter, base, "b" * 64)
    assert first.built and first.reason == "not built yet" and first.path.is_file()
    manifest = json.loads((first.path.parent / "manifest.json").read_text())
    assert manifest["base_sha256"] == "b" * 64 and set(manifest["adapter_sha256"]) == {
        "adapter_config.json", "adapter_model.safetensors"}
    again = adapter_gguf(adapter, base, "b" * 64)
    assert not again.built and again.path == first.path

    with open(first.path, "ab") as fh:  # corrupt the cached file: rebuilt, never used
        fh.write(b"\0")
    fixed = adapter_gguf(adapter, base, "b" * 64)
    assert fixed.built and "sha256" in fixed.reason and fixed.path == first.path
    assert not adapter_gguf(adapter, base, "b" * 64).built

    other_base = adapter_gguf(adapter, base, "c" * 64)  # another base: another key
    assert other_base.built and other_base.path != first.path
    write_adapter(adapter, seed=1)  # the adapter retrained in place: another key
    retrained = adapter_gguf(adapter, base, "b" * 64)
    assert retrained.built and retrained.path.parent != first.path.parent

    path = retrained.path.parent / "manifest.json"  # a manifest that lies about its adapter is rebuilt
    bad = json.loads(path.read_text())
    bad["format"] = 0
    path.write_text(json.dumps(bad))
    assert "format" in adapter_gguf(adapter, base, "b" * 64).reason


@pytest.mark.parametrize(("change", "message"), [
    ({"use_dora": True}, "use_dora"),
    ({"bias": "all"}, "bias is 'all'"),
    ({"modules_to_save": ["lm_head"]}, "modules_to_save"),
    ({"peft_type": "IA3"}, "peft_type is 'IA3'"),
    ({"alpha_pattern": {"q_proj": 32}}, "alpha_pattern"),
])
def test_unsupported_adapters_are_named(tmp_path, change, message):
    base = write_base(tmp_path / "base.gguf")
    adapter, _ = write_adapter(tmp_path / "planner", **change)
    with pytest.raises(LLMError, match=message):
        convert(adapter, base, tmp_path / "a.gguf")


def test_tensors_that_do_not_fit_are_named(tmp_path):
    from safetensors.numpy import save_file

    base = write_base(tmp_path / "base.gguf")
    adapter, tensors = write_adapter(tmp_path / "planner")
    embed = dict(tensors)
    embed["base_model.model.model.embed_tokens.lora_embedding_A"] = np.zeros((2, 8), dtype=np.float32)
    save_file(embed, str(adapter / "adapter_model.safetensors"))
    with pytest.raises(LLMError, match="lora_embedding_A"):
        convert(adapter, base, tmp_path / "a.gguf")

    wrong = dict(tensors)
    wrong["base_model.model.model.layers.0.mlp.up_proj.lora_B.weight"] = np.zeros((N_FF + 1, 2), dtype=np.float32)
    save_file(wrong, str(adapter / "adapter_model.safetensors"))
    with pytest.raises(LLMError, match=r"'model.layers.0.mlp.up_proj'.*blk.0.ffn_up.weight"):
        convert(adapter, base, tmp_path / "a.gguf")

    extra = dict(tensors)
    extra["base_model.model.model.layers.0.self_attn.rotary.lora_A.weight"] = np.zeros((2, 8), dtype=np.float32)
    extra["base_model.model.model.layers.0.self_attn.rotary.lora_B.weight"] = np.zeros((8, 2), dtype=np.float32)
    save_file(extra, str(adapter / "adapter_model.safetensors"))
    with pytest.raises(LLMError, match="'model.layers.0.self_attn.rotary' has no tensor"):
        convert(adapter, base, tmp_path / "a.gguf")


def test_bad_base_and_missing_files_are_named(tmp_path):
    adapter, _ = write_adapter(tmp_path / "planner")
    with pytest.raises(LLMError, match="architecture 'gpt2'"):
        convert(adapter, write_base(tmp_path / "gpt2.gguf", arch="gpt2"), tmp_path / "a.gguf")
    (adapter / "adapter_model.safetensors").unlink()
    with pytest.raises(LLMError, match="has no adapter_model.safetensors"):
        adapter_gguf(adapter, tmp_path / "gpt2.gguf", "b" * 64)


def test_a_merge_that_fails_while_writing_closes_its_file_and_leaves_nothing(tmp_path, monkeypatch):
    import gguf

    from memq.files import sha256_file
    from memq.llm.lora_gguf import merged_gguf

    monkeypatch.setenv("MEMQ_CACHE", str(tmp_path / "cache"))
    base = write_base(tmp_path / "base.gguf")
    adapter, _ = write_adapter(tmp_path / "planner")
    convert(adapter, base, tmp_path / "a.gguf")
    opened = []

    def fail(self, *args, **kwargs):
        opened.append(self)
        raise OSError("disk full (test)")

    monkeypatch.setattr(gguf.GGUFWriter, "write_tensors_to_file", fail)
    with pytest.raises(OSError, match="disk full"):
        merged_gguf(base, sha256_file(base), tmp_path / "a.gguf", "planner")
    assert opened and opened[0].fout is None  # closed, though the write failed
    assert not [p for p in (tmp_path / "cache" / "gguf").rglob("*") if p.is_file()]  # no partial file, no manifest


def test_the_adapter_merged_into_the_base_weights_once_cached_and_verified(tmp_path, monkeypatch):
    import gguf

    from memq.files import sha256_file
    from memq.llm.lora_gguf import lora_from_env, merged_gguf

    monkeypatch.setenv("MEMQ_CACHE", str(tmp_path / "cache"))
    base = write_base(tmp_path / "base.gguf")
    adapter, tensors = write_adapter(tmp_path / "planner", r=2, alpha=8)
    convert(adapter, base, tmp_path / "a.gguf")
    path, sha, seconds = merged_gguf(base, sha256_file(base), tmp_path / "a.gguf", "planner")
    assert seconds > 0 and sha == sha256_file(path)
    fields, got = read(path)
    base_fields, base_tensors = read(base)
    assert fields == base_fields and got.keys() == base_tensors.keys()  # every field and tensor copied
    for b in range(N_BLOCK):
        for module, name in GGUF_NAMES.items():
            delta = tensors[f"base_model.model.model.layers.{b}.{module}.lora_B.weight"] * (8 / 2) @ \
                tensors[f"base_model.model.model.layers.{b}.{module}.lora_A.weight"]
            if name in ("attn_q", "attn_k"):  # llama's q/k rows, as the adapter's lora_b holds them
                delta = permute_rows(delta, N_HEAD if name == "attn_q" else N_HEAD_KV)
            np.testing.assert_allclose(got[f"blk.{b}.{name}.weight"], delta, rtol=1e-6, atol=1e-6)  # the base is 0
    assert merged_gguf(base, sha256_file(base), tmp_path / "a.gguf", "planner") == (path, sha, 0.0)  # cached
    path.write_bytes(path.read_bytes()[:-4] + b"\0\0\0\1")  # a changed file is rebuilt, never used
    again = merged_gguf(base, sha256_file(base), tmp_path / "a.gguf", "planner")
    assert again[0] == path and again[1] == sha and again[2] > 0

    quantised = tmp_path / "q.gguf"  # a quantised base is refused by name
    w = gguf.GGUFWriter(str(quantised), "llama")
    for t, value in base_tensors.items():
        w.add_tensor(t, gguf.quants.quantize(np.zeros((value.shape[0], 32), np.float32),
                                             gguf.GGMLQuantizationType.Q8_0),
                     raw_shape=(value.shape[0], 34), raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(LLMError, match="is Q8_0; a LoRA adapter is merged into F32, F16, BF16 weights only"):
        merged_gguf(quantised, sha256_file(quantised), tmp_path / "a.gguf", "planner")

    monkeypatch.setenv("MEMQ_LLAMA_LORA", "fused")
    with pytest.raises(LLMError, match="MEMQ_LLAMA_LORA must be one of runtime, merged, got 'fused'"):
        lora_from_env()
    monkeypatch.delenv("MEMQ_LLAMA_LORA")
    assert lora_from_env() == "runtime"
