"""``memq ablation train``: the direct-SPARQL model of the "w/o PE, QRM" ablation.

Same data (the planner's derived training split), same trainer and the same
hyper-parameter flags and defaults as ``memq planner train``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

BASES = ("qwen2.5-coder-0.5b", "smollm2")


def register(sub: argparse._SubParsersAction) -> None:
    ab = sub.add_parser("ablation", help="ablations of the MemQ paper")
    ab_sub = ab.add_subparsers(dest="ablation_command", required=True)
    tr = ab_sub.add_parser("train", help="fine-tune the direct-SPARQL model (w/o PE, QRM)")
    tr.add_argument("--base", choices=BASES, default="qwen2.5-coder-0.5b")
    tr.add_argument("--data", default="webqsp", choices=("webqsp", "cwq", "webqsp+cwq"),
                    help="the planner's training split of these datasets (dev held out)")
    tr.add_argument("--max-steps", type=int, default=0, help="stop after N optimizer steps (overrides --epochs)")
    tr.add_argument("--epochs", type=float, default=1.0)
    tr.add_argument("--batch-size", type=int, default=8)
    tr.add_argument("--lr", type=float, default=2e-4)
    tr.add_argument("--lora-r", type=int, default=8)
    tr.add_argument("--checkpoint-every", type=int, default=25)
    tr.add_argument("--limit", type=int, help="train on the first N examples only")
    tr.add_argument("--like", metavar="PLANNER_DIR",
                    help="copy base, steps, batch size, lr and LoRA r from this planner adapter's manifest")
    tr.add_argument("--out", required=True, help="adapter directory")
    tr.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    tr.add_argument("--device", default="cpu")
    tr.add_argument("--threads", type=int, help="torch CPU threads")
    tr.add_argument("--no-progress", action="store_true")
    tr.set_defaults(handler=_train)


def _train(args: argparse.Namespace) -> int:
    from ..plan.data import load_split
    from ..plan.finetune import TrainConfig
    from .direct import examples_from_plans, train_direct

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    datasets = args.data.split("+")
    exclude = "webqsp" in datasets
    plans = []
    for ds in datasets:
        plans += load_split(ds, "train", exclude_webqsp_test=exclude and ds == "cwq")
    if args.limit:
        plans = plans[:args.limit]
    examples, skipped = examples_from_plans(plans)
    hp = dict(base=args.base, epochs=args.epochs, max_steps=args.max_steps, batch_size=args.batch_size,
              lr=args.lr, lora_r=args.lora_r, lora_alpha=2 * args.lora_r, checkpoint_every=args.checkpoint_every,
              device=args.device)
    if args.like:
        from ..plan.planner import read_manifest

        m = read_manifest(args.like)
        h = m["hyper_parameters"]
        hp.update(base=m["base_model"]["ref"], max_steps=m["training"]["steps"], batch_size=h["batch_size"],
                  lr=h["lr"], lora_r=h["lora_r"], lora_alpha=h["lora_alpha"], epochs=h["epochs"])
    cfg = TrainConfig(**hp)
    info = {"datasets": datasets, "split": "train (memq.plan.data.split_of, dev held out)",
            "same_questions_as": "memq planner train", "skipped": len(skipped), "limit": args.limit,
            "like": str(args.like) if args.like else None}
    bar = None
    if not args.no_progress:
        from tqdm import tqdm

        def bar(**kw):
            return tqdm(desc="training direct-SPARQL", unit="step", **kw)
    result = train_direct(examples, Path(args.out), cfg, data_info=info, resume=args.resume, progress=bar)
    print(json.dumps({"out": str(args.out), "examples": len(examples), "skipped": len(skipped),
                      "steps": result.steps, "seconds": round(result.seconds, 1),
                      "seconds_per_step": round(result.seconds / max(1, result.steps), 3),
                      "first_losses": result.losses[:3], "last_losses": result.losses[-3:]}, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m memq.evaluate.direct_cli train ...`` (the same as ``memq ablation train ...``)."""
    import logging
    import sys

    from ..errors import MemQError

    parser = argparse.ArgumentParser(prog="memq")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["ablation", *(sys.argv[1:] if argv is None else argv)])
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.handler(args) or 0)
    except MemQError as exc:
        print(f"memq: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
