"""How long one llama.cpp forward pass takes on each base weights setting (memq.llm.gguf_weights), and how far
their log-probabilities are from f16's.

    .venv/bin/python benchmarks/bench_weights.py [--weights f16 bf16 q8_0] [--adapter memory_bank/grailqa/planner]
        [--threads 2] [--repeats 5] [--json F.json]

For each setting: the planner's base model with ``--adapter`` (the GGUF files are built once, as the planner builds
them), a planner prompt, then the median seconds of a pass over k = 1, 2, 4, 8, 16 and 32 new tokens (the grounded
planner's passes score 1 to about 30 tokens), and the largest difference from f16 in the log-probabilities of
a plan line's tokens after that prompt. Prints one row per setting and whether llama.cpp multiplies bf16 natively
(``memq.llm.gguf_weights.native_bf16``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SIZES = (1, 2, 4, 8, 16, 32)
QUESTION = "panta rhei is the successor engine to what video game engine?"
ENTITIES = {"m.02wz8d0": "Panta Rhei"}
LINE = "Find the predecessor engine of the computer game engine Panta Rhei, assign it to ?x0.\n"


def measure(weights: str, adapter: str, threads: int, repeats: int) -> dict:
    from memq.llm.kv_state import log_softmax_at
    from memq.llm.llamacpp import LlamaCppLLM
    from memq.plan.prompt import planner_prompt

    llm = LlamaCppLLM("qwen2.5-coder-0.5b", adapter=adapter, threads=threads, weights=weights)
    runner = llm.load().runner
    ids = llm.prompt_ids(planner_prompt(QUESTION, ENTITIES))
    line = llm.token_ids(LINE)
    rows = runner.logits(ids + line, len(ids))[:-1]
    logprobs = log_softmax_at(rows, line)
    seconds: dict[int, float] = {}
    for k in SIZES:
        times = []
        for _ in range(repeats):
            runner.truncate(len(ids))
            start = time.perf_counter()
            runner.logits(ids + (line * 4)[:k], len(ids) + 1, keep=False)  # k tokens, one pass
            times.append(time.perf_counter() - start)
        seconds[k] = round(statistics.median(times) * 1000, 1)
    return {"weights": weights, "gguf": llm.load().gguf.name, "ms_per_pass": seconds,
            "line_logprob": round(float(logprobs.sum()), 4), "token_logprobs": [float(x) for x in logprobs]}


def main(argv: list[str] | None = None) -> int:
    from memq.llm.gguf_weights import WEIGHTS, native_bf16

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--weights", nargs="+", default=["f16", "bf16", "q8_0"], choices=WEIGHTS)
    ap.add_argument("--adapter", default=str(ROOT / "memory_bank" / "grailqa" / "planner"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    rows = [measure(w, args.adapter, args.threads, args.repeats) for w in args.weights]
    base = next((r for r in rows if r["weights"] == "f16"), None)
    print(f"llama.cpp multiplies bf16 natively: {native_bf16()}; threads {args.threads}; median of {args.repeats}")
    print("weights  " + "  ".join(f"{k:>5} tok" for k in SIZES) + "   max |log p - f16's|")
    for row in rows:
        diff = (max(abs(a - b) for a, b in zip(row["token_logprobs"], base["token_logprobs"], strict=True))
                if base else float("nan"))
        row["max_abs_logprob_diff_vs_f16"] = round(diff, 5)
        print(f"{row['weights']:<8} " + "  ".join(f"{row['ms_per_pass'][k]:>6.1f} ms" for k in SIZES)
              + f"   {diff:.5f}")
    if args.json:
        from memq.evaluate.summary import device_note

        adapter = Path(args.adapter).resolve()
        shown = str(adapter.relative_to(ROOT)) if adapter.is_relative_to(ROOT) else adapter.name
        Path(args.json).write_text(json.dumps({"native_bf16": native_bf16(), "threads": args.threads,
                                               "device": device_note(), "adapter": shown, "rows": rows},
                                              indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
