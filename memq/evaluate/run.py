"""Score memq on a dataset split, question by question, resumably.

Answer-level numbers (Hits@1, F1) are measured on the KG the run uses: by
default the bundled *benchmark KG*, synthesised from the gold annotations.
They are NOT comparable to numbers measured on full Freebase. EHR and GED
compare the reconstructed query with the gold query and need no KG.

Every question counts: a question whose planning, recall, reconstruction or
execution raises scores 0 and keeps its place in the denominator.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, replace
from pathlib import Path

from .. import datasets
from ..errors import MemQError, PlanParseError
from ..files import sha256_file
from ..types import Plan
from .direct import ABLATIONS, DirectSparqlModel, evaluate_direct
from .saved import hybrid_records, load_records, plan_of, plan_record, record_log, saved_plan  # noqa: F401 - re-exported
from .scoring import error_stage, score
from .summary import breakdown, device_note, summarise, summarise_ablation

log = logging.getLogger(__name__)

PLANNERS = ("oracle", "fewshot", "finetuned", "grounded", "hybrid")
PARTS = ("tune", "report")


def questions_for(dataset: str, split: str, part: str | None = None) -> list:
    """``dev`` is carved from train (memq.plan.data.split_of), except GrailQA's, which is its own dev file (the
    349 bundled questions; its test set is not public); ``test`` is the official test set. ``part``
    (GrailQA dev only): its ``tune`` or ``report`` part (:func:`memq.plan.data.grailqa_part`)."""
    if part is not None and (dataset, split, part in PARTS) != ("grailqa", "dev", True):
        raise ValueError(f"part {part!r}: GrailQA dev has the parts {', '.join(PARTS)}; "
                         f"{dataset} {split} has none")
    if dataset == "grailqa":
        if split != "dev":
            raise ValueError("GrailQA has no public test set: evaluate on --split dev")
        from ..plan.data import grailqa_part

        return [q for q in datasets.load("grailqa", "dev") if part is None or grailqa_part(q.id) == part]
    if split == "test":
        return datasets.load(dataset, "test")
    if split == "dev":
        from ..plan.data import split_of

        return [q for q in datasets.load(dataset, "train") if split_of(q.id) == "dev"]
    raise ValueError(f"unknown evaluation split {split!r}; expected dev or test")


def check_limit(limit: int) -> int:
    """``limit`` (the first N questions) when it is a whole number >= 0; ValueError names it otherwise (a negative one
    would slice from the end: -1 left the last question out)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"limit is the number of questions, a whole number >= 0; got {limit!r}")
    return limit


def part_block(part: str) -> dict:
    """A summary's ``part``: which part of GrailQA dev was run, and what it is for."""
    return {"name": part, "note": "GrailQA dev split by logical form (memq.plan.data.grailqa_part): "
            + ("settings are chosen on this part" if part == "tune" else "this part is only scored")}


def oracle_plan(question, describe) -> tuple[Plan, dict[str, str]]:
    """The plan derived from the gold query, and the topic entities of the parse it came from."""
    from ..plan.derive import derive_plan

    derived = derive_plan(question, describe)
    plan = Plan(steps=list(derived.steps), raw="\n".join(s.text for s in derived.steps))
    return plan, dict(derived.entities)


