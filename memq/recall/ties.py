"""Ties among recalled statements: several with one score, as a relation and its reverse have (one description).

:func:`is_tie` says whether a recall is one; :func:`break_tie` keeps the preferred statement in the order
:data:`TIE_ORDER` names (:func:`preferred` is its sort key).
"""

from __future__ import annotations

from ..types import Recalled
from .rule import TIE


def is_tie(recalled: list[Recalled]) -> bool:
    """Several statements with one score: the same description, as a relation and its reverse have."""
    return len(recalled) > 1 and max(r.score for r in recalled) - min(r.score for r in recalled) <= TIE


# Freebase's user-contributed domains; "commons" is the curated rest (the schema source's default).
NON_COMMONS_DATA = ("base.", "user.", "freebase.")
TIE_ORDER = "seen in training queries, then Freebase commons, then the forward direction, first"


def preferred(statement) -> tuple[int, int, int]:
    """Sort key among tied statements (see ``TIE_ORDER``): seen in a gold query first; then a statement
    of Freebase commons before one of a user-contributed domain with the same label
    (``time.event.start_date`` before ``base.ihistory.event.start_date``); then written from the known
    entity (``?entity1 ns:r ...``, the direction gold queries take from a topic entity) before its reverse."""
    seen = bool(statement.question_ids)
    commons = not any(r.startswith(NON_COMMONS_DATA) for r in statement.relations)
    forward = "?entity1 ns:" in statement.sparql
    return (0 if seen else 1, 0 if commons else 1, 0 if forward else 1)


def break_tie(recalled: list[Recalled]) -> tuple[Recalled, int]:
    """The preferred statement among those tied with the first (best) one, and how many were tied."""
    tied = [r for r in recalled if recalled[0].score - r.score <= TIE]
    return min(tied, key=lambda r: preferred(r.statement)), len(tied)
