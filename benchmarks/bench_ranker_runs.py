"""How long the statement ranker takes over a step's candidates in runs of each size, and whether its logits move.

    .venv/bin/python benchmarks/bench_ranker_runs.py --data webqsp-dev.jsonl [--runtime onnx onnx-int8]
        [--sizes 1 4 8 16 32 64] [--pool 160] [--steps 200] [--json F.json]

``--data``: a group file of ``memq planner ranker data`` (each Find step's query, the question with the plan so far,
and its candidates). The committed ranker (``--ranker``) scores the ``--pool`` candidates of each of the first
``--steps`` steps, in runs of each size (:data:`memq.plan.ranker_onnx.BATCH` is the planner's), once to warm up and
once timed. Prints, per runtime and size: the seconds, the largest difference from the logits of the first size,
how many steps gave every logit bit for bit, and recall@1 of the gold statement over the steps whose pool holds it.
float32 logits do not depend on the run; int8 ones do (one scale quantises all the activations of a run), which is
why the int8 ranker keeps the size its plans were chosen with (docs/planner.md, "The float32 ranker in runs of 16
pairs").
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def time_runs(ranker, steps: list[tuple[str, list[str], int | None]], sizes: list[int]) -> list[dict]:
    """For each size: ``ranker`` (``score(query, candidates)``, its ``batch_size`` set per size) over ``steps``
    (query, candidates, the gold candidate's index or None), warmed up once, then timed; each row with the largest
    difference from the first size's logits, the steps whose logits are all the same, and recall@1 over the steps
    with a gold index."""
    rows, first = [], None
    for size in sizes:
        ranker.batch_size = size
        for query, candidates, _ in steps[:3]:  # warm-up
            ranker.score(query, candidates)
        start = time.perf_counter()
        logits = [ranker.score(query, candidates) for query, candidates, _ in steps]
        seconds = time.perf_counter() - start
        first = first if first is not None else logits
        golds = [(s, gold) for s, (_, _, gold) in zip(logits, steps, strict=True) if gold is not None]
        rows.append({"size": size, "seconds": round(seconds, 3),
                     "pairs": sum(len(c) for _, c, _ in steps),
                     "max_abs_diff": float(max((np.abs(a - b).max() for a, b in zip(logits, first, strict=True)),
                                               default=0.0)),
                     "steps_bit_for_bit": sum(bool(np.array_equal(a, b)) for a, b in zip(logits, first, strict=True)),
                     "recall@1": round(sum(int(np.argmax(s) == g) for s, g in golds) / max(1, len(golds)), 4)})
    return rows


def read_steps(path: str, pool: int, limit: int) -> list[tuple[str, list[str], int | None]]:
    """The first ``limit`` Find steps of a group file: (query, its ``pool`` first candidates, the gold's index)."""
    from memq.plan.rank_data import read_groups

    steps = []
    for group in read_groups(path):
        if group.get("step") is None:
            continue
        texts = [t for t, _ in group["candidates"]][:pool]
        gold = group.get("positive")
        steps.append((group["query"], texts, texts.index(gold) if gold in texts else None))
        if len(steps) == limit:
            break
    return steps


def main(argv: list[str] | None = None) -> int:
    from memq.evaluate.summary import device_note
    from memq.plan.ranker import DEFAULT_RANKER, load_ranker
    from memq.plan.ranker_onnx import BATCH, ONNX_RUNTIMES

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="a group file of memq planner ranker data")
    ap.add_argument("--ranker", default=str(DEFAULT_RANKER))
    ap.add_argument("--runtime", nargs="+", default=list(ONNX_RUNTIMES), choices=ONNX_RUNTIMES)
    ap.add_argument("--sizes", nargs="+", type=int, default=[1, 4, 8, 16, 32, 64])
    ap.add_argument("--pool", type=int, default=160, help="candidates a step (the planner's rank_pool)")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    if any(s < 1 for s in args.sizes):
        ap.error(f"--sizes must be >= 1, got {args.sizes}")
    steps = read_steps(args.data, args.pool, args.steps)
    if not steps:
        ap.error(f"{args.data} holds no Find step")
    out = {"device": device_note(), "data": Path(args.data).name, "steps": len(steps), "pool": args.pool,
           "planner_sizes": BATCH, "runtimes": {}}
    print(f"{len(steps)} steps, {sum(len(c) for _, c, _ in steps)} pairs; the planner's runs: {BATCH}")
    for runtime in args.runtime:
        rows = time_runs(load_ranker(args.ranker, runtime=runtime), steps, args.sizes)
        out["runtimes"][runtime] = rows
        for row in rows:
            print(f"{runtime:<10} runs of {row['size']:>3}: {row['seconds']:7.2f} s  max |logit - runs of "
                  f"{args.sizes[0]}'s| {row['max_abs_diff']:.4f}  steps bit for bit {row['steps_bit_for_bit']}"
                  f"/{len(steps)}  recall@1 {row['recall@1']:.4f}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