def evaluate_question(pipeline, question, planner: str, describe=None, planned=None, optional=None,
                      linked: bool = False) -> dict:
    """Score one question. ``planned`` is a plan made beforehand in a batch: ``(Plan or MemQError, seconds)``;
    ``optional``: entities the plan may name but need not (:meth:`memq.pipeline.Pipeline.answer`). ``linked``: the
    question is asked without entities, as ``memq.answer(question)`` is, and the pipeline links them."""
    entities = None if linked else dict(question.parses[0].topic_entities)
    record = {"id": question.id, "question": question.question, "planner": planner}
    t0 = time.perf_counter()
    sparql = None
    saved_rescue_s = 0.0  # a saved rescue's planning time (then), counted in the latency as a saved plan's is
    try:
        plan = None
        if planned is not None:
            plan, seconds = planned
            record["plan_s"] = round(seconds, 4)
            record["llm_calls"] = 1
            if isinstance(plan, PlanParseError) and planner == "hybrid":  # the rescue plans instead
                from ..plan.hybrid import unreadable

                plan = unreadable(plan)
            if isinstance(plan, Exception):
                raise plan
            record.update(plan_record(plan))  # kept even if a later stage fails (``--plans`` re-scores it)
            if plan.cost:
                record["llm_calls"] = plan.cost.get("llm_calls", 1)
        elif planner == "oracle":
            try:
                plan, entities = oracle_plan(question, describe)
            except MemQError as exc:
                raise PlanParseError(f"no oracle plan: {exc}") from exc
        answer = pipeline.answer(question.question, entities, plan=plan, optional=optional)
        sparql = answer.sparql
        predicted = [i for i, _ in answer.answers]
        # the hybrid planner's grounded plan, when the free plan found nothing: saved, so that re-scoring needs
        # no model call, with the planning time it cost
        rescue = plan.rescue if plan is not None and "rescue" in answer.trace.cost else None
        if rescue is not None:
            record["rescue"] = {**plan_record(rescue), "plan_s": round(rescue.cost.get("seconds", 0.0), 4)}
            if "plan_from" in rescue.cost:
                saved_rescue_s = rescue.cost.get("seconds", 0.0)
        if linked:
            record["links"] = answer.trace.links
        record.update(answers=answer.answers, sparql=sparql, plan=[s.text for s in answer.plan.steps],
                      plan_raw=(plan.raw if rescue is not None else answer.plan.raw) or record.get("plan_raw", ""),
                      fallbacks=answer.trace.fallbacks,
                      llm_calls=record.get("llm_calls", 0) + answer.trace.llm_calls,
                      timings={k: round(v, 4) for k, v in answer.trace.timings.items()},
                      recalled=[[r.step_index, r.statement.id, round(r.score, 4)] for r in answer.recalled])
        if answer.trace.plans:
            record["plans_tried"] = answer.trace.plans
        error = None
    except Exception as exc:  # noqa: BLE001 - every failure is scored 0 and recorded with its stage
        predicted = []
        error = error_stage(exc)
        record.update(answers=[], exception=f"{type(exc).__name__}: {exc}", llm_calls=record.get("llm_calls", 0))
    record["latency_s"] = round(time.perf_counter() - t0 + record.get("plan_s", 0.0) + saved_rescue_s, 4)
    golds = score(record, question, predicted, sparql, error)
    record["gold"] = golds[0] if golds else None
    return record


def check_shard(shard) -> tuple[int, int]:
    """``shard`` as ``(k, n)`` when it names shard k of n (1 <= k <= n); a ValueError naming it otherwise."""
    try:
        k, n = shard
    except (TypeError, ValueError):
        k = n = None
    if not (isinstance(k, int) and isinstance(n, int) and 1 <= k <= n):
        raise ValueError(f"shard must be (k, n) with 1 <= k <= n, got {shard!r}")
    return k, n


def for_dataset(config, dataset: str):
    """``config`` for ``dataset``'s questions: its few-shot examples and adapter, and GrailQA's convention that
    every node of a query differs (``datasets.DISTINCT_NODES``), as in its gold queries. A linked run
    (:func:`memq.link.evaluate.run_linked`) takes the same."""
    config = replace(config, planner_dataset=dataset)
    return replace(config, distinct_nodes=True) if dataset in datasets.DISTINCT_NODES else config


