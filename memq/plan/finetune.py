"""LoRA fine-tuning of the planning expert (MemQ section 4.2) with transformers + peft.

Each example is the Table 9 prompt as the user turn of the model's chat
template and the derived plan as the assistant turn; the loss covers only
the plan tokens (and the end-of-turn token). Training is a plain PyTorch loop:
AdamW, linear warm-up then linear decay, greedy-friendly (no sampling state),
running on CPU or CUDA.

An output directory holds::

    adapter_config.json, adapter_model.safetensors   the LoRA adapter (peft)
    manifest.json        base model + sha256, data (datasets, splits, hash, counts),
                         hyper-parameters, steps, timings, dev metrics
    train_log.jsonl      one line per logged step: step, epoch, loss, lr, seconds
    checkpoint/          adapter + optimizer state (safetensors) + state.json, for --resume

No pickle anywhere: optimizer moments are stored as safetensors.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from memq.errors import MemQError
from memq.files import write_atomic

from .checkpoint import load_adapter_weights, load_checkpoint, parent_adapter, portable_config, save_checkpoint
from .data import DerivedPlan, data_hash
from .prompt import planner_prompt, prompt_hash

logger = logging.getLogger(__name__)

MANIFEST_VERSION = 1
PRECISIONS = ("fp32", "bf16")
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters. ``max_steps`` (> 0) overrides ``epochs``."""

    base: str = "qwen2.5-coder-0.5b"
    epochs: float = 1.0
    max_steps: int = 0
    batch_size: int = 8
    lr: float = 2e-4
    warmup_steps: int = 20
    weight_decay: float = 0.0
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    target_modules: tuple[str, ...] = LORA_TARGETS
    max_length: int = 384
    seed: int = 13
    log_every: int = 1
    checkpoint_every: int = 50
    device: str = "cpu"
    precision: str = "fp32"  # "bf16": autocast matrix products to bfloat16 (CUDA or CPU); weights and AdamW stay fp32
    bucket: int = 50  # batches drawn from pools of bucket * batch_size examples sorted by length (0: no bucketing)
    init_adapter: str = ""  # a LoRA adapter directory to start from (continued training); "": a fresh adapter

    @property
    def full(self) -> bool:
        """``lora_r == 0`` fine-tunes every weight of the base model instead of a LoRA adapter."""
        return self.lora_r == 0

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise MemQError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.max_steps < 0 or self.epochs <= 0 and self.max_steps == 0:
            raise MemQError(f"need epochs > 0 or max_steps > 0 (got epochs={self.epochs}, max_steps={self.max_steps})")
        if not 0 < self.lr < 1:
            raise MemQError(f"lr must be in (0, 1), got {self.lr}")
        if self.precision not in PRECISIONS:
            raise MemQError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.lora_r < 0 or self.bucket < 0:
            raise MemQError(f"lora_r and bucket must be >= 0, got {self.lora_r} and {self.bucket}")
        if self.init_adapter and self.full:
            raise MemQError(f"init_adapter {self.init_adapter!r} continues a LoRA adapter; lora_r 0 (full) has none")


@dataclass
class TrainResult:
    out_dir: Path
    steps: int
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0
    finished: bool = True  # False: stopped at ``stop_at`` with a checkpoint to resume from


def encode_example(tokenizer, prompt: str, target: str, max_length: int) -> tuple[list[int], list[int]]:
    """``(input_ids, labels)``: chat-formatted prompt (label -100) + plan + end of turn."""
    user = [{"role": "user", "content": prompt}]
    prompt_text = tokenizer.apply_chat_template(user, tokenize=False, add_generation_prompt=True)
    full_text = tokenizer.apply_chat_template(user + [{"role": "assistant", "content": target}], tokenize=False)
    if not full_text.startswith(prompt_text):
        raise MemQError("the chat template does not extend the prompt with the answer; cannot mask the prompt")
    p_ids = tokenizer(prompt_text, add_special_tokens=False)["input_ids"]
    t_ids = tokenizer(full_text[len(prompt_text):].rstrip("\n"), add_special_tokens=False)["input_ids"]
    ids = (p_ids + t_ids)[:max_length]
    labels = ([-100] * len(p_ids) + t_ids)[:max_length]
    return ids, labels


