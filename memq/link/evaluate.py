"""Linking precision and recall against the gold topic entities of a dataset split.

Two gold sets per question (its first parse, the one ``memq evaluate`` answers with):

* ``named``: the entities the question names. WebQSP: the annotated ``TopicEntityMid``; CWQ: the ``topic_entity``
  map of the ToG release (``data/cwq/cwq_test_tog.json.gz``), else every entity constant of the gold query.
* ``all``: every gold topic entity (WebQSP adds the constraint entities, such as Country or Marriage, and the
  other constants of the gold query).

Precision counts a linked entity as right when it is in ``all``. Counts are micro-averaged over questions.
"""

from __future__ import annotations

import logging
import statistics
import time

from memq.evaluate.metrics import p95

from .gold import gold_entities
from .mentions import HELD_OUT


def link_record(linker, question) -> dict:
    """One question's links, their time and their fit with the gold entities."""
    t0 = time.perf_counter()
    links = linker.link(question.question)
    seconds = time.perf_counter() - t0
    named, every = gold_entities(question)
    ids = [link.id for link in links]
    return {"linked": [link.to_json() for link in links], "link_ms": round(seconds * 1000, 3),
            "gold_named": sorted(named), "gold_all": sorted(every),
            "hits_named": len(named.intersection(ids)), "hits_all": len(every.intersection(ids))}


def _f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r else 0.0


def summarise_links(records: list[dict]) -> dict:
    """The ``linking`` block of a summary: precision, recall (named and all), F1, entities per question, time."""
    linked = sum(len(r["linked"]) for r in records)
    right = sum(r["hits_all"] for r in records)
    named = sum(len(r["gold_named"]) for r in records)
    every = sum(len(r["gold_all"]) for r in records)
    precision = right / linked if linked else 0.0
    recall_named = sum(r["hits_named"] for r in records) / named if named else 0.0
    recall_all = right / every if every else 0.0
    times = sorted(r["link_ms"] for r in records)
    return {
        "questions": len(records),
        "precision": round(precision, 4),
        "recall": round(recall_named, 4),
        "f1": round(_f1(precision, recall_named), 4),
        "recall_all": round(recall_all, 4),
        "f1_all": round(_f1(precision, recall_all), 4),
        "entities_per_question": round(linked / len(records), 3) if records else 0.0,
        "questions_without_entity": sum(1 for r in records if not r["linked"]),
        "questions_with_named_gold_found": sum(1 for r in records if r["gold_named"] and r["hits_named"]),
        "p50_ms": round(statistics.median(times), 3) if times else 0.0,
        "p95_ms": round(p95(times), 3),
        "note": ("recall: of the gold topic entities the question names (WebQSP TopicEntityMid; CWQ the ToG "
                 "topic_entity map); recall_all: of all gold topic entities (constraint entities and other "
                 "constants of the gold query too); precision: linked entities among all gold ones"),
    }


def summarise_constraints(questions, links: list[dict]) -> dict:
    """The suggested constraint entities (``link["suggested"]``) against the gold ones the question does not name
    (WebQSP's constraint entities, :func:`memq.link.constraints.constraint_entities`)."""
    from .constraints import constraint_entities

    truth = constraint_entities(questions)
    suggested = sum(len(link["suggested"]) for link in links)
    right = sum(len({s["id"] for s in link["suggested"]} & {m for m, _ in truth.get(q.id, ())})
                for q, link in zip(questions, links, strict=True))
    gold = sum(len(v) for v in truth.values())
    return {"suggested_per_question": round(suggested / len(links), 3) if links else 0.0,
            "precision": round(right / suggested, 4) if suggested else 0.0,
            "recall": round(right / gold, 4) if gold else 0.0, "gold": gold,
            "note": "constraint entities suggested by the nearest training questions, against the gold topic "
                    "entities the question does not name"}


# where a linked answer's F1 differs from the gold-entity one, by what the linker gave the planner (linked: the
# linked entities, second readings included, and the suggested constraint entities), checked in this order
LOSS_CLASSES = {
    "missed": "a named gold entity missed or misread",
    "constraint": "a constraint entity neither linked nor suggested",
    "extra": "every gold entity given, and others too",
    "same": "the same entities, another plan",
}


def loss_class(link: dict) -> str:
    """The :data:`LOSS_CLASSES` key of a question's ``linking`` record: a named gold entity not given; else a gold
    constraint entity not given; else other entities given too; else the same entities."""
    given = {x["id"] for x in link.get("linked") or ()} | {x["id"] for x in link.get("suggested") or ()}
    named, every = set(link.get("gold_named") or ()), set(link.get("gold_all") or ())
    if named - given:
        return "missed"
    if every - given:
        return "constraint"
    return "extra" if given - every else "same"


