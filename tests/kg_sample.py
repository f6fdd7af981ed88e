"""A small real Freebase sample for the knowledge-graph tests (built at test time, not stored).

Triples come from the GoG gold-path triples of the first WebQSP test questions
(``data/freebase_subgraph``), names from ``data/freebase_names``. Everything
goes into one named graph, as the benchmark KG does with real triples.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from memq.datasets import data_path, load, mid_names
from memq.sparql.model import FB

GRAPH = "http://memq.dev/graph/real"


def _literal(text: str) -> str:
    escaped = (text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r"))
    return f'"{escaped}"@en'


def write_sample(out: Path, n_questions: int = 40) -> list[str]:
    """Write ``out`` (.nq.gz) from the first ``n_questions`` WebQSP test questions; their ids."""
    ids, triples = [], set()
    with gzip.open(data_path("freebase_subgraph", "gog_webqsp_test_by_question.jsonl.gz"), "rt") as fh:
        for line in fh:
            rec = json.loads(line)
            if rec["triples"]:
                ids.append(rec["id"])
                triples.update(tuple(t) for t in rec["triples"])
            if len(ids) == n_questions:
                break
    names = mid_names()
    nodes = sorted({t[0] for t in triples} | {t[2] for t in triples})
    with gzip.open(out, "wt", encoding="utf-8") as fh:
        for s, p, o in sorted(triples):
            fh.write(f"<{FB}{s}> <{FB}{p}> <{FB}{o}> <{GRAPH}> .\n")
        for node in nodes:
            if node in names:
                fh.write(f"<{FB}{node}> <{FB}type.object.name> {_literal(names[node])} <{GRAPH}> .\n")
    return ids


def sample_questions(ids: list[str]):
    """The WebQSP test questions with these ids."""
    wanted = set(ids)
    return [q for q in load("webqsp", "test") if q.id in wanted]