def _batches(n: int, batch_size: int, seed: int, epoch: int, lengths: Sequence[int] | None = None,
             bucket: int = 0) -> list[list[int]]:
    """One epoch's batches of example indices, deterministic in ``seed`` and ``epoch``.

    With ``lengths`` and ``bucket`` > 0, the shuffled examples are cut into pools of ``bucket * batch_size``,
    each pool is sorted by length and cut into batches, and the batches are shuffled again: a batch holds
    examples of about one length, so little of it is padding, and every example is still seen once an epoch.
    """
    rng = random.Random(seed * 1000 + epoch)
    order = list(range(n))
    rng.shuffle(order)
    if not lengths or bucket <= 0:
        return [order[i:i + batch_size] for i in range(0, n, batch_size)]
    pool = bucket * batch_size
    batches = []
    for start in range(0, n, pool):
        chunk = sorted(order[start:start + pool], key=lambda i: lengths[i])
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    return batches


def _collate(examples, pad_id: int):
    import torch

    width = max(len(ids) for ids, _ in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), -100, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    for i, (x, y) in enumerate(examples):
        ids[i, :len(x)] = torch.tensor(x)
        labels[i, :len(y)] = torch.tensor(y)
        mask[i, :len(x)] = 1
    return ids, mask, labels


def shared_prefix_loss(model, ids, mask, labels):
    """Mean token loss of a right-padded batch, running the prompt prefix the rows share only once.

    Every example starts with the same chat header and Table 9 instructions
    (~60% of its tokens). The shared prefix runs with batch size 1, its KV
    cache is repeated across the batch, and the rest runs on top; the LM head
    (151k-word vocabulary for Qwen) runs only on the plan positions. Loss and
    gradients equal the plain forward pass (checked in the tests) at ~1/3 of
    the time and about half the memory. Falls back to the plain pass when
    nothing is shared.
    """
    import torch

    has = labels != -100
    first = torch.where(has.any(dim=1), has.long().argmax(dim=1),
                        torch.full_like(has[:, 0], ids.shape[1], dtype=torch.long))
    common = int((ids == ids[:1]).all(dim=0).long().cumprod(0).sum())
    prefix = min(common, int(first.min())) - 1  # the last prefix position must still be a prompt token
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    body, head = getattr(base, "model", None), getattr(base, "lm_head", None)
    if prefix < 8 or ids.shape[0] == 1 or body is None or head is None:
        return model(input_ids=ids, attention_mask=mask, labels=labels).loss
    # the decoder body (LoRA layers are injected in place) and the LM head only where a label is
    cache = body(input_ids=ids[:1, :prefix], use_cache=True).past_key_values
    cache.batch_repeat_interleave(ids.shape[0])
    hidden = body(input_ids=ids[:, prefix:], attention_mask=mask, past_key_values=cache,
                  use_cache=False).last_hidden_state
    targets = labels[:, prefix + 1:]
    keep = targets != -100
    logits = head(hidden[:, :-1][keep])
    return torch.nn.functional.cross_entropy(logits.float(), targets[keep])