def summarise_losses(records: list[dict], ids: bool = False) -> dict:
    """The ``losses`` block of a linked run's summary: of its per-question ``records`` (``f1``, ``linking``,
    ``gold_entities``), the gap (gold-entity F1 less linked F1, over all of them) and, for each
    :data:`LOSS_CLASSES` class, the questions whose two F1s differ, the F1 it loses over all the records, and how
    many went down and up (``ids``: which)."""
    rows = {key: {"what": what, "questions": 0, "f1_lost": 0.0, "down": 0, "up": 0, **({"ids": []} if ids else {})}
            for key, what in LOSS_CLASSES.items()}
    n = len(records) or 1
    for r in records:
        linked, gold = r.get("f1") or 0.0, r["gold_entities"].get("f1") or 0.0
        if abs(linked - gold) < 1e-9:
            continue
        row = rows[loss_class(r["linking"])]
        row["questions"] += 1
        row["f1_lost"] += (gold - linked) / n
        row["down" if linked < gold else "up"] += 1
        if ids:
            row["ids"].append(r["id"])
    for row in rows.values():
        row["f1_lost"] = round(row["f1_lost"], 4)
    gap = sum((r["gold_entities"].get("f1") or 0.0) - (r.get("f1") or 0.0) for r in records) / n
    return {"gap": round(gap, 4), "differ": sum(row["questions"] for row in rows.values()), "classes": rows}


def linked_question(question, links: list[dict]):
    """``question`` with its first parse's topic entities replaced by the linked ones (the gold answers stay)."""
    from dataclasses import replace

    first = replace(question.parses[0], topic_entities=tuple((link["id"], link["name"]) for link in links))
    return replace(question, parses=(first, *question.parses[1:]))


def same_input(a: tuple, b: tuple) -> bool:
    """Whether two planner inputs ``(entities, optional, second)`` (:meth:`memq.pipeline.Pipeline.link`; gold
    entities are ``(gold, {}, ())``) make the same plan: the same entities (ids and names) in the same order (the
    prompt lists them so, and the planner starts from the first), the same ones left out of the prompt, and the same
    ones optional, or one entity only, where whether it is optional does not matter (the grounded planner's first
    line starts from it, so entity coverage never applies; a free planner's prompt names it either way)."""
    given = {**a[0], **a[1]}
    return (list(given.items()) == list({**b[0], **b[1]}.items()) and set(a[2]) == set(b[2])
            and (set(a[1]) == set(b[1]) or len(given) == 1))


def same_linking(saved: dict | None, link: dict) -> bool:
    """Whether a saved record's ``linking`` is ``link`` (its time and suggestions aside)."""
    def core(x: dict) -> dict:
        return {k: v for k, v in x.items() if k not in ("link_ms", "suggested")}

    return saved is not None and core(saved) == core(link)


def hold_out_dev(linker) -> None:
    """Give ``linker`` its own copy of its entity index, with the mention prior counted without the dev questions
    carved from train (:func:`memq.link.mentions.own_mentions`): a dev question's own gold entities never lift its
    spans (the cached index, shared with every other run, counts them). Once: a prior held out already stays."""
    from .mentions import own_mentions

    if "less dev" not in (linker.index.info.get("mentions_from") or ""):
        own_mentions(linker, hold_out_dev=True)


