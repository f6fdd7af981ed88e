"""A tiny base GGUF and a peft-style LoRA adapter for it, written from numpy (tests of memq.llm.lora_gguf /
llamacpp)."""

from __future__ import annotations

import json

import numpy as np

N_EMBD, N_HEAD, N_HEAD_KV, N_FF, N_BLOCK = 8, 2, 1, 16, 2
HEAD_DIM = N_EMBD // N_HEAD
SHAPES = {"self_attn.q_proj": (N_EMBD, N_EMBD), "self_attn.k_proj": (N_HEAD_KV * HEAD_DIM, N_EMBD),
          "self_attn.v_proj": (N_HEAD_KV * HEAD_DIM, N_EMBD), "self_attn.o_proj": (N_EMBD, N_EMBD),
          "mlp.gate_proj": (N_FF, N_EMBD), "mlp.up_proj": (N_FF, N_EMBD), "mlp.down_proj": (N_EMBD, N_FF)}
GGUF_NAMES = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
              "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
              "mlp.down_proj": "ffn_down"}


def write_base(path, arch="llama"):
    """A tiny base model GGUF: only what the converter reads (architecture, heads, blocks, tensor shapes)."""
    import gguf

    w = gguf.GGUFWriter(str(path), arch)
    w.add_uint32(f"{arch}.block_count", N_BLOCK)
    w.add_uint32(f"{arch}.attention.head_count", N_HEAD)
    w.add_uint32(f"{arch}.attention.head_count_kv", N_HEAD_KV)
    for b in range(N_BLOCK):
        for module, (out, inp) in SHAPES.items():
            w.add_tensor(f"blk.{b}.{GGUF_NAMES[module]}.weight", np.zeros((out, inp), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def write_adapter(directory, r=2, alpha=8, seed=0, **config):
    from safetensors.numpy import save_file

    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for b in range(N_BLOCK):
        for module, (out, inp) in SHAPES.items():
            prefix = f"base_model.model.model.layers.{b}.{module}"
            tensors[f"{prefix}.lora_A.weight"] = rng.standard_normal((r, inp)).astype(np.float32)
            tensors[f"{prefix}.lora_B.weight"] = rng.standard_normal((out, r)).astype(np.float32)
    save_file(tensors, str(directory / "adapter_model.safetensors"))
    cfg = {"peft_type": "LORA", "r": r, "lora_alpha": alpha, "bias": "none", "use_dora": False,
           "target_modules": [m.split(".")[1] for m in SHAPES], **config}
    (directory / "adapter_config.json").write_text(json.dumps(cfg))
    return directory, tensors


def read(path):
    import gguf

    reader = gguf.GGUFReader(str(path))
    fields = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    tensors = {t.name: np.array(t.data).reshape([int(s) for s in reversed(t.shape)]) for t in reader.tensors}
    return fields, tensors


def permute_rows(b, n_head):
    """llama's q/k row order in GGUF, as llama.cpp's convert_hf_to_gguf.py writes it (rotary halves interleaved)."""
    out = b.shape[0]
    rows = np.arange(out).reshape(n_head, 2, out // n_head // 2).transpose(0, 2, 1).reshape(out)
    return b[rows]