def _lr_at(step: int, total: int, cfg: TrainConfig) -> float:
    """Linear warm-up (at most a tenth of the run) then linear decay to zero."""
    warmup = max(1, min(cfg.warmup_steps, total // 10))
    if step < warmup:
        return cfg.lr * (step + 1) / warmup
    return cfg.lr * max(0.0, (total - step) / max(1, total - warmup))


# --------------------------------------------------------------------------- training

def train(plans: Sequence[DerivedPlan], out_dir: str | Path, cfg: TrainConfig = TrainConfig(), *,
          data_info: dict | None = None, resume: bool = False,
          progress: Callable | None = None, stop_at: float | None = None) -> TrainResult:
    """Fine-tune a LoRA adapter (or, with ``lora_r=0``, the whole model) on derived plans; writes ``out_dir``.

    ``progress(total=..., initial=...)`` may return a tqdm-like bar (``update``,
    ``set_postfix``, ``close``); ``None`` trains silently. ``stop_at`` (a ``time.time()``
    value) stops the run early with a checkpoint written, so that ``resume=True`` goes on from
    it; the result then says ``finished=False`` and no adapter or manifest is written yet.
    """
    import torch
    from peft import LoraConfig, get_peft_model

    from memq.llm import load_pretrained

    if not plans:
        raise MemQError("no training plans")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not resume and (out_dir / "checkpoint").exists():
        raise MemQError(f"{out_dir} already holds a checkpoint; pass --resume or choose another --out")
    parent = parent_adapter(cfg)  # checked before the model loads
    torch.manual_seed(cfg.seed)
    model, tok, source = load_pretrained(cfg.base, cfg.device, fresh=True)
    if not cfg.full:
        lora = LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                          target_modules=list(cfg.target_modules), task_type="CAUSAL_LM")
        model = get_peft_model(model, lora)
    model.train()
    examples = [encode_example(tok, planner_prompt(p.question, p.entities), p.text, cfg.max_length) for p in plans]
    lengths = [len(ids) for ids, _ in examples]
    per_epoch = math.ceil(len(examples) / cfg.batch_size)
    total = cfg.max_steps or max(1, math.ceil(per_epoch * cfg.epochs))
    data_start = data_start_step(parent, per_epoch, data_hash(plans))
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    step, seconds = 0, 0.0
    log_path = out_dir / "train_log.jsonl"
    if resume and (out_dir / "checkpoint" / "state.json").exists():
        state = load_checkpoint(model, optimizer, out_dir)
        step, seconds = state["step"], state["seconds"]
        if state.get("total") != total:
            logger.warning("resuming with %d total steps (checkpoint was planned for %s)", total, state.get("total"))
        logger.info("resumed %s at step %d", out_dir, step)
        if log_path.exists():  # forget logged steps the checkpoint does not hold
            kept = [line for line in log_path.read_text().splitlines()
                    if line.strip() and json.loads(line)["step"] <= step]
            log_path.write_text("".join(line + "\n" for line in kept))
    else:
        if parent:
            load_adapter_weights(model, Path(cfg.init_adapter))
            logger.info("starting from the adapter in %s (%s epochs done there)", cfg.init_adapter,
                        parent.get("epochs_done"))
        if log_path.exists():
            log_path.unlink()
    bar = progress(total=total, initial=step) if progress else None
    losses: list[float] = []
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    autocast = (torch.autocast("cuda" if cfg.device.startswith("cuda") else "cpu", dtype=torch.bfloat16)
                if cfg.precision == "bf16" else contextlib.nullcontext())
    epoch_batches: tuple[int, list[list[int]]] = (-1, [])
    while step < total:
        if stop_at is not None and time.time() >= stop_at:
            save_checkpoint(model, optimizer, {"step": step, "seconds": seconds, "total": total, "base": cfg.base},
                            out_dir)
            if bar is not None:
                bar.close()
            logger.info("stopped at step %d of %d (stop_at); resume from %s", step, total, out_dir / "checkpoint")
            return TrainResult(out_dir, step, losses, seconds, finished=False)
        epoch, offset = divmod(data_start + step, per_epoch)
        if epoch_batches[0] != epoch:
            epoch_batches = (epoch, _batches(len(examples), cfg.batch_size, cfg.seed, epoch, lengths, cfg.bucket))
        batch = epoch_batches[1][offset]
        ids, mask, labels = (t.to(cfg.device) for t in _collate([examples[i] for i in batch], pad))
        for g in optimizer.param_groups:
            g["lr"] = _lr_at(step, total, cfg)
        start = time.perf_counter()
        with autocast:
            loss = shared_prefix_loss(model, ids, mask, labels)
        if not torch.isfinite(loss):
            raise MemQError(f"training loss is {float(loss)} at step {step + 1} (precision {cfg.precision}, "
                            f"lr {optimizer.param_groups[0]['lr']:.2e}); {out_dir} keeps its last checkpoint, "
                            "if any: lower --lr or train in fp32")
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if cfg.device.startswith("cuda"):
            torch.cuda.synchronize()
        took = time.perf_counter() - start
        seconds += took
        step += 1
        losses.append(float(loss.detach()))
        if step % cfg.log_every == 0 or step == total:
            with open(log_path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"step": step, "epoch": round(step / per_epoch, 4), "loss": round(losses[-1], 5),
                                     "lr": optimizer.param_groups[0]["lr"], "seconds": round(took, 3)}) + "\n")
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
        if step % cfg.checkpoint_every == 0 or step == total:
            save_checkpoint(model, optimizer, {"step": step, "seconds": seconds, "total": total, "base": cfg.base},
                            out_dir)
    if bar is not None:
        bar.close()
    model.save_pretrained(str(out_dir))
    if cfg.full:
        tok.save_pretrained(str(out_dir))
    else:
        portable_config(out_dir, cfg.base)
    write_manifest(out_dir, cfg, source, plans, data_info or {}, step, seconds, per_epoch, parent=parent,
                   data_start=data_start)
    return TrainResult(out_dir, step, losses, seconds)


