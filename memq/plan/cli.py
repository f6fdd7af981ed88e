"""``memq planner ...``: training data, LoRA training, plan-only evaluation, one-off planning."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from memq.errors import MemQError

from .base import BACKENDS, DEFAULT_BACKEND
from .train_flags import (
    add_training_args,
    data_info,
    result_summary,
    set_threads,
    stop_at,
    train_config,
    training_bar,
    training_plans,
)

DATASETS = ("webqsp", "cwq")


def register(sub: argparse._SubParsersAction) -> None:
    planner = sub.add_parser("planner", help="the planning expert: data, training, evaluation")
    psub = planner.add_subparsers(dest="planner_command", required=True)

    data = psub.add_parser("data", help="derive (and write) the planner's training data from gold queries")
    data.add_argument("--dataset", choices=DATASETS, required=True)
    data.add_argument("--split", choices=("train", "dev", "test"), required=True)
    data.add_argument("--out", help="write JSONL here (default: only derive and validate)")
    data.add_argument("--exclude-webqsp-test", action="store_true",
                      help="drop CWQ questions built from WebQSP test questions (ids WebQTest-N_...)")
    data.add_argument("--limit", type=int, help="only the first N questions")
    _common(data)
    data.set_defaults(handler=_data)

    train = psub.add_parser("train", help="fine-tune a LoRA planner (CPU or CUDA)")
    add_training_args(train)
    train.add_argument("--out", help="adapter directory (default: $MEMQ_CACHE/planners/<base>-<data>)")
    train.add_argument("--eval-limit", type=int, default=100, help="dev questions scored after training (0: none)")
    _common(train)
    train.set_defaults(handler=_train)

    ev = psub.add_parser("eval", help="plan-only metrics (exact plan match, step count) on dev or test")
    ev.add_argument("--split", choices=("dev", "test"), default="dev")
    ev.add_argument("--dataset", choices=DATASETS, default="webqsp")
    _planner_args(ev)
    ev.add_argument("--limit", type=int, help="first N questions only")
    ev.add_argument("--out", help="write per-question scores (JSONL); `memq evaluate --plans FILE` re-scores "
                                  "its plans end to end with no model call")
    ev.add_argument("--record", action="store_true", help="store the dev metrics in the adapter's manifest.json")
    _common(ev)
    ev.set_defaults(handler=_eval)

    plan = psub.add_parser("plan", help="plan one question")
    plan.add_argument("question")
    plan.add_argument("--entity", action="append", default=[], help="topic entity name (repeatable)")
    plan.add_argument("--dataset", choices=DATASETS, default="webqsp")
    _planner_args(plan)
    _common(plan)
    plan.set_defaults(handler=_plan)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--no-progress", action="store_true")


def _planner_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--adapter", help="fine-tuned planner directory (default: memory_bank/<dataset>/planner, "
                                     "else $MEMQ_CACHE/planners/qwen2.5-coder-0.5b-webqsp)")
    p.add_argument("--fewshot", action="store_true", help="few-shot planner instead of a fine-tuned one")
    p.add_argument("--llm", default="qwen2.5-coder-0.5b", help="few-shot model: a LocalLLM name or path")
    p.add_argument("--k", type=int, default=4, help="few-shot examples")
    p.add_argument("--device", default="cpu")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--threads", type=int, help="torch CPU threads")
    p.add_argument("--backend", choices=BACKENDS, default=DEFAULT_BACKEND,
                   help="the LLM runtime (transformers when llama-cpp-python is missing, with a warning)")


def _progress(args, **kw):
    if args.json or args.no_progress:
        return None
    from tqdm import tqdm  # type: ignore[import-untyped]

    return lambda it=None, **more: tqdm(it, file=sys.stderr, **{**kw, **more})


def _data(args) -> int:
    from .data import derive_split, write_jsonl

    report = derive_split(args.dataset, args.split, exclude_webqsp_test=args.exclude_webqsp_test,
                          limit=args.limit, progress=_progress(args, desc="deriving plans"))
    summary = report.summary()
    if args.out:
        summary["out"] = str(write_jsonl(report.plans, args.out))
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"{args.dataset}/{args.split}: {summary['plans']} plans from {summary['questions']} questions, "
              f"{summary['skipped']} skipped {summary['skipped_reasons']}" + (f" -> {args.out}" if args.out else ""))
    return 0


def default_adapter_dir(base: str, data: str) -> Path:
    from memq.llm import cache_root

    return cache_root() / "planners" / f"{base}-{data.replace('+', '-')}"


def _train(args) -> int:
    from .data import load_split
    from .finetune import train, update_manifest

    datasets, plans = training_plans(args)
    exclude = "webqsp" in datasets
    cfg = train_config(args)
    out = Path(args.out) if args.out else default_adapter_dir(args.base, args.data)
    info = data_info(datasets, excluded_webqsp_test_ids=exclude and "cwq" in datasets, limit=args.limit)
    bar = None if (args.json or args.no_progress) else training_bar("training")
    result = train(plans, out, cfg, data_info=info, resume=args.resume, progress=bar, stop_at=stop_at(args))
    summary: dict = {"out": str(out), **result_summary(result)}
    if not result.finished:
        summary["stopped"] = f"--stop-after: checkpoint at step {result.steps} in {out / 'checkpoint'}; --resume goes on"
        print(json.dumps(summary, indent=2) if args.json else summary["stopped"])
        return 0
    if args.eval_limit:
        from .evaluate import evaluate
        from .planner import FineTunedPlanner

        dev = load_split(datasets[0], "dev")[:args.eval_limit]
        planner = FineTunedPlanner(out, device=args.device, batch_size=args.batch_size, backend="transformers")
        metrics, _ = evaluate(planner, dev,
                              _progress(args, desc="dev eval"))
        metrics["split"] = f"{datasets[0]}/dev (first {len(dev)})"
        update_manifest(out, dev_metrics=metrics)
        summary["dev_metrics"] = metrics
    print(json.dumps(summary, indent=2) if args.json else
          f"adapter -> {out} ({result.steps} steps, {result.seconds:.0f} s)"
          + (f"; dev exact match {summary['dev_metrics']['exact_match']:.3f}" if args.eval_limit else ""))
    return 0


def make_planner(args):
    """The planner the flags name: few-shot, or a fine-tuned adapter."""
    from . import planner

    return planner.make_planner("fewshot" if args.fewshot else "finetuned", model=getattr(args, "llm", None) or
                                "qwen2.5-coder-0.5b", adapter=args.adapter, device=args.device,
                                dataset=args.dataset, k=getattr(args, "k", 4), batch_size=args.batch_size,
                                backend=getattr(args, "backend", DEFAULT_BACKEND))


def _eval(args) -> int:
    from .data import derive_split, load_split, to_json
    from .evaluate import evaluate

    set_threads(args)
    golds = load_split(args.dataset, "dev") if args.split == "dev" else derive_split(args.dataset, "test").plans
    if args.limit:
        golds = golds[:args.limit]
    planner = make_planner(args)
    metrics, scores = evaluate(planner, golds, _progress(args, desc=f"planning {args.split}"))
    metrics.update({"planner": planner.name, "dataset": args.dataset, "split": args.split,
                    "llm_calls": getattr(planner, "calls", None), "backend": planner.backend_used,
                    "fallbacks": list(getattr(planner, "fallbacks", ()))})
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            kind = "fewshot" if args.fewshot else "finetuned"
            for g, s in zip(golds, scores, strict=True):
                # ``id``, ``planner`` and ``plan_raw`` make the file a saved run for `memq evaluate --plans`
                # (plan-only evaluation end to end, no model call)
                fh.write(json.dumps({"id": g.question_id, "planner": kind, "plan_raw": s.predicted, **s.to_json(),
                                     "gold": to_json(g)["plan"]}, ensure_ascii=False) + "\n")
    if args.record:
        from .finetune import update_manifest

        if args.fewshot or args.split != "dev":
            raise MemQError("--record stores dev metrics of a fine-tuned adapter: use it with --split dev, no --fewshot")
        update_manifest(planner.adapter, dev_metrics={**metrics, "limit": args.limit})
    if args.json:
        print(json.dumps(metrics, indent=2))
    else:
        print(f"{args.dataset}/{args.split} ({metrics['questions']} questions, {planner.name}): exact plan match "
              f"{metrics['exact_match']:.3f}, step count {metrics['step_count_accuracy']:.3f}, "
              f"step kinds {metrics['step_kinds_accuracy']:.3f}, parsed {metrics['parse_rate']:.3f}")
    return 0


def _plan(args) -> int:
    set_threads(args)
    planner = make_planner(args)
    plan = planner.plan(args.question, args.entity)
    if args.json:
        print(json.dumps({"raw": plan.raw, "steps": [s.__dict__ for s in plan.steps], "dropped": plan.dropped},
                         indent=2))
    else:
        print("\n".join(s.text for s in plan.steps))
        for line, why in plan.dropped:
            print(f"  (dropped {line!r}: {why})", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m memq.plan.cli <command> ...`` (same as ``memq planner <command> ...``)."""
    from memq.cli import group_main

    return group_main(register, "planner", argv)


if __name__ == "__main__":
    sys.exit(main())
