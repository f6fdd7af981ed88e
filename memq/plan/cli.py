"""``memq planner ...``: training data, LoRA training, plan-only evaluation, one-off planning."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from memq.cli import count
from memq.errors import MemQError

from .base import BACKENDS, DEFAULT_BACKEND
from .data import GRAILQA_SYNTHETIC
from .ranker import RUNTIMES
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

DATASETS = ("webqsp", "cwq", "grailqa")


def register(sub: argparse._SubParsersAction) -> None:
    planner = sub.add_parser("planner", help="the planning expert: data, training, evaluation")
    psub = planner.add_subparsers(dest="planner_command", required=True)

    data = psub.add_parser("data", help="derive (and write) the planner's training data from gold queries")
    data.add_argument("--dataset", choices=DATASETS + ("grailqa-synthetic",), required=True,
                      help="grailqa: train is every train question, dev the tuning part of GrailQA dev, test its "
                           "report part; grailqa-synthetic: the synthetic programs (train only)")
    data.add_argument("--split", choices=("train", "dev", "test"), required=True)
    data.add_argument("--out", help="write JSONL here (default: only derive and validate)")
    data.add_argument("--exclude-webqsp-test", action="store_true",
                      help="drop CWQ questions built from WebQSP test questions (ids WebQTest-N_...)")
    data.add_argument("--limit", type=count, help="only the first N questions")
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
    ev.add_argument("--limit", type=count, help="first N questions only")
    ev.add_argument("--out", help="write per-question scores (JSONL); `memq evaluate --plans FILE` re-scores "
                                  "its plans end to end with no model call")
    ev.add_argument("--record", action="store_true", help="store the dev metrics in the adapter's manifest.json")
    _common(ev)
    ev.set_defaults(handler=_eval)

    _register_ranker(psub)

    plan = psub.add_parser("plan", help="plan one question")
    plan.add_argument("question")
    plan.add_argument("--entity", action="append", default=[], help="topic entity name (repeatable)")
    plan.add_argument("--dataset", choices=DATASETS, default="webqsp")
    _planner_args(plan)
    _common(plan)
    plan.set_defaults(handler=_plan)


def _register_ranker(psub) -> None:
    ranker = psub.add_parser("ranker", help="the grounded planner's statement ranker: data, training, dev recall")
    rsub = ranker.add_subparsers(dest="ranker_command", required=True)
    data = rsub.add_parser("data", help="replay gold plans on the KG: each Find step's candidates and gold statement")
    data.add_argument("--dataset", choices=DATASETS + (GRAILQA_SYNTHETIC,), required=True,
                      help=f"{GRAILQA_SYNTHETIC}: GrailQA's synthetic programs (train only)")
    data.add_argument("--split", choices=("train", "dev"), required=True)
    data.add_argument("--out", required=True, help="JSONL of step groups (appended: a stopped run resumes)")
    data.add_argument("--memory", help="memory bank (default memory_bank/<dataset>; the synthetic programs': "
                                       "memory_bank/grailqa)")
    data.add_argument("--kg", help="KG file (default: the bundled benchmark KG of the dataset's questions)")
    data.add_argument("--schema-candidates", action="store_true",
                      help="where the KG gives a step no candidate, the statements that start from the gold "
                           "statement's class (memq.plan.rank_data.schema_index)")
    data.add_argument("--id-prefix", help="only questions whose id starts so (CWQ: WebQTrn-, whose facts the "
                                          "benchmark KG holds)")
    data.add_argument("--sample", type=int, help="a random sample of N questions (seeded by --seed)")
    data.add_argument("--seed", type=int, default=0)
    data.add_argument("--unseen-top", type=int, help="the candidates as the planner's search ranks them (default: "
                                                     "GrailQA's -1, else the grounded planner's default)")
    _common(data)
    data.set_defaults(handler=_ranker_data)

    train = rsub.add_parser("train", help="train the cross-encoder (resumable; CPU or --device cuda)")
    train.add_argument("--data", nargs="+", required=True,
                       help="group files, each FILE or FILE:N (its first N questions)")
    train.add_argument("--bound-only", action="store_true",
                       help="train only on steps whose gold statement is among the KG's candidates")
    train.add_argument("--dev", nargs="*", default=[], help="group files whose recall goes into the manifest")
    train.add_argument("--dev-pool", type=int, default=64,
                       help="candidates the ranker scores per dev step (the grounded planner's rank_pool is 160)")
    train.add_argument("--out", required=True)
    train.add_argument("--epochs", type=int, default=1)
    train.add_argument("--batch-groups", type=int, default=8, help="steps (groups) per batch")
    train.add_argument("--negatives", type=int, default=7, help="negatives per group")
    train.add_argument("--hard", type=int, default=4, help="of which the most similar to the question (or, after "
                                                           "bootstrapping, the ranker's own top mistakes)")
    train.add_argument("--lr", type=float, default=5e-5)
    train.add_argument("--bootstrap", type=int, default=0, help="groups rescored for hard negatives after each epoch "
                                                                "but the last (0: none)")
    train.add_argument("--init", help="start from this ranker instead of all-MiniLM-L6-v2")
    train.add_argument("--freeze-layers", type=int, default=0,
                       help="keep the embeddings and the first N encoder layers fixed (a cheaper CPU step)")
    train.add_argument("--threads", type=int, help="torch CPU threads")
    train.add_argument("--device", default="cpu", help="cpu, or cuda on a GPU machine")
    train.add_argument("--stop-after", type=float, help="minutes; stop with a checkpoint that --resume goes on from")
    train.add_argument("--resume", action="store_true")
    _common(train)
    train.set_defaults(handler=_ranker_train)

    ev = rsub.add_parser("eval", help="recall@1/5/10 of the gold statement per Find step, ranker beside MiniLM")
    ev.add_argument("--data", nargs="+", required=True, help="group files (memq planner ranker data)")
    ev.add_argument("--ranker", help="ranker directory (default: the committed memory_bank/ranker)")
    ev.add_argument("--pool", type=int, default=64, help="candidates the ranker scores per step")
    ev.add_argument("--minilm-only", action="store_true", help="only the MiniLM order")
    ev.add_argument("--runtime", choices=RUNTIMES,
                    help="where the ranker runs (default $MEMQ_RANKER_RUNTIME, else onnx; memq.plan.ranker_onnx)")
    ev.add_argument("--record", action="store_true", help="store the figures in the ranker's manifest")
    _common(ev)
    ev.set_defaults(handler=_ranker_eval)


def _ranker_data(args) -> int:
    import random

    from memq.memory.bank import MemoryBank
    from memq.pipeline import BENCHMARK_KG, GRAILQA_KG, open_kg

    from .data import load_split
    from .grounded import GroundedConfig, GroundedPlanner
    from .rank_data import read_groups, schema_index, write_groups
    from .search import GRAILQA_SEARCH

    plans = load_split(args.dataset, args.split)
    if args.id_prefix:
        plans = [p for p in plans if p.question_id.startswith(args.id_prefix)]
    if args.sample:
        random.Random(args.seed).shuffle(plans)
        plans = plans[:args.sample]
    grail = args.dataset in ("grailqa", GRAILQA_SYNTHETIC)
    bank = MemoryBank.load(args.memory or f"memory_bank/{'grailqa' if grail else args.dataset}")
    top = args.unseen_top if args.unseen_top is not None else (
        GRAILQA_SEARCH["unseen_top"] if grail else GroundedConfig().unseen_top)
    kg = args.kg or (GRAILQA_KG if grail else BENCHMARK_KG)
    planner = GroundedPlanner(None, kg=open_kg(kg), bank=bank, config=GroundedConfig(unseen_top=top))
    out = write_groups(plans, planner, args.out, progress=_progress(args, desc="replaying gold plans", unit="q"),
                       schema=schema_index(bank) if args.schema_candidates else None)
    groups = [g for g in read_groups(out) if g.get("step") is not None]
    summary = {"out": str(out), "questions": len(plans), "steps": len(groups),
               "gold_in_candidates": round(sum(bool(g["in_candidates"]) for g in groups) / max(1, len(groups)), 4),
               "from_schema": sum(bool(g.get("from_schema")) for g in groups)}
    print(json.dumps(summary, indent=2) if args.json else
          f"{summary['steps']} Find steps of {summary['questions']} questions -> {out} "
          f"(gold statement among the candidates: {summary['gold_in_candidates']:.3f}; from the schema: "
          f"{summary['from_schema']})")
    return 0


def _ranker_train(args) -> int:
    from .rank_train import train

    data = []
    for item in args.data:
        path, _, limit = item.rpartition(":")
        data.append((path, int(limit)) if path and limit.isdigit() else (item, None))
    log = (lambda msg: None) if args.json else (lambda msg: print(msg, file=sys.stderr, flush=True))
    out = train(data, args.out, base=args.init, epochs=args.epochs, batch_groups=args.batch_groups,
                negatives=args.negatives, hard=args.hard, lr=args.lr, bootstrap=args.bootstrap,
                bound_only=args.bound_only, freeze_layers=args.freeze_layers, threads=args.threads,
                stop_after=args.stop_after, resume=args.resume, device=args.device, dev=args.dev,
                dev_pool=args.dev_pool, log=log)
    manifest = json.loads((Path(out) / "manifest.json").read_text()) if (Path(out) / "manifest.json").is_file() \
        else {"stopped": "checkpoint written; --resume goes on"}
    print(json.dumps(manifest.get("dev_metrics", manifest), indent=2))
    return 0


def _ranker_eval(args) -> int:
    from .rank_data import read_groups
    from .rank_train import evaluate, record_dev
    from .ranker import default_ranker, load_ranker

    ranker = None
    if not args.minilm_only:
        path = args.ranker or default_ranker()
        if path is None:
            raise MemQError("no ranker: pass --ranker DIR, or --minilm-only")
        ranker = load_ranker(path, runtime=args.runtime)
    figures = {Path(p).name: evaluate(ranker, read_groups(p), pool=args.pool) for p in args.data}
    if args.record and ranker is not None:
        record_dev(ranker.path, figures)
    print(json.dumps(figures, indent=2))
    return 0


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
        summary["stopped"] = (f"--stop-after: checkpoint at step {result.steps} in {out / 'checkpoint'}; "
                              "--resume goes on")
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
            raise MemQError("--record stores dev metrics of a fine-tuned adapter: use it with --split dev, "
                            "no --fewshot")
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