def data_start_step(parent: dict, per_epoch: int, data_sha256: str | None = None) -> int:
    """Where in the batch order a run continued from ``parent`` starts: at the parent's epoch position.

    A fresh run starts at 0, and so does one whose data (``data_sha256``) is not the parent's: a CWQ planner
    continued on GrailQA's questions starts GrailQA's first epoch at its first batch. A run continued on its
    parent's data goes on from ``epochs_total * per_epoch``, so that it trains on batches the parent's schedule
    had not reached yet instead of repeating the first ones. No batch repeats when
    the parent was itself trained fresh with the same seed, batch size and bucketing; otherwise (for example a GPU
    parent with another batch size) the batches are new to this schedule, and overlap the parent's at random.
    """
    if not same_data(parent, data_sha256):
        return 0
    epochs = (parent or {}).get("epochs_total")
    return round(float(epochs) * per_epoch) if epochs else 0


def same_data(parent: dict, data_sha256: str | None) -> bool:
    """Whether a continued run trains on its parent's data (unknown hashes count as the same, as before)."""
    theirs = (parent or {}).get("data_sha256")
    return not (theirs and data_sha256 and theirs != data_sha256)


def device_name(device: str) -> str:
    """``"cpu"``, or the CUDA device's name (``"cuda: NVIDIA H100 80GB HBM3"``), for manifests."""
    if not device.startswith("cuda"):
        return device
    import torch

    return f"{device}: {torch.cuda.get_device_name(torch.device(device))}"


def write_manifest(out_dir: Path, cfg: TrainConfig, source, plans: Sequence[DerivedPlan], data_info: dict,
                   steps: int, seconds: float, per_epoch: int, dev_metrics: dict | None = None,
                   parent: dict | None = None, data_start: int = 0) -> Path:
    import memq

    manifest = {
        "format_version": MANIFEST_VERSION,
        "memq_version": getattr(memq, "__version__", "unknown"),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "kind": "full-planner" if cfg.full else "lora-planner",
        "base_model": {"name": source.name, "ref": cfg.base, "sha256": source.sha256},
        "prompt": {"name": "memq-table9", "sha256": prompt_hash()},
        "data": {"examples": len(plans), "sha256": data_hash(plans), **data_info},
        "hyper_parameters": {**asdict(cfg), "target_modules": list(cfg.target_modules),
                             "init_adapter": (parent or {}).get("adapter", cfg.init_adapter)},
        "training": {"steps": steps, "steps_per_epoch": per_epoch, "epochs_done": round(steps / per_epoch, 3),
                     "seconds": round(seconds, 1), "seconds_per_step": round(seconds / max(1, steps), 3),
                     "device": device_name(cfg.device), "precision": cfg.precision},
        "dev_metrics": dev_metrics or {},
    }
    if parent:  # continued training: this run's steps come on top of the parent adapter's epochs
        manifest["training"]["init_from"] = parent
        manifest["training"]["data_start_step"] = data_start
        if not same_data(parent, manifest["data"]["sha256"]):
            manifest["training"]["epochs_total"] = round(steps / per_epoch, 3)  # the parent's epochs were of other data
            manifest["training"]["init_from"]["other_data"] = True
        elif parent.get("epochs_total") is not None:
            manifest["training"]["epochs_total"] = round(parent["epochs_total"] + steps / per_epoch, 3)
    path = out_dir / "manifest.json"
    write_atomic(path, json.dumps(manifest, indent=2).encode())
    return path


def update_manifest(out_dir: str | Path, **fields) -> dict:
    """Merge ``fields`` into an adapter's manifest (e.g. ``dev_metrics=...``)."""
    path = Path(out_dir) / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest.update(fields)
    write_atomic(path, json.dumps(manifest, indent=2).encode())
    return manifest


def read_losses(out_dir: str | Path) -> list[float]:
    path = Path(out_dir) / "train_log.jsonl"
    return [json.loads(line)["loss"] for line in path.read_text().splitlines() if line.strip()]
