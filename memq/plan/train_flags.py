"""The command-line side of LoRA training, shared by ``memq planner train`` and ``memq ablation train``.

Both commands take the same flags with the same defaults, train on the same
questions (the planner's derived training split) with the same trainer
(:mod:`memq.plan.finetune`), and print the same numbers; this module holds
that common part so the two commands cannot drift apart.
"""

from __future__ import annotations

import argparse
import sys

from memq.cli import count

BASES = ("qwen2.5-coder-0.5b", "smollm2")
TRAIN_SPLIT = "train (memq.plan.data.split_of, dev held out)"


def add_training_args(p: argparse.ArgumentParser) -> None:
    """The flags ``memq planner train`` and ``memq ablation train`` share: same names, same defaults."""
    p.add_argument("--base", choices=BASES, default="qwen2.5-coder-0.5b")
    p.add_argument("--data", choices=("webqsp", "cwq", "webqsp+cwq", "grailqa", "grailqa+grailqa-synthetic"),
                   help="training questions (default webqsp; train split, dev held out; CWQ's WebQTest-N_ items are "
                        "excluded when webqsp is included, so the model stays clean for WebQSP test; grailqa: its "
                        "1,000 train questions, grailqa-synthetic: the synthetic programs)")
    p.add_argument("--max-steps", type=int, default=0, help="stop after N optimizer steps (overrides --epochs)")
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--lora-r", type=int, default=8, help="LoRA rank; 0 fine-tunes every weight of the base model")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="bf16: autocast matrix products to bfloat16 (CUDA, or a CPU with native bf16)")
    p.add_argument("--bucket", type=int, default=50,
                   help="draw batches from pools of N x batch-size examples sorted by length (0: plain shuffle)")
    p.add_argument("--checkpoint-every", type=int, default=25)
    p.add_argument("--limit", type=count, help="train on the first N examples only")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    p.add_argument("--stop-after", type=float, metavar="MINUTES",
                   help="stop with a checkpoint this many minutes after training starts (model load included); "
                        "run again with --resume to go on")
    p.add_argument("--init-adapter", metavar="DIR", default="",
                   help="start from this LoRA adapter (e.g. memory_bank/webqsp/planner) instead of a fresh one; "
                        "same base, rank and modules; the manifest records it and the epochs it had")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, help="torch CPU threads")


def set_threads(args) -> None:
    """Apply ``--threads`` (torch CPU threads) when it is given."""
    if getattr(args, "threads", None):
        import torch

        torch.set_num_threads(args.threads)


def training_plans(args) -> tuple[list[str], list]:
    """(datasets, derived training plans) for ``--data`` and ``--limit``; sets ``--threads`` first."""
    from .data import load_split

    set_threads(args)
    args.data = args.data or "webqsp"
    datasets = args.data.split("+")
    exclude = "webqsp" in datasets
    plans = []
    for ds in datasets:
        plans += load_split(ds, "train", exclude_webqsp_test=exclude and ds == "cwq")
    if args.limit:
        plans = plans[:args.limit]
    return datasets, plans


def train_config(args, **overrides):
    """The TrainConfig the shared training flags name, ``overrides`` (TrainConfig fields) applied before checking."""
    from .finetune import TrainConfig

    hp = dict(base=args.base, epochs=args.epochs, max_steps=args.max_steps, batch_size=args.batch_size,
              lr=args.lr, lora_r=args.lora_r, lora_alpha=2 * args.lora_r, checkpoint_every=args.checkpoint_every,
              device=args.device, precision=args.precision, bucket=args.bucket,
              init_adapter=getattr(args, "init_adapter", ""))
    return TrainConfig(**{**hp, **overrides})


def stop_at(args) -> float | None:
    """The ``time.time()`` at which ``--stop-after`` stops the run, or None."""
    import time

    minutes = getattr(args, "stop_after", None)
    if minutes is None:
        return None
    if not minutes > 0:
        raise SystemExit(f"--stop-after must be > 0 minutes, got {minutes}")
    return time.time() + 60 * minutes


GRAILQA_SPLIT = ("GrailQA: every train question (its dev file is separate; memq.plan.data.grailqa_part splits it); "
                 "grailqa-synthetic: the synthetic programs whose mids have names")


def data_info(datasets: list[str], **more) -> dict:
    """The ``data`` block of the adapter's manifest: the datasets, the split, then ``more``."""
    return {"datasets": datasets, "split": GRAILQA_SPLIT if "grailqa" in datasets else TRAIN_SPLIT, **more}


def training_bar(desc: str, **fixed):
    """A ``progress(total=..., initial=...)`` for :func:`memq.plan.finetune.train`: a tqdm bar on stderr."""
    from tqdm import tqdm  # type: ignore[import-untyped]

    return lambda **kw: tqdm(desc=desc, file=sys.stderr, **fixed, **kw)


def result_summary(result, *, per_step: bool = False) -> dict:
    """What a training run printed: steps, seconds (and seconds per step), the first and last losses."""
    out: dict = {"steps": result.steps, "seconds": round(result.seconds, 1)}
    if per_step:
        out["seconds_per_step"] = round(result.seconds / max(1, result.steps), 3)
    return {**out, "first_losses": result.losses[:3], "last_losses": result.losses[-3:]}