def run(dataset: str, split: str, planner: str, *, config=None, limit: int | None = None,
        per_question: str | Path | None = None, progress: bool = True, pipeline=None,
        ablation: str | None = None, ablation_adapter: str | Path | None = None, ablation_model=None,
        batch_size: int | None = None, plans_from: str | Path | list[str | Path] | None = None,
        shard: tuple[int, int] | None = None, part: str | None = None,
        questions_file: str | Path | None = None) -> dict:
    """Evaluate and return the summary; ``per_question`` (JSONL) makes the run resumable. ``part``: GrailQA
    dev's ``tune`` or ``report`` part (:func:`questions_for`). ``questions_file``: a user's own gold-annotated
    question file in ``dataset``'s format (:func:`memq.datasets.load_file`) instead of the bundled split.

    ``batch_size``: questions planned per generate call (default: ``config.planner_batch_size``).

    ``plans_from`` (an earlier run's per-question file, same dataset and LLM planner) reuses its plans
    instead of calling the model: each question keeps the planning time and LLM call it cost then, and
    the summary says where its plans came from. Questions the file lacks are planned afresh. Several files
    (the per-question files of a sharded run) are read as one.

    ``shard=(k, n)`` (1 <= k <= n) evaluates only every n-th question from the k-th, after ``limit``, so
    that n processes together cover the split; re-scoring their files with ``plans_from`` gives the whole
    split's summary with no model call.

    ``ablation="direct-sparql"`` also answers every question with the direct-SPARQL model
    (``ablation_adapter``, or a ready ``ablation_model``): each record gets an ``ablation`` field and the
    summary an ``ablation`` block with the same metric keys. A resumed run fills in missing ablations.
    With ``plans_from``, the model's outputs saved there (a run that had the same ablation) are run again
    instead of generated, each keeping the generation time it cost then.
    """
    from ..pipeline import Config, Pipeline, shown_path

    if planner not in PLANNERS:
        raise ValueError(f"unknown planner {planner!r}; expected one of {', '.join(PLANNERS)}")
    config = for_dataset(config or Config(), dataset)
    if planner == "oracle":
        config = replace(config, planner="given")
    else:
        config = replace(config, planner=planner)
    pipeline = pipeline or Pipeline(config)
    batch_size = batch_size or config.planner_batch_size
    if questions_file is not None:
        if part is not None:
            raise ValueError("part names a part of GrailQA dev; a questions file has none")
        questions = datasets.load_file(questions_file, dataset, split)
    else:
        questions = questions_for(dataset, split, part)
    if limit is not None:
        questions = questions[:check_limit(limit)]
    if shard is not None:
        k, n = check_shard(shard)
        questions = questions[k - 1::n]
    done: dict[str, dict] = {}
    path = Path(per_question) if per_question else None
    if path and path.exists():
        done = load_records(path)
        log.info("resuming: %d questions already scored in %s", len(done), path)
    saved: dict[str, dict] = {}
    overridden: dict[str, None] = {}  # questions whose plan a later file of plans_from replaced, once each
    if plans_from is not None:
        if planner == "oracle":
            raise ValueError("plans_from reuses an LLM planner's plans; the oracle derives its own")
        files = [plans_from] if isinstance(plans_from, (str, Path)) else list(plans_from)
        if planner == "hybrid":  # free plans and grounded rescues may come from separate files
            saved = hybrid_records([r for file in files for r in load_records(file).values()])
        else:
            for file in files:
                for qid, rec in load_records(file).items():
                    if qid in saved and plan_of(saved[qid]) != plan_of(rec):
                        overridden[qid] = None
                    saved[qid] = rec
        plans_from = ", ".join(map(shown_path, files))  # as records and the summary show it
        if overridden:  # shards hold no question twice; a file that overrides another is said so
            log.warning("%d question(s) have another plan in a later --plans file, whose plan stands: %s",
                        len(overridden), ", ".join(list(overridden)[:5]) + (" ..." if len(overridden) > 5 else ""))
        planners = {r.get("planner") for r in saved.values()}
        if planners - ({"hybrid", "finetuned"} if planner == "hybrid" else {planner}):
            raise ValueError(f"{plans_from} holds plans of {sorted(map(str, planners))}, not {planner!r}")
    # question id -> (an earlier run's direct-SPARQL output, the generation time it cost then)
    saved_outputs = {qid: out for qid, r in saved.items() if (out := _saved_output(r)) is not None}
    describe = None
    if planner == "oracle":
        from ..plan.data import template_describe

        describe = template_describe()
    model = None
    if ablation is not None:
        if ablation not in ABLATIONS:
            raise ValueError(f"unknown ablation {ablation!r}; expected one of {', '.join(ABLATIONS)}")
        model = ablation_model or DirectSparqlModel(ablation_adapter, batch_size=batch_size)
    todo = [q for q in questions if q.id not in done or (model is not None and not done[q.id].get("ablation"))]
    # LLM planners plan a batch of questions in one generate call; each question is charged its share
    # of the time and one LLM call (one prompt).
    size = max(1, getattr(model, "batch_size", 1), 1 if planner == "oracle" else batch_size)
    backends: set[str | None] = set()
    warm_s = None
    if todo:  # one-off loads before the first question, so that its time does not carry them
        t0 = time.perf_counter()
        pipeline.warm_up(planner=planner != "oracle" and any(q.id not in done and q.id not in saved for q in todo))
        warm_s = time.perf_counter() - t0
    with record_log(path, len(todo), f"{dataset}/{split}/{planner}", progress) as write:
        for i in range(0, len(todo), size):
            chunk = todo[i:i + size]
            outputs: dict[str, tuple[str, float]] = {}  # question id -> (the ablation's raw output, its time)
            if model is not None:
                outputs = {q.id: saved_outputs[q.id] for q in chunk if q.id in saved_outputs}
                need = [q for q in chunk if q.id not in outputs]
                if need:
                    t0 = time.perf_counter()
                    raws = model.generate([(q.question, dict(q.parses[0].topic_entities)) for q in need])
                    share = (time.perf_counter() - t0) / len(need)
                    outputs.update((q.id, (raw, share)) for q, raw in zip(need, raws, strict=True))
            planned: list = [None] * len(chunk)
            fresh = [q for q in chunk if q.id not in done]
            reused = {q.id: saved_plan(saved[q.id], dict(q.parses[0].topic_entities)) for q in fresh if q.id in saved}
            fresh = [q for q in fresh if q.id not in reused]
            if planner != "oracle" and fresh and hasattr(pipeline.planner, "plan_many"):
                t0 = time.perf_counter()
                try:
                    plans = pipeline.planner.plan_many([(q.question, dict(q.parses[0].topic_entities))
                                                        for q in fresh])
                except MemQError as exc:
                    plans = [exc] * len(fresh)
                each = (time.perf_counter() - t0) / len(fresh)
                by_id = {q.id: (p, each) for q, p in zip(fresh, plans, strict=True)}
                planned = [by_id.get(q.id) for q in chunk]
                backend = {"backend": getattr(pipeline.planner, "backend_used", None),
                           "fallbacks": list(getattr(pipeline.planner, "fallbacks", ()))}
                backends.add(backend["backend"])
            if reused:
                planned = [reused.get(q.id, p) for q, p in zip(chunk, planned, strict=True)]
            for j, q in enumerate(chunk):
                if q.id in done:
                    rec = done[q.id]
                else:
                    rec = evaluate_question(pipeline, q, planner, describe, planned[j])
                    if q.id in reused:
                        rec["plan_from"] = str(plans_from)
                    elif planned[j] is not None:  # planned now: the backend that ran, and its fallbacks
                        rec["backend"] = backend["backend"]
                        rec["fallbacks"] = backend["fallbacks"] + rec.get("fallbacks", [])
                if model is not None:
                    raw, generate_s = outputs[q.id]
                    rec["ablation"] = evaluate_direct(pipeline, q, raw, generate_s)
                    if q.id in saved_outputs:
                        rec["ablation"]["raw_from"] = str(plans_from)
                done[q.id] = rec
                write(rec)
    records = [done[q.id] for q in questions if q.id in done]
    summary = summarise(records, dataset=dataset, split=split, planner=planner,
                        kg=config.endpoint or Path(config.kg_file).name)
    if any(q.level or q.function for q in questions):
        summary.update(breakdown(records, questions))
    summary["memory"] = Path(config.memory).name
    included = getattr(pipeline.bank, "info", {}).get("included")  # the banks its manifest includes (schema)
    if included:
        summary["memory_includes"] = [Path(p).name for p in included]
    if not config.endpoint and Path(config.kg_file).is_file():
        summary["kg_sha256"] = sha256_file(config.kg_file)[:16]  # which build of the KG file
    summary["device"] = device_note()
    if warm_s is not None:
        summary["warm_up_s"] = round(warm_s, 2)  # the loads before the first question, in no question's time
    if backends:  # the planner's LLM backend(s) for the questions planned in this run
        names = sorted(map(str, backends))
        summary["backend"] = names[0] if len(names) == 1 else names
        # which base weights its model ran (memq.llm.gguf_weights); a grounded or hybrid planner's llm is its free one's
        if "llamacpp" in names and (weights := getattr(getattr(pipeline.planner, "llm", None), "weights", None)):
            summary["weights"] = weights
            if getattr(pipeline.planner.llm, "lora", "runtime") != "runtime":
                summary["lora"] = pipeline.planner.llm.lora
            if planner in ("grounded", "hybrid"):  # line searches answered in one pass ($MEMQ_LLAMA_SEQUENCES)
                summary["llama_sequences"] = pipeline.planner.llm.sequences
    if questions_file is not None:
        summary["questions_file"] = shown_path(questions_file)
    if part is not None:
        summary["part"] = part_block(part)
    if shard is not None:
        k, n = shard
        summary["shard"] = {"index": k, "of": n, "note": f"questions {k}, {k + n}, {k + 2 * n}, ... of the split "
                            f"(shard {k} of {n}): a part of it, not all of it"}
    if planner in ("grounded", "hybrid"):
        summary["search"] = asdict(pipeline.search)
        from ..plan.ranker import ranker_choice

        ranker = ranker_choice(config.ranker, config.planner_dataset)
        summary["ranker"] = shown_path(ranker) if ranker is not None else None
        runtimes = {r.get("plan_cost", {}).get("ranker_runtime") for r in records if r.get("plan_cost")} - {None}
        if runtimes:  # where the ranker ran (memq.plan.ranker_onnx), as the plans made in this run say
            summary["ranker_runtime"] = sorted(runtimes)[0] if len(runtimes) == 1 else sorted(runtimes)
    if planner in ("finetuned", "grounded", "hybrid"):
        adapter = pipeline.planner_adapter
        summary["adapter"] = shown_path(adapter)
    if saved:
        summary["plans_from"] = {"file": str(plans_from),
                                 "questions": sum(1 for q in questions if q.id in saved)}
        if overridden:
            summary["plans_from"]["overridden_by_a_later_file"] = sum(1 for q in questions if q.id in overridden)
        if model is not None:
            summary["plans_from"]["ablation_outputs"] = sum(1 for q in questions if q.id in saved_outputs)
    if model is not None:
        summary["ablation"] = summarise_ablation(records, ablation, model)
    return summary


def _saved_output(record: dict) -> tuple[str, float] | None:
    """An earlier run's direct-SPARQL output for a question, with the generation time it cost, if it has one."""
    abl = record.get("ablation") or {}
    return (abl["raw"], abl.get("generate_s", 0.0)) if isinstance(abl.get("raw"), str) else None
