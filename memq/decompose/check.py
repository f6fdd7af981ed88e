"""``memq queries check``: parse, decompose and re-assemble every gold query of a dataset."""

from __future__ import annotations

from collections import Counter

from ..datasets import load
from ..errors import MemQError
from ..sparql import parse_query
from ..types import STRUCTURES
from . import decompose_query, roundtrip_diff


def check_queries(dataset: str, split: str, *, progress: bool = False) -> dict:
    """Counts for one dataset split; ``failures`` lists each failed parse with its stage and reason."""
    questions = load(dataset, split)
    parses = [(q, p) for q in questions for p in q.parses]
    if progress:
        from tqdm import tqdm

        parses = tqdm(parses, desc=f"{dataset}/{split}", unit="query")
    counts: Counter[str] = Counter()
    distinct: dict[str, str] = {}
    failures: list[dict] = []
    parsed = roundtrip = 0
    for q, p in parses:
        try:
            query = parse_query(p.sparql)
        except MemQError as exc:
            failures.append({"id": p.parse_id, "stage": "parse", "reason": str(exc)})
            continue
        parsed += 1
        try:
            d = decompose_query(query, q.id, [m for m, _ in p.topic_entities])
            diff = roundtrip_diff(d)
        except MemQError as exc:
            failures.append({"id": p.parse_id, "stage": "decompose", "reason": str(exc)})
            continue
        if diff:
            failures.append({"id": p.parse_id, "stage": "roundtrip", "reason": diff})
            continue
        roundtrip += 1
        for b in d.bounds:
            counts[b.statement.structure] += 1
            distinct[b.statement.id] = b.statement.structure
    by_structure = Counter(distinct.values())
    return {
        "dataset": dataset,
        "split": split,
        "queries": len(parses),
        "parsed": parsed,
        "roundtrip": roundtrip,
        "statements": {s: counts[s] for s in STRUCTURES},
        "distinct_statements": {s: by_structure[s] for s in STRUCTURES},
        "failures": failures,
    }
