"""``memq ablation train``: the direct-SPARQL model of the "w/o PE, QRM" ablation.

Same data (the planner's derived training split), same trainer and the same
hyper-parameter flags and defaults as ``memq planner train``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..plan.train_flags import (
    add_training_args,
    data_info,
    result_summary,
    stop_at,
    train_config,
    training_bar,
    training_plans,
)


def register(sub: argparse._SubParsersAction) -> None:
    ab = sub.add_parser("ablation", help="ablations of the MemQ paper")
    ab_sub = ab.add_subparsers(dest="ablation_command", required=True)
    tr = ab_sub.add_parser("train", help="fine-tune the direct-SPARQL model (w/o PE, QRM)")
    add_training_args(tr)
    tr.add_argument("--like", metavar="PLANNER_DIR",
                    help="copy the training data (--data, --limit), base, steps, batch size, lr and LoRA r from this "
                         "planner adapter's manifest")
    tr.add_argument("--out", required=True, help="adapter directory")
    tr.add_argument("--no-progress", action="store_true")
    tr.set_defaults(handler=_train)


def _train(args: argparse.Namespace) -> int:
    from .direct import examples_from_plans, train_direct

    like = {}
    if args.like:
        from ..plan.planner import read_manifest

        m = read_manifest(args.like)
        _same_data(args, m["data"])
        h = m["hyper_parameters"]
        like = dict(base=m["base_model"]["ref"], max_steps=m["training"]["steps"], batch_size=h["batch_size"],
                    lr=h["lr"], lora_r=h["lora_r"], lora_alpha=h["lora_alpha"], epochs=h["epochs"])
    datasets, plans = training_plans(args)
    examples, skipped = examples_from_plans(plans)
    cfg = train_config(args, **like)
    info = data_info(datasets, same_questions_as="memq planner train", skipped=len(skipped), limit=args.limit,
                     like=str(args.like) if args.like else None)
    bar = None if args.no_progress else training_bar("training direct-SPARQL", unit="step")
    result = train_direct(examples, Path(args.out), cfg, data_info=info, resume=args.resume, progress=bar,
                          stop_at=stop_at(args))
    stopped = {} if result.finished else {
        "stopped": f"--stop-after: checkpoint at step {result.steps} in {Path(args.out) / 'checkpoint'}; "
                   "--resume goes on"}
    print(json.dumps({"out": str(args.out), "examples": len(examples), "skipped": len(skipped),
                      **result_summary(result, per_step=True), **stopped}, indent=2))
    return 0


def _same_data(args: argparse.Namespace, data: dict) -> None:
    """Take ``--data`` and ``--limit`` from the planner's manifest; a flag that names other data is an error."""
    from ..errors import MemQError

    planner_data = "+".join(data["datasets"])
    if args.data and args.data != planner_data:
        raise MemQError(f"--data {args.data!r} differs from the planner's training data {planner_data!r} (--like)")
    if args.limit and args.limit != data.get("limit"):
        raise MemQError(f"--limit {args.limit} differs from the planner's limit {data.get('limit')} (--like)")
    args.data, args.limit = planner_data, data.get("limit")


def main(argv: list[str] | None = None) -> int:
    """``python -m memq.evaluate.direct_cli train ...`` (the same as ``memq ablation train ...``)."""
    from ..cli import group_main

    return group_main(register, "ablation", argv)


if __name__ == "__main__":
    raise SystemExit(main())
