"""The gold topic entities of a dataset question: those it names, and all of them (memq.link.evaluate scores
linking against both; memq.link.index counts the mention prior on the named ones of the training questions).

* ``named``: WebQSP's annotated ``TopicEntityMid`` of the first parse; CWQ test: the ``topic_entity`` map of the
  ToG release (``data/cwq/cwq_test_tog.json.gz``), else every entity constant of the gold query.
* ``all``: every topic entity of the first parse (WebQSP adds the constraint entities, such as Country or
  Marriage, and the other constants of the gold query).

:func:`prior_entities` gives the mention prior the named ones of a training question, which for CWQ are not
annotated.
"""

from __future__ import annotations

import gzip
import json
from functools import lru_cache

from .. import datasets
from .index import normalize


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


@lru_cache(maxsize=1)
def _webqsp_train() -> dict[str, tuple[tuple[str, ...], set[str]]]:
    named = _named_topics("webqsp", "train")
    return {q.id: (named.get(q.id, ()), {m for m, _ in q.parses[0].topic_entities} if q.parses else set())
            for q in datasets.load("webqsp", "train")}


def prior_entities(question) -> set[str]:
    """The topic entities a training question names, as the mention prior counts them (memq.link.linker). A CWQ
    question is a WebQSP question made longer: it names the WebQSP question's topic entity and the constants it
    added (those the WebQSP parse does not hold), not the constraint entities it kept from the WebQSP parse
    (College/University, Country), which no span of it names. Other questions: :func:`gold_entities`' named ones."""
    if question.dataset != "cwq" or not question.parses:
        return gold_entities(question)[0]
    every = {m for m, _ in question.parses[0].topic_entities}
    base = _webqsp_train().get(question.id.split("_")[0]) if question.id.startswith("WebQTrn-") else None
    if base is None:
        return every
    named, kept = base
    return (set(named) & every) | (every - kept)


@lru_cache(maxsize=1)
def _webqsp_train_mentions() -> dict[str, tuple[str, str]]:
    """WebQSP train question id -> (the span its annotators marked as naming the topic entity, that entity's id):
    ``PotentialTopicEntityMention`` and ``TopicEntityMid`` of the first parse (the train split only)."""
    out = {}
    with gzip.open(datasets.data_path("webqsp", "WebQSP.train.json.gz"), "rt", encoding="utf-8") as fh:
        for q in json.load(fh)["Questions"]:
            first = q["Parses"][0] if q["Parses"] else {}
            if first.get("PotentialTopicEntityMention") and first.get("TopicEntityMid"):
                out[q["QuestionId"]] = (first["PotentialTopicEntityMention"], first["TopicEntityMid"])
    return out


def annotated_mentions(question) -> tuple[tuple[str, str], ...]:
    """(span, entity id) pairs a WebQSP training question's annotators marked (``PotentialTopicEntityMention``:
    "us" of "what kind government does the us have?" names the United States), for the mention prior's learnt
    aliases (memq.link.mentions). A CWQ question made from a WebQSP train question keeps its span when it still
    writes it and still names the entity (:func:`prior_entities`). Never a test question's: () for any other."""
    if question.split != "train" or question.dataset not in ("webqsp", "cwq"):
        return ()
    found = _webqsp_train_mentions().get(question.id.split("_")[0] if question.dataset == "cwq" else question.id)
    if found is None:
        return ()
    span, mid = found
    words, text = normalize(span), f" {normalize(question.question)} "
    if not words or f" {words} " not in text or (question.dataset == "cwq" and mid not in prior_entities(question)):
        return ()
    return ((span, mid),)
