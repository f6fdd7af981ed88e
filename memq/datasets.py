"""Load the bundled gold datasets (WebQSP, CWQ, GrailQA) into one uniform shape.

Everything is read from the repository's ``data/`` folder (copied from the
upstream releases; see each folder's PROVENANCE.md), never from the network.

Splits:

* ``webqsp``: ``train`` (3,098 questions), ``test`` (1,639), ``all``.
* ``cwq``: ``train`` is the 30,403 CWQ train+dev questions with SPARQL and no
  answers; ``test`` the 3,531 test questions with answer mids; ``all`` both.
* ``grailqa``: ``train`` (1,000 real train questions), ``dev`` (349 real dev
  questions), ``all``; every question has SPARQL and answers.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent.parent / "data"

DATASETS = ("webqsp", "cwq", "grailqa")
SPLITS = ("train", "dev", "test", "all")
DATASET_SPLITS = {"webqsp": ("train", "test"), "cwq": ("train", "test"), "grailqa": ("train", "dev")}
"""The splits each dataset has (besides ``all``, which is all of them)."""

DISTINCT_NODES = frozenset({"grailqa"})
"""Datasets whose gold queries follow GrailQA's convention that every node of a query differs from every other
(``FILTER (?x0 != ?x1 && ...)``): queries reconstructed for their questions write the same filter
(:class:`memq.reconstruct.Reconstructor`'s ``distinct_nodes``; :class:`memq.pipeline.Config`'s)."""

_MID = re.compile(r"\bns:([mg]\.[0-9a-z_]+)")


@dataclass(frozen=True)
class GoldParse:
    """One annotated parse of a question.

    ``topic_entities`` are the entities the question mentions, as (id, name):
    WebQSP's annotated topic entity first, then its constraint entities, then
    any other entity constant of the gold query (names from the bundled
    mid -> name map). For CWQ: the gold query's entity constants.

    ``answers`` is a tuple of ``(id, name)``: a Freebase id (``m.0gxnnwq``) or,
    for a value answer, the literal text twice. ``None`` when the dataset has
    no answers (CWQ train+dev).
    """

    parse_id: str
    sparql: str
    topic_entities: tuple[tuple[str, str], ...]
    answers: tuple[tuple[str, str], ...] | None


@dataclass(frozen=True)
class GoldQuestion:
    """One question. GrailQA's carry its ``level`` (``i.i.d.``, ``compositional``, ``zero-shot``; dev only)
    and ``function`` (``none``, ``count``, ``argmax``, ``argmin``, ``<``, ``<=``, ``>``, ``>=``)."""

    id: str
    question: str
    dataset: str
    split: str
    parses: tuple[GoldParse, ...]
    level: str | None = None
    function: str | None = None


def data_path(*parts: str) -> Path:
    """A file under the bundled ``data/`` folder; raises if it is missing."""
    path = DATA_DIR.joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(f"bundled data file missing: data/{'/'.join(parts)}")
    return path


def _read_json(path: Path):
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


@lru_cache(maxsize=1)
def mid_names() -> dict[str, str]:
    """The bundled mid -> English name map (``data/freebase_names``)."""
    out: dict[str, str] = {}
    with gzip.open(data_path("freebase_names", "mid2name.derived.tsv.gz"), "rt", encoding="utf-8") as fh:
        reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        next(reader)
        for row in reader:
            if len(row) >= 2:
                out.setdefault(row[0], row[1])
    return out


def query_mids(sparql: str) -> list[str]:
    """The ``ns:m.*`` / ``ns:g.*`` constants of a query, in order, without repeats."""
    seen: dict[str, None] = {}
    for mid in _MID.findall(sparql):
        seen.setdefault(mid, None)
    return list(seen)


def _webqsp(split: str) -> list[GoldQuestion]:
    return webqsp_questions(_read_json(data_path("webqsp", f"WebQSP.{split}.json.gz")), split)


def webqsp_questions(raw: dict, split: str) -> list[GoldQuestion]:
    """The questions of a file in WebQSP's format (``{"Questions": [...]}``)."""
    out = []
    for q in raw["Questions"]:
        parses = []
        for p in q["Parses"]:
            topics: list[tuple[str, str]] = []
            if p.get("TopicEntityMid"):
                topics.append((p["TopicEntityMid"], p.get("TopicEntityName") or p["TopicEntityMid"]))
            for c in p.get("Constraints") or ():
                if c.get("ArgumentType") == "Entity" and c.get("Argument"):
                    pair = (c["Argument"], c.get("EntityName") or c["Argument"])
                    if pair not in topics:
                        topics.append(pair)
            known = {m for m, _ in topics}
            names = mid_names()
            for mid in query_mids(p["Sparql"]):  # the rest of the query's entities, as for CWQ
                if mid not in known:
                    topics.append((mid, names.get(mid, mid)))
                    known.add(mid)
            answers = tuple(
                (a["AnswerArgument"], a.get("EntityName") or a["AnswerArgument"]) for a in p["Answers"]
            )
            parses.append(GoldParse(p["ParseId"], p["Sparql"], tuple(topics), answers))
        out.append(GoldQuestion(q["QuestionId"], q["RawQuestion"], "webqsp", split, tuple(parses)))
    return out


