"""``memq evaluate`` and ``memq report``."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from ..cli import count


def register(sub: argparse._SubParsersAction) -> None:
    from ..ask import add_backend_arg, add_search_args

    ev = sub.add_parser("evaluate", help="score memq on a dataset split (resumable)")
    ev.add_argument("--dataset", choices=("webqsp", "cwq", "grailqa"), required=True)
    ev.add_argument("--split", choices=("dev", "test"), required=True)
    ev.add_argument("--planner", choices=("auto", "oracle", "fewshot", "finetuned", "grounded", "hybrid"),
                    required=True, help="auto: what memq ask, memq serve and memq.answer use for the dataset")
    ev.add_argument("--limit", type=count, help="only the first N questions")
    ev.add_argument("--questions", metavar="FILE",
                    help="a gold-annotated question file of your own (JSON, .gz too) in --dataset's format, "
                         "instead of the bundled split (build its KG with memq kg build-benchmark --questions)")
    ev.add_argument("--part", choices=("tune", "report"),
                    help="GrailQA dev only: its tuning part (settings are chosen there) or its report part (only "
                         "scored), split by logical form")
    ev.add_argument("--json", metavar="FILE", help="write the summary here")
    ev.add_argument("--per-question", metavar="FILE.jsonl", help="per-question records; a rerun resumes from it")
    ev.add_argument("--memory", help="memory bank directory (default: the committed bank of --dataset, "
                                     "memory_bank/DATASET)")
    ev.add_argument("--kg", help="RDF file for the embedded store")
    ev.add_argument("--endpoint", help="SPARQL endpoint URL")
    ev.add_argument("--adapter", help="LoRA adapter for --planner finetuned, grounded or hybrid")
    add_search_args(ev)
    add_backend_arg(ev)
    ev.add_argument("--rule", choices=("adaptive", "memq-code"), default=None)
    ev.add_argument("--gamma1", type=float)
    ev.add_argument("--gamma2", type=float)
    ev.add_argument("--unseen-penalty", type=float, dest="unseen_penalty",
                    help="recall ranks a statement no training query gave (a schema statement) this far below its "
                         "similarity (docs/memory.md)")
    ev.add_argument("--no-ground", action="store_true")
    ev.add_argument("--no-repair", action="store_true")
    ev.add_argument("--no-progress", action="store_true")
    ev.add_argument("--batch-size", type=int,
                    help="questions planned per generate call (default: Config.planner_batch_size; larger "
                         "batches are faster on CPU)")
    ev.add_argument("--plans", metavar="FILE.jsonl", nargs="+",
                    help="reuse the plans (and a direct-SPARQL ablation's outputs) of an earlier run's "
                         "per-question file(s) (no model calls for them); several files are read as one, a later "
                         "file's record of a question standing (the summary counts those whose plan it changes); "
                         "with --planner hybrid, free-generation records give the free plans and grounded records "
                         "of the same questions their rescues (a replaced record is not counted there)")
    ev.add_argument("--shard", metavar="K/N", type=_shard,
                    help="evaluate only every N-th question from the K-th (1 <= K <= N), after --limit, so that N "
                         "processes share a split; re-score their per-question files together with --plans")
    ev.add_argument("--record", action="store_true",
                    help="store the figures in the adapter's manifest.json as dev_metrics.plan_only_evaluation "
                         "(--split dev, --planner finetuned, the whole split or a --limit, no --shard)")
    ev.add_argument("--ablation", choices=("direct-sparql",),
                    help="also answer every question with this ablation (MemQ 'w/o PE, QRM')")
    ev.add_argument("--ablation-adapter", help="direct-SPARQL adapter of `memq ablation train`")
    ev.add_argument("--entities", choices=("gold", "linked"), default="gold",
                    help="linked: link each question's entities (memq.link) and report linking precision/recall "
                         "over the whole split, and F1 with linked beside gold entities over --limit questions")
    ev.add_argument("--link", action="append", default=[], metavar="KEY=VALUE",
                    help="with --entities linked: a linker setting (memq.link.settings.LinkConfig), e.g. required=1")
    ev.set_defaults(handler=_evaluate)

    rep = sub.add_parser("report", help="an HTML report of evaluation results")
    rep.add_argument("results", nargs="+", help="summary JSON files written by memq evaluate --json")
    rep.add_argument("--out", default="report.html")
    rep.set_defaults(handler=_report)


def _shard(text: str) -> tuple[int, int]:
    from .run import check_shard

    k, sep, n = text.partition("/")
    try:
        if not sep:
            raise ValueError(text)
        return check_shard((int(k), int(n)))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard must be K/N with 1 <= K <= N, got {text!r}") from None


def evaluation_config(args: argparse.Namespace):
    """The pipeline's :class:`~memq.pipeline.Config` for ``memq evaluate``: the flags, and the memory bank of the
    dataset evaluated unless ``--memory`` names one (CWQ questions are not to be answered from the WebQSP bank).
    GrailQA, unless the flags say otherwise: its own benchmark KG (``data/kg/grailqa.nq.gz``), the bank with its
    ontology (``memory_bank/grailqa+schema``, ``make memory-grailqa-schema``; the train-only bank when that is not
    built, with a warning). Every dataset: its search settings (``DATASET_SEARCH``), with the flags given over them."""
    import logging

    from ..ask import config_from, search_flags
    from ..pipeline import GRAILQA_KG, ROOT
    from ..pipeline.config import search_for

    config = config_from(args, by_bank=False)
    memory = ROOT / "memory_bank" / args.dataset
    if args.dataset == "grailqa":
        if not (args.kg or args.endpoint):
            config = replace(config, kg=GRAILQA_KG)
        schema = ROOT / "memory_bank" / "grailqa+schema"
        if (schema / "manifest.json").is_file():
            memory = schema
        elif not args.memory:
            logging.getLogger(__name__).warning(
                "%s is not built (make memory-grailqa-schema): answering from %s, which holds no ontology, so "
                "zero-shot questions lack their statements", schema, memory)
    # the dataset's search settings (said in the summary), each one a flag gives replaced by the flag
    config = replace(config, search=replace(search_for(args.dataset), **search_flags(args)))
    if not args.memory:
        config = replace(config, memory=str(memory))
    return config


def output_folder(path: str | None, flag: str) -> None:
    """Make the folder of an output file a flag names (``--json``, ``--per-question``) before the run, so that a long
    run does not end unable to write what it measured; a folder that cannot be made is an error naming both."""
    from ..errors import MemQError

    if not path:
        return
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MemQError(f"{flag} {path}: its folder cannot be made ({exc.strerror or exc})") from None


def _evaluate(args: argparse.Namespace) -> int:
    from ..errors import MemQError
    from ..pipeline import shown_path
    from .run import run

    output_folder(args.json, "--json")
    output_folder(args.per_question, "--per-question")
    config = evaluation_config(args)
    if args.batch_size is not None:
        config = replace(config, planner_batch_size=args.batch_size)
    recall = config.recall
    changes = {k: getattr(args, k) for k in ("rule", "gamma1", "gamma2", "unseen_penalty")
               if getattr(args, k) is not None}
    if changes:
        config = replace(config, recall=replace(recall, **changes))
    if args.ablation and not args.ablation_adapter:
        raise MemQError("--ablation direct-sparql needs --ablation-adapter DIR (see `memq ablation train`)")
    if args.planner == "auto":  # the default of memq ask / serve / memq.answer for this dataset's memory and planner
        from ..pipeline import Pipeline

        args.planner = Pipeline(replace(config, planner="auto", planner_dataset=args.dataset)).planner_kind
    adapter = recorded_adapter(args, config) if args.record else None
    if args.link and args.entities != "linked":
        raise MemQError("--link sets the linker of --entities linked")
    if args.entities == "linked":
        if args.record or args.ablation or args.questions:
            raise MemQError("--entities linked runs alone: without --record, --ablation or --questions")
        from ..link.evaluate import run_linked
        from ..link.settings import with_settings

        try:
            config = replace(config, link=with_settings(config.link, args.link))
        except ValueError as exc:
            raise MemQError(f"--link: {exc}") from None

        summary = run_linked(args.dataset, args.split, args.planner, config=config, limit=args.limit,
                             per_question=args.per_question, progress=not args.no_progress, plans_from=args.plans,
                             shard=args.shard, part=args.part)
    else:
        summary = run(args.dataset, args.split, args.planner, config=config, limit=args.limit,
                  per_question=args.per_question, progress=not args.no_progress,
                      ablation=args.ablation, ablation_adapter=args.ablation_adapter, plans_from=args.plans,
                      shard=args.shard, part=args.part, questions_file=args.questions)
    summary["per_question"] = shown_path(args.per_question)
    text = json.dumps(summary, indent=2)
    print(text)  # first: the summary is on stdout whatever happens to the file
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    if adapter is not None:
        record_plan_only(adapter, summary, limit=args.limit, summary_file=args.json)
    return 0


def recorded_adapter(args: argparse.Namespace, config):
    """The adapter whose manifest ``--record`` writes to, checked before anything runs: plan-only figures are
    those of a fine-tuned adapter's free plans on dev, over a prefix of the split (not a shard of it)."""
    from ..errors import MemQError
    from ..plan.planner import default_adapter

    if args.split != "dev" or args.planner != "finetuned":
        raise MemQError(f"--record stores a fine-tuned adapter's plan-only dev figures: use it with --split dev "
                        f"and --planner finetuned, not --split {args.split} --planner {args.planner}")
    if args.shard:
        raise MemQError(f"--record needs the whole split or a --limit prefix, not shard {args.shard[0]}/"
                        f"{args.shard[1]}: re-score the shards' files together with --plans, then --record")
    adapter = Path(config.adapter) if config.adapter else default_adapter(args.dataset)
    if adapter is None or not (adapter / "manifest.json").is_file():
        raise MemQError(f"--record: no adapter manifest at {adapter}/manifest.json")
    return adapter


def record_plan_only(adapter, summary: dict, *, limit: int | None, summary_file: str | None) -> dict:
    """Merge a dev run's figures into ``adapter``'s manifest as ``dev_metrics.plan_only_evaluation``."""
    from ..pipeline import shown_path
    from ..plan.finetune import update_manifest

    keys = ("questions", "answered_questions", "f1", "hits@1", "ehr", "ged", "errors", "kg", "kg_sha256", "memory",
            "backend", "device")
    block = {k: summary[k] for k in keys if k in summary}
    block["limit"] = limit
    if summary.get("plans_from"):
        block["plans_from"] = summary["plans_from"]["file"]
    if summary_file:
        block["summary"] = shown_path(summary_file)
    if summary.get("f1") is None:
        block["note"] = ("this split has no gold answers (CWQ dev is carved from CWQ train+dev, which has none): "
                         "EHR and GED against the gold queries only")
    dev = json.loads((Path(adapter) / "manifest.json").read_text()).get("dev_metrics") or {}
    return update_manifest(adapter, dev_metrics={**dev, "plan_only_evaluation": block})


def _report(args: argparse.Namespace) -> int:
    from .report import write_report

    path = write_report(args.results, args.out)
    print(f"wrote {path}")
    return 0
