"""How dense a knowledge graph is around the questions of a dataset (``memq kg stats``).

The figure that matters for KGQA is how many distinct relations a question's
topic entity has, in and out: on a sparse graph a wrong plan step still finds
the gold relation because little else is there. :func:`kg_stats` reports, for
the topic entity of each question (its first annotated one) and for the CVT
nodes one hop from it, the median and the 10th percentile of that count, and
how many quads the graph has, split into its real and synthetic named graphs.

Everything is asked of the KG through SPARQL, so it works the same on the
embedded store and on an endpoint such as Virtuoso.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Iterable

from memq.datasets import GoldQuestion
from memq.kg.base import KnowledgeGraph, check_ids
from memq.schema import freebase_schema
from memq.sparql.model import FB, Iri

GRAPH_REAL = "http://memq.dev/graph/real"
GRAPH_SYNTHETIC = "http://memq.dev/graph/synthetic"
MAX_CVTS_PER_TOPIC = 20


def topic_entity(question: GoldQuestion) -> str | None:
    """The question's topic entity: the first one of its first parse that has one."""
    for parse in question.parses:
        if parse.topic_entities:
            return parse.topic_entities[0][0]
    return None


def relations_at(kg: KnowledgeGraph, node: str, timeout: float | None = None) -> set[str]:
    """The distinct relations into and out of ``node`` (an IRI)."""
    rows = kg.select(f"SELECT DISTINCT ?p WHERE {{ {{ <{node}> ?p ?o }} UNION {{ ?s ?p <{node}> }} }}",
                     timeout=timeout)
    return {r["p"].value for r in rows if "p" in r}


def cvt_neighbours(kg: KnowledgeGraph, node: str, timeout: float | None = None) -> list[str]:
    """The CVT nodes one hop out of ``node``: objects of a relation whose range is a CVT type."""
    schema = freebase_schema()
    rows = kg.select(f"SELECT DISTINCT ?p ?c WHERE {{ <{node}> ?p ?c . FILTER(isIRI(?c)) }}", timeout=timeout)
    out = []
    for r in rows:
        p, c = r.get("p"), r.get("c")
        if isinstance(p, Iri) and isinstance(c, Iri) and p.is_freebase and schema.range(p.local) in schema.cvt_types:
            out.append(c.value)
    return sorted(set(out))[:MAX_CVTS_PER_TOPIC]


def quad_counts(kg: KnowledgeGraph, timeout: float | None = None) -> dict[str, int]:
    """Quads in the real and the synthetic named graph, and their sum."""
    counts = {}
    dialect = logging.getLogger("memq.kg.dialect")
    level = dialect.level
    dialect.setLevel(logging.ERROR)  # GRAPH is outside the gold-query dialect: sent as written, on purpose
    try:
        for key, graph in (("real", GRAPH_REAL), ("synthetic", GRAPH_SYNTHETIC)):
            rows = kg.select(f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH <{graph}> {{ ?s ?p ?o }} }}", timeout=timeout)
            counts[key] = int(rows[0]["n"].value) if rows and "n" in rows[0] else 0
    finally:
        dialect.setLevel(level)
    counts["total"] = counts["real"] + counts["synthetic"]
    return counts


def distribution(values: Iterable[int]) -> dict:
    """``n``, ``median``, ``p10`` (nearest rank) and ``mean`` of counts; zeros when there are none."""
    xs = sorted(values)
    if not xs:
        return {"n": 0, "median": 0, "p10": 0, "mean": 0.0}
    return {"n": len(xs), "median": statistics.median(xs), "p10": xs[max(0, -(-len(xs) // 10) - 1)],
            "mean": round(sum(xs) / len(xs), 2)}


def kg_stats(kg: KnowledgeGraph, questions: Iterable[GoldQuestion], *, timeout: float | None = 60.0,
             progress: bool = False) -> dict:
    """Quads (real / synthetic) and relation counts at the questions' topic entities and CVT nodes."""
    started = time.perf_counter()
    questions = list(questions)
    topics = [t for t in (topic_entity(q) for q in questions) if t is not None]
    check_ids(sorted(set(topics)))
    seq: Iterable[str] = topics
    if progress:
        from tqdm import tqdm

        seq = tqdm(topics, desc="topic entities", unit="q", leave=False)
    at_topic, at_cvt, cvts_seen = [], [], set()
    for mid in seq:
        node = FB + mid
        at_topic.append(len(relations_at(kg, node, timeout)))
        for cvt in cvt_neighbours(kg, node, timeout):
            if cvt not in cvts_seen:
                cvts_seen.add(cvt)
                at_cvt.append(len(relations_at(kg, cvt, timeout)))
    quads = quad_counts(kg, timeout)
    return {
        "questions": len(questions),
        "topic_entities": len(topics),
        "quads": quads,
        "topic_relations": distribution(at_topic),
        "cvt_relations": distribution(at_cvt),
        "seconds": round(time.perf_counter() - started, 1),
    }
