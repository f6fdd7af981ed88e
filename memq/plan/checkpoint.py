"""Checkpoints and adapters of planner training (:mod:`memq.plan.finetune`), with no pickle anywhere.

A checkpoint (``OUT/checkpoint/``) holds the adapter (or, for a full fine-tune, every weight), the optimizer's
moments as safetensors and ``state.json`` (step, seconds, planned total); it is written to a temporary directory
and renamed into place, so a crash never leaves half of one. An *init adapter* is a finished LoRA adapter that a
new run starts from (continued training); :func:`parent_adapter` checks that it fits the run and says what it is,
for the new adapter's manifest.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from memq.errors import MemQError


def save_checkpoint(model, optimizer, state: dict, out_dir: Path) -> None:
    """Write ``out_dir/checkpoint``: the trainable weights, AdamW's moments and ``state`` (step, seconds, total)."""
    from safetensors.torch import save_file

    ckpt = out_dir / "checkpoint"
    tmp = out_dir / f"checkpoint.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp))
    if (tmp / "adapter_config.json").exists():
        portable_config(tmp, state.get("base", ""))
    params = [p for g in optimizer.param_groups for p in g["params"]]
    tensors = {}
    for i, p in enumerate(params):
        st = optimizer.state.get(p)
        if st:
            tensors[f"{i}.exp_avg"] = st["exp_avg"].contiguous()
            tensors[f"{i}.exp_avg_sq"] = st["exp_avg_sq"].contiguous()
            state.setdefault("adam_steps", {})[str(i)] = float(st["step"])
    if tensors:
        save_file(tensors, str(tmp / "optimizer.safetensors"))
    (tmp / "state.json").write_text(json.dumps(state, indent=1))
    shutil.rmtree(ckpt, ignore_errors=True)
    os.replace(tmp, ckpt)


def portable_config(directory: Path, base: str) -> None:
    """Name the base model in adapter_config.json as memq does (not by this machine's cache path); drop peft's card."""
    (directory / "README.md").unlink(missing_ok=True)
    path = directory / "adapter_config.json"
    config = json.loads(path.read_text())
    config["base_model_name_or_path"] = base if base and not Path(base).is_absolute() else Path(base).name
    path.write_text(json.dumps(config, indent=2, sort_keys=True))


def load_checkpoint(model, optimizer, out_dir: Path) -> dict:
    """Put ``out_dir/checkpoint``'s weights and AdamW moments back into ``model`` and ``optimizer``; its state."""
    import torch
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    ckpt = out_dir / "checkpoint"
    state = json.loads((ckpt / "state.json").read_text())
    if (ckpt / "adapter_model.safetensors").exists():
        set_peft_model_state_dict(model, load_file(str(ckpt / "adapter_model.safetensors")))
    else:  # a full fine-tune: every weight (tied embeddings are stored once)
        weights = {}
        for f in sorted(ckpt.glob("model*.safetensors")):
            weights.update(load_file(str(f)))
        model.load_state_dict(weights, strict=False)
    opt_file = ckpt / "optimizer.safetensors"
    if opt_file.exists():
        moments = load_file(str(opt_file))
        params = [p for g in optimizer.param_groups for p in g["params"]]
        for i, p in enumerate(params):
            if f"{i}.exp_avg" in moments:
                optimizer.state[p] = {
                    "step": torch.tensor(state["adam_steps"][str(i)]),
                    "exp_avg": moments[f"{i}.exp_avg"].to(p.device),
                    "exp_avg_sq": moments[f"{i}.exp_avg_sq"].to(p.device),
                }
    return state


def shown_adapter(src: Path) -> str:
    """How a manifest names an adapter directory: relative to the repository when inside it
    (``memory_bank/cwq/planner``), else by its name alone (no path of this machine)."""
    root = Path(__file__).resolve().parents[2]
    try:
        return str(src.resolve().relative_to(root))
    except ValueError:
        return src.name if src.is_absolute() else str(src)


def parent_adapter(cfg) -> dict:
    """What ``cfg.init_adapter`` is (its sha256 and the epochs it was trained), after checking it fits ``cfg``.

    ``epochs_total`` counts the epochs of the adapter's own parents too, when it was itself continued.

    An adapter of another rank, other target modules or another base cannot be continued: a MemQError names
    the value that differs. Empty when ``cfg`` starts a fresh adapter.
    """
    from memq.files import sha256_file

    if not cfg.init_adapter:
        return {}
    src = Path(cfg.init_adapter)
    weights, config_path = src / "adapter_model.safetensors", src / "adapter_config.json"
    if not weights.is_file() or not config_path.is_file():
        raise MemQError(f"init_adapter {str(src)!r} holds no LoRA adapter (adapter_config.json and "
                        "adapter_model.safetensors)")
    config = json.loads(config_path.read_text())
    base = Path(str(config.get("base_model_name_or_path", ""))).name
    if base != Path(cfg.base).name:
        raise MemQError(f"init_adapter {str(src)!r} was trained on base {base!r}, not {Path(cfg.base).name!r}")
    if config.get("r") != cfg.lora_r:
        raise MemQError(f"init_adapter {str(src)!r} has LoRA rank {config.get('r')!r}; training asks for "
                        f"lora_r {cfg.lora_r}")
    if sorted(config.get("target_modules") or []) != sorted(cfg.target_modules):
        raise MemQError(f"init_adapter {str(src)!r} adapts {sorted(config.get('target_modules') or [])}, "
                        f"not {sorted(cfg.target_modules)}")
    manifest_path = src / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    training = manifest.get("training", {})
    return {"adapter": shown_adapter(src), "sha256": sha256_file(weights),
            "data_sha256": manifest.get("data", {}).get("sha256"),
            "epochs_done": training.get("epochs_done"), "steps": training.get("steps"),
            "epochs_total": training.get("epochs_total", training.get("epochs_done")),
            "device": training.get("device"), "dev_exact_match": manifest.get("dev_metrics", {}).get("exact_match")}


def load_adapter_weights(model, src: Path) -> None:
    """Copy an adapter's LoRA weights into ``model`` (a peft model of the same rank and modules)."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    result = set_peft_model_state_dict(model, load_file(str(src / "adapter_model.safetensors")))
    unexpected = getattr(result, "unexpected_keys", None)
    if unexpected:
        raise MemQError(f"init_adapter {str(src)!r} has weights this model does not: {unexpected[:3]}")
