"""Decompose gold queries into MemQ statements, and put them back together.

>>> from memq.sparql import parse_query
>>> d = decompose_query(parse_query(GOLD_SPARQL), "WebQTrn-0", topics=["m.06w2sn5"])  # doctest: +SKIP
>>> [b.statement.structure for b in d.bounds]  # doctest: +SKIP
['2', '1']
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..sparql.model import Query
from ..types import Statement
from .assemble import assemble, instantiate, roundtrip_diff
from .cvt import CvtOracle, KgCvtOracle, SchemaCvtOracle
from .split import Bound, Decomposer, Decomposition, is_language_filter, statement_id

_DEFAULT: Decomposer | None = None


def _default() -> Decomposer:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Decomposer()
    return _DEFAULT


def decompose_query(query: Query, question_id: str = "", topics: Sequence[str] = (),
                    cvt: CvtOracle | None = None) -> Decomposition:
    """Bound statements of one parsed query, in execution order from the topic entity."""
    decomposer = Decomposer(cvt) if cvt is not None else _default()
    return decomposer.decompose(query, question_id, topics)


def decompose(query: Query, question_id: str = "", cvt: CvtOracle | None = None,
              topics: Sequence[str] = ()) -> list[Statement]:
    """The statements of one query, each carrying ``question_id``."""
    d = decompose_query(query, question_id, topics, cvt)
    return [_with_ids(b.statement, (question_id,) if question_id else ()) for b in d.bounds]


def merge_statements(statements: Iterable[Statement]) -> list[Statement]:
    """Deduplicate by id, merging question ids; ordered by first appearance."""
    merged: dict[str, tuple[Statement, set[str]]] = {}
    for s in statements:
        if s.id in merged:
            merged[s.id][1].update(s.question_ids)
        else:
            merged[s.id] = (s, set(s.question_ids))
    return [_with_ids(s, tuple(sorted(ids))) for s, ids in merged.values()]


def decompose_dataset(questions, cvt: CvtOracle | None = None) -> list[Statement]:
    """Distinct statements of every parse of ``questions`` (GoldQuestion records).

    Parses that fail to parse or decompose are skipped here; ``memq queries
    check`` lists them with reasons.
    """
    from ..errors import MemQError
    from ..sparql import parse_query

    out: list[Statement] = []
    for q in questions:
        for p in q.parses:
            try:
                d = decompose_query(parse_query(p.sparql), q.id, [m for m, _ in p.topic_entities], cvt)
            except MemQError:
                continue
            out.extend(_with_ids(b.statement, (q.id,)) for b in d.bounds)
    return merge_statements(out)


def _with_ids(s: Statement, ids: tuple[str, ...]) -> Statement:
    return Statement(s.id, s.structure, s.sparql, s.relations, ids)


__all__ = [
    "Bound", "CvtOracle", "Decomposer", "Decomposition", "KgCvtOracle", "SchemaCvtOracle", "assemble",
    "decompose", "decompose_dataset", "decompose_query", "instantiate", "is_language_filter",
    "merge_statements", "roundtrip_diff", "statement_id",
]
