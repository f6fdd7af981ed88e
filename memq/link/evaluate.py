"""Linking precision and recall against the gold topic entities of a dataset split.

Two gold sets per question (its first parse, the one ``memq evaluate`` answers with):

* ``named``: the entities the question names. WebQSP: the annotated ``TopicEntityMid``; CWQ: the ``topic_entity``
  map of the ToG release (``data/cwq/cwq_test_tog.json.gz``), else every entity constant of the gold query.
* ``all``: every gold topic entity (WebQSP adds the constraint entities, such as Country or Marriage, and the
  other constants of the gold query).

Precision counts a linked entity as right when it is in ``all``. Counts are micro-averaged over questions.
"""

from __future__ import annotations

import gzip
import json
import statistics
import time
from functools import lru_cache

from .. import datasets


@lru_cache(maxsize=4)
def _named_topics(dataset: str, split: str) -> dict[str, tuple[str, ...]]:
    if dataset == "webqsp":
        out = {}
        raw_splits = ("train",) if split in ("dev", "train") else ("test",)
        for raw_split in raw_splits:
            path = datasets.data_path("webqsp", f"WebQSP.{raw_split}.json.gz")
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                for q in json.load(fh)["Questions"]:
                    first = q["Parses"][0] if q["Parses"] else {}
                    out[q["QuestionId"]] = (first["TopicEntityMid"],) if first.get("TopicEntityMid") else ()
        return out
    if dataset == "cwq" and split == "test":
        with gzip.open(datasets.data_path("cwq", "cwq_test_tog.json.gz"), "rt", encoding="utf-8") as fh:
            return {r["ID"]: tuple(r.get("topic_entity") or ()) for r in json.load(fh)}
    return {}


def gold_entities(question) -> tuple[set[str], set[str]]:
    """(named, all) gold topic entity ids of ``question`` (a :class:`~memq.datasets.GoldQuestion`)."""
    every = {m for m, _ in question.parses[0].topic_entities} if question.parses else set()
    named = _named_topics(question.dataset, question.split).get(question.id)
    return (set(named) if named is not None else set(every)), every


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
        "p95_ms": round(times[int(0.95 * (len(times) - 1))], 3) if times else 0.0,
        "note": ("recall: of the gold topic entities the question names (WebQSP TopicEntityMid; CWQ the ToG "
                 "topic_entity map); recall_all: of all gold topic entities (constraint entities and other "
                 "constants of the gold query too); precision: linked entities among all gold ones"),
    }
