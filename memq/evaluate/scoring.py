"""Scoring one answered question: answer metrics, query structure, error stage.

Shared by memq's own records (:mod:`memq.evaluate.run`) and the direct-SPARQL
ablation's (:mod:`memq.evaluate.direct`), so both are scored by one rule.
"""

from __future__ import annotations

from ..errors import KnowledgeGraphError, MemQError, PlanParseError, ReconstructionError
from ..sparql import parse_query
from .metrics import best_over_parses, ehr, ged


def error_stage(exc: BaseException) -> str:
    """The stage an exception stopped at: planner, reconstruction, kg or other."""
    if isinstance(exc, PlanParseError):
        return "planner"
    if isinstance(exc, ReconstructionError):
        return "reconstruction"
    if isinstance(exc, KnowledgeGraphError):
        return "kg"
    if isinstance(exc, MemQError) and "derive" in type(exc).__name__.lower():
        return "planner"
    return "other"


def structure(pred_sparql: str | None, question) -> tuple[float, float]:
    """(EHR, GED) of a predicted query against the question's gold parses: the best of each over the parses."""
    pred = parse_query(pred_sparql) if pred_sparql else None
    best_ehr, best_ged = 0.0, float("inf")
    for p in question.parses:
        try:
            gold = parse_query(p.sparql)
        except MemQError:
            continue
        best_ehr = max(best_ehr, ehr(pred, gold))
        best_ged = min(best_ged, ged(pred, gold))
    return best_ehr, (best_ged if best_ged != float("inf") else 0.0)


def score(record: dict, question, predicted: list[str], sparql: str | None, error: str | None) -> list[list[str]]:
    """Fill ``record``'s hits@1, f1 (best parse), ehr, ged and error stage; return the gold answer lists.

    A wrong answer that raised nothing is a ``main-path`` error when a gold edge is missing (EHR < 1), else
    ``filtering``.
    """
    golds = [[a for a, _ in (p.answers or ())] for p in question.parses if p.answers is not None]
    hits, f1 = best_over_parses(predicted, golds) if golds else (None, None)
    record["hits@1"], record["f1"] = hits, f1
    record["ehr"], record["ged"] = structure(sparql, question)
    if error is None and f1 is not None and f1 < 1.0:
        error = "main-path" if record["ehr"] < 1.0 else "filtering"
    record["error"] = error
    return golds
