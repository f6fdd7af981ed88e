"""Planner speed on this machine: model load time, tokens/s and ms per question, LoRA training s/step.

    .venv/bin/python benchmarks/bench_planner.py --models smollm2 --questions 8 --threads 2
    .venv/bin/python benchmarks/bench_planner.py --models qwen2.5-coder-0.5b --adapter DIR --train-steps 0

For each model: the load time of the converted safetensors copy (the one-time
GGUF conversion is reported separately when it happens), then the fine-tuned
planner (``--adapter``, or the bare base model with the Table 9 prompt when no
adapter is given: same speed) and the few-shot planner (k examples) on the
first N WebQSP dev questions, batched; then ``--train-steps`` LoRA steps
(batch ``--train-batch``) to time training. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _timed_plans(planner, golds) -> dict:
    from memq.plan.evaluate import score_plan, summarise

    llm = planner.llm
    tokens0, calls0 = llm.tokens, llm.calls
    start = time.perf_counter()
    raws = planner.raw_many([(g.question, g.entities) for g in golds])
    took = time.perf_counter() - start
    tokens = llm.tokens - tokens0
    return {"questions": len(golds), "seconds": round(took, 2), "new_tokens": tokens,
            "tokens_per_s": round(tokens / took, 2), "ms_per_question": round(1000 * took / len(golds), 1),
            "llm_calls": llm.calls - calls0,
            "plan_metrics": summarise([score_plan(g, r) for g, r in zip(golds, raws, strict=True)])}


def bench_model(name: str, args) -> dict:
    import torch

    from memq.llm import LocalLLM, cache_root, resolve_model
    from memq.plan.data import load_split
    from memq.plan.fewshot import FewShotPlanner
    from memq.plan.planner import BatchPlanner, FineTunedPlanner
    from memq.plan.prompt import planner_prompt

    out: dict = {"model": name, "threads": torch.get_num_threads()}
    start = time.perf_counter()
    source = resolve_model(name)  # converts once if needed
    out["resolve_or_convert_s"] = round(time.perf_counter() - start, 2)
    llm = LocalLLM(name, batch_size=args.batch_size)
    start = time.perf_counter()
    llm.load()
    out["load_s"] = round(time.perf_counter() - start, 2)
    out["sha256"] = source.sha256[:16]
    golds = load_split("webqsp", "dev")[:args.questions]

    if args.adapter:
        planner = FineTunedPlanner(args.adapter, base=name, batch_size=args.batch_size)
        out["finetuned_adapter"] = str(args.adapter)
    else:
        class ZeroShot(BatchPlanner):  # the same prompt and decoding as FineTunedPlanner, no adapter
            def __init__(self, llm) -> None:
                self._llm = llm
                self.name = f"zero-shot:{llm.model}"

            @property
            def llm(self):
                return self._llm

            def prompt(self, question, entities):
                return planner_prompt(question, entities)

        planner = ZeroShot(llm)
    out["finetuned_or_zero_shot"] = _timed_plans(planner, golds)
    few = FewShotPlanner(llm, dataset="webqsp", k=args.k)
    few.nearest("warm up the example index")
    out[f"fewshot_k{args.k}"] = _timed_plans(few, golds)

    if args.train_steps:
        from memq.plan.finetune import TrainConfig, train

        plans = load_split("webqsp", "train")
        with tempfile.TemporaryDirectory(dir=cache_root()) as tmp:
            cfg = TrainConfig(base=name, max_steps=args.train_steps, batch_size=args.train_batch,
                              checkpoint_every=10**6)
            result = train(plans[: args.train_steps * args.train_batch], Path(tmp) / "a", cfg)
        per_step = result.seconds / result.steps
        steps_per_epoch = -(-len(plans) // args.train_batch)
        out["training"] = {"batch_size": args.train_batch, "steps": result.steps, "s_per_step": round(per_step, 2),
                           "steps_per_epoch": steps_per_epoch,
                           "h_per_epoch": round(per_step * steps_per_epoch / 3600, 2),
                           "losses": [round(x, 3) for x in result.losses]}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="smollm2", help="comma-separated: smollm2,qwen2.5-coder-0.5b")
    parser.add_argument("--adapter", help="fine-tuned planner adapter (its base must be the model benchmarked)")
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--train-steps", type=int, default=3)
    parser.add_argument("--train-batch", type=int, default=8)
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "2")))
    parser.add_argument("--json-out")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    report = {"machine": {"cpus": os.cpu_count(), "torch": torch.__version__}, "models": []}
    for name in [m for m in args.models.split(",") if m]:
        report["models"].append(bench_model(name, args))
    text = json.dumps(report, indent=2)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