def _cwq_topics(sparql: str, given: dict[str, str] | None) -> tuple[tuple[str, str], ...]:
    names = mid_names()
    return tuple((m, (given or {}).get(m) or names.get(m, m)) for m in query_mids(sparql))


def _cwq(split: str) -> list[GoldQuestion]:
    if split == "test":
        raw = _read_json(data_path("cwq", "ComplexWebQuestions_test.json.gz"))
        tog = {r["ID"]: r for r in _read_json(data_path("cwq", "cwq_test_tog.json.gz"))}
        return cwq_questions(raw, "test", tog)
    raw = _read_json(data_path("cwq", "cwq_traindev_sparql.kgqg.json.gz"))
    return [
        GoldQuestion(r["ID"], r["question"], "cwq", "train",
                     (GoldParse(r["ID"], r["sparql"], _cwq_topics(r["sparql"], None), None),))
        for r in raw
    ]


def cwq_questions(raw: list, split: str, topics: dict | None = None) -> list[GoldQuestion]:
    """The questions of a file in CWQ's test format (``ID``, ``question``, ``sparql``, ``answer``: mids);
    ``topics`` maps an ID to a record with ``topic_entity`` names (ToG's file)."""
    names = mid_names()
    out = []
    for r in raw:
        given = (topics or {}).get(r["ID"], {}).get("topic_entity") or {}
        answers = tuple((m, names.get(m, m)) for m in r["answer"])
        parse = GoldParse(r["ID"], r["sparql"], _cwq_topics(r["sparql"], given), answers)
        out.append(GoldQuestion(r["ID"], r["question"], "cwq", split, (parse,)))
    return out


def _grailqa(split: str) -> list[GoldQuestion]:
    name = {"train": "grailqa_train_1000.json.gz", "dev": "grailqa_dev_subset.json.gz"}[split]
    return grailqa_questions(_read_json(data_path("grailqa", name)), split)


def grailqa_questions(raw: list, split: str) -> list[GoldQuestion]:
    """The questions of a file in GrailQA's format: the topic entities are the ``entity`` nodes of each
    question's graph query."""
    out = []
    for r in raw:
        qid = str(r["qid"])
        topics = tuple((n["id"], n.get("friendly_name") or n["id"]) for n in r["graph_query"]["nodes"]
                       if n["node_type"] == "entity")
        answers = tuple((a["answer_argument"], a.get("entity_name") or a["answer_argument"]) for a in r["answer"])
        parse = GoldParse(qid, r["sparql_query"], topics, answers)
        out.append(GoldQuestion(qid, r["question"], "grailqa", split, (parse,), level=r.get("level"),
                                function=r.get("function")))
    return out


FORMATS = {"webqsp": webqsp_questions, "cwq": cwq_questions, "grailqa": grailqa_questions}
"""The question-file formats :func:`load_file` reads."""


def load_file(path: str | Path, fmt: str, split: str = "file") -> list[GoldQuestion]:
    """A user's own gold-annotated question file (JSON, gzip'ed or not) in the ``fmt`` format of one of
    :data:`DATASETS`; every question gets split ``split``."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown question format {fmt!r}; expected one of {', '.join(FORMATS)}")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"question file {path}: no such file")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        raw = json.load(fh)
    return FORMATS[fmt](raw, split)


_LOADERS = {"webqsp": _webqsp, "cwq": _cwq, "grailqa": _grailqa}


def load(dataset: str, split: str) -> list[GoldQuestion]:
    """All questions of ``dataset`` (``webqsp``/``cwq``/``grailqa``) and ``split`` (one of
    :data:`DATASET_SPLITS`, or ``all``)."""
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; expected one of {', '.join(DATASETS)}")
    splits = DATASET_SPLITS[dataset]
    if split not in splits + ("all",):
        raise ValueError(f"unknown split {split!r} of {dataset}; expected one of {', '.join(splits + ('all',))}")
    loader = _LOADERS[dataset]
    if split == "all":
        return [q for s in splits for q in loader(s)]
    return loader(split)