def run_linked(dataset: str, split: str, planner: str, *, config=None, limit: int | None = None,
               per_question=None, progress: bool = True, pipeline=None, plans_from=None, shard=None,
               part: str | None = None) -> dict:
    """``memq evaluate --entities linked``: linking over the whole split, and end to end over the first ``limit``
    questions, each answered twice in the same run, with the gold topic entities and with the linked ones.

    The linked answer is the one ``memq.answer(question)`` gives: the pipeline links the question itself, with its
    second readings, suggestions and fallbacks. When the planner gets what the gold entities give it
    (:func:`same_input`), the gold-entity answer is reused: the pipeline is deterministic for a question and its
    entities. ``per_question`` (JSONL) makes the run resumable.
    ``plans_from`` (an earlier gold-entity run's per-question files, as ``memq evaluate --plans`` reads them)
    gives the gold-entity answers their saved plans: only the linked ones are planned. ``shard=(k, n)``: every n-th
    of the first ``limit`` questions from the k-th, so that n processes share them; the shards' per-question files
    put together in one file give the whole summary on a run without ``shard`` (nothing is answered again).
    ``part``: GrailQA dev's ``tune`` or ``report`` part (:func:`memq.evaluate.run.questions_for`).
    """
    from dataclasses import asdict
    from dataclasses import replace as dc_replace
    from pathlib import Path

    from ..errors import LinkingError
    from ..evaluate.run import (
        check_limit,
        check_shard,
        evaluate_question,
        for_dataset,
        load_records,
        part_block,
        questions_for,
        record_log,
    )
    from ..evaluate.saved import hybrid_records, saved_plan
    from ..evaluate.summary import summarise
    from ..pipeline import Config, Pipeline, shown_path
    from ..types import Trace

    if planner == "oracle":
        raise ValueError("--entities linked needs an LLM planner: the oracle plans from the gold query's entities")
    config = dc_replace(for_dataset(config or Config(), dataset), planner=planner)  # GrailQA: distinct nodes
    pipeline = pipeline or Pipeline(config)
    if split == "dev" and dataset in HELD_OUT:  # GrailQA's dev set is a file of its own, not carved from train
        hold_out_dev(pipeline.linker)
    questions = questions_for(dataset, split, part)
    links = [link_record(pipeline.linker, q) for q in questions]
    block = summarise_links(links)
    for q, link in zip(questions, links, strict=True):
        link["suggested"] = [s.to_json() for s in pipeline.suggest(q.question, [x["id"] for x in link["linked"]])]
    block["constraints"] = summarise_constraints(questions, links)
    files = [plans_from] if isinstance(plans_from, (str, Path)) else list(plans_from or ())
    saved = [r for file in files for r in load_records(file).values()]
    saved = hybrid_records(saved) if planner == "hybrid" else {r["id"]: r for r in saved}
    todo = questions[:check_limit(limit)] if limit is not None else questions
    if shard is not None:
        k, n = check_shard(shard)
        todo = todo[k - 1::n]
    path = Path(per_question) if per_question else None
    done = load_records(path) if path and path.exists() else {}
    if any(q.id not in done for q in todo):
        pipeline.warm_up()  # the planner's one-off loads, in no question's time (the linking above loaded the rest)
    with record_log(path, len(todo), f"{dataset}/{split}/{planner}/linked", progress) as write:
        link_of = {q.id: link for q, link in zip(questions, links, strict=True)}
        repaired = 0
        for q in todo:
            link = link_of[q.id]
            if q.id in done:
                if same_linking(done[q.id].get("linking"), link):
                    write()
                else:  # an earlier --shard run gave it another question's linking: appended again, set right
                    done[q.id] = {**done[q.id], "linking": link}
                    repaired += 1
                    write(done[q.id])
                continue
            planned = saved_plan(saved[q.id], dict(q.parses[0].topic_entities)) if q.id in saved else None
            gold = evaluate_question(pipeline, q, planner, planned=planned)
            try:  # what the planner gets, as memq.answer(question) gives it
                same = same_input((dict(q.parses[0].topic_entities), {}, ()), pipeline.link(q.question, None, Trace()))
            except LinkingError:
                same = False
            linked = dict(gold) if same else evaluate_question(pipeline, q, planner, linked=True)
            done[q.id] = {**linked, "linking": link, "same_entities": same, "gold_entities": gold}
            write(done[q.id])
    if repaired:
        logging.getLogger(__name__).warning("%d saved records held another question's linking (a --shard run before "
                                            "the fix): their own is appended to %s", repaired, path)
    records = [done[q.id] for q in todo if q.id in done]
    kg = config.endpoint or Path(config.kg_file).name
    linked_summary = summarise(records, dataset=dataset, split=split, planner=planner, kg=kg)
    gold_summary = summarise([r["gold_entities"] for r in records], dataset=dataset, split=split, planner=planner,
                             kg=kg)
    if not records:  # --limit 0: linking alone
        linked_summary = {k: None for k in ("hits@1", "f1", "ehr", "ged")} | {
            k: linked_summary[k] for k in ("dataset", "split", "planner", "kg", "questions")}
        gold_summary = {"f1": None, "hits@1": None, "errors": {}}
    return {
        **linked_summary,
        "entities": "linked",
        "f1_gold_entities": gold_summary["f1"],
        "hits@1_gold_entities": gold_summary["hits@1"],
        "errors_gold_entities": gold_summary["errors"],
        "same_entities_as_gold": sum(1 for r in records if r["same_entities"]),
        "gold_entity_plans_from": ", ".join(map(shown_path, files)) or None,
        "linking": block,
        **({"losses": summarise_losses(records)} if records else {}),
        "end_to_end_note": (f"f1, hits@1, ehr, ged, errors: the first {len(records)} questions of the split answered "
                            "with the linked entities; *_gold_entities: the same questions, same run, with the gold "
                            f"topic entities; linking: all {len(questions)} questions of the split" if records else
                            f"linking only (--limit 0): all {len(questions)} questions of the split linked, none "
                            "answered end to end"),
        "entity_index": pipeline.linker.index.info.get("manifest", {}).get("counts"),
        "mentions_from": pipeline.linker.index.info.get("mentions_from"),
        "link_settings": asdict(pipeline.config.link),
        **({"shard": {"index": shard[0], "of": shard[1], "note": "end to end: every n-th question from the k-th "
                      "of the first --limit, a part of them"}} if shard is not None else {}),
        **({"part": part_block(part)} if part is not None else {}),
    }
