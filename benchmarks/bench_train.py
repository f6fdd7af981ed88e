"""Seconds per LoRA training step on this machine, for each precision and bucketing setting, on the same batches.

    .venv/bin/python benchmarks/bench_train.py --steps 8 --threads 2 --json benchmarks/results/bench_train_cpu.json

Each setting trains the planner (:func:`memq.plan.finetune.train`, the code ``memq planner train`` runs) for
``--steps`` steps on the WebQSP training plans with the same seed, so every setting sees the same examples in the
same batches (bucketing changes which examples a batch holds, so ``--bucket`` settings are compared on their own
batches). The first ``--warmup`` steps are left out of the figures. Prints one line per setting and, with ``--json``,
writes every step's seconds and loss, so a reader can see the spread and not only the median.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _cpu() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def run(setting: str, args) -> dict:
    from memq.plan.data import load_split
    from memq.plan.finetune import TrainConfig, read_losses, train

    precision, bucket = setting.split("/")
    plans = load_split(args.data, "train")
    cfg = TrainConfig(base=args.base, max_steps=args.steps, batch_size=args.batch, checkpoint_every=10**6,
                      precision=precision, bucket=int(bucket), device="cpu")
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        train(plans, Path(tmp) / "a", cfg)
        wall = time.perf_counter() - start
        log = [json.loads(line) for line in (Path(tmp) / "a" / "train_log.jsonl").read_text().splitlines()]
        losses = read_losses(Path(tmp) / "a")
    timed = [row["seconds"] for row in log[args.warmup:]]
    return {"setting": setting, "precision": precision, "bucket": int(bucket), "steps": len(log),
            "warmup_steps_left_out": args.warmup, "s_per_step_median": round(statistics.median(timed), 2),
            "s_per_step_mean": round(statistics.fmean(timed), 2), "s_per_step_min": round(min(timed), 2),
            "s_per_step_max": round(max(timed), 2), "step_seconds": [row["seconds"] for row in log],
            "losses": [round(x, 4) for x in losses], "wall_seconds_with_load": round(wall, 1)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--settings", nargs="+", default=["fp32/50", "bf16/50"], metavar="PRECISION/BUCKET",
                   help="precision (fp32, bf16) and --bucket of each run (default: fp32/50 bf16/50)")
    p.add_argument("--data", default="webqsp", choices=("webqsp", "cwq"))
    p.add_argument("--base", default="qwen2.5-coder-0.5b")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", help="write the figures here")
    args = p.parse_args(argv)
    if args.steps <= args.warmup:
        p.error(f"--steps must be more than --warmup ({args.warmup}), got {args.steps}")
    import torch

    torch.set_num_threads(args.threads)
    out = {"what": f"LoRA r=8 training steps of the {args.base} planner on {args.data} train, batch {args.batch}",
           "machine": f"CPU: {_cpu()}, {args.threads} torch threads", "torch": torch.__version__,
           "cpu_bf16_native": bool(getattr(torch.backends.mkldnn, "is_available", lambda: False)())
           and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()),
           "command": "benchmarks/bench_train.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "runs": []}
    for setting in args.settings:
        row = run(setting, args)
        out["runs"].append(row)
        print(f"{setting:10s} median {row['s_per_step_median']:6.2f} s/step  mean {row['s_per_step_mean']:6.2f}  "
              f"range {row['s_per_step_min']}-{row['s_per_step_max']}  losses {row['losses'][:3]} ... "
              f"{row['losses'][-2:]}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
