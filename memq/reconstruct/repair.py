"""Self-repair (EffiQA-style): when the assembled query finds nothing, try changed queries until one does.

A repair *move* changes the steps' choices and yields the queries to try; the
driver :func:`repair` runs each, records it in ``Trace.attempts`` as
``{"action": <move>, ..., "rows": n}``, and stops at the first query with
answers, noting in ``Trace.fallbacks`` what it changed. The moves, in order:

* ``swap-tied``: grounded choice kept one of several tied statements that
  all bound (:mod:`memq.reconstruct.ground`); the later steps may need another. Each
  other tied statement in turn, one attempt each.
* ``add-candidate``: widen the find steps (last first) with their next
  recalled candidates, one at a time; at most ``max_repairs`` attempts.
* ``relax-checks``: drop the last 1, 2, ... Make sure steps, one attempt each
  (outside the widening budget).

A move sees the query only through ``build(skip_checks)``, the query of the
current choices (:func:`memq.reconstruct.assemble.build_query`). When a query answers,
the choices are left as that query used them, so ``Answer.recalled`` shows
the statements it read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

from ..sparql.model import Query
from ..types import Trace
from .ground import StepChoice

#: ``build(skip_checks)``: the query of the steps' current choices without the last ``skip_checks`` checks.
Build = Callable[[int], Query]
#: ``run(query)``: the query's answer terms ([] when it fails).
Run = Callable[[Query], list]


class Attempt(NamedTuple):
    """One query a move tries: what the trace records of it, and the note if it answers."""

    query: Query
    record: dict  # Trace.attempts entry, without "rows"
    note: str  # Trace.fallbacks entry (after "self-repair: ") when the query answers


#: A move: ``(choices, build, max_repairs) -> the attempts``; resumed only when the last attempt found nothing.
Move = Callable[[list[StepChoice], Build, int], Iterator[Attempt]]


def swap_tied(choices: list[StepChoice], build: Build, max_repairs: int) -> Iterator[Attempt]:
    for c in choices:
        kept = c.kept
        for r in c.tied:
            c.kept = [r]
            yield Attempt(build(0), {"action": "swap-tied", "step": c.index + 1, "statement": r.statement.id},
                          f"step {c.index + 1} took tied statement {r.statement.id} instead of "
                          f"{kept[0].statement.id}")
        c.kept = kept


def add_candidate(choices: list[StepChoice], build: Build, max_repairs: int) -> Iterator[Attempt]:
    budget = max_repairs
    for c in [c for c in reversed(choices) if c.step.kind == "find"]:
        used = {r.statement.id for r in c.kept}
        for r in c.candidates:
            if budget <= 0:
                break
            if r.statement.id in used:
                continue
            budget -= 1
            c.kept = c.kept + [r]
            used.add(r.statement.id)
            yield Attempt(build(0), {"action": "add-candidate", "step": c.index + 1, "statement": r.statement.id,
                                     "score": round(r.score, 4)},
                          f"step {c.index + 1} widened with statement {r.statement.id}")
            c.kept = c.kept[:-1]


def relax_checks(choices: list[StepChoice], build: Build, max_repairs: int) -> Iterator[Attempt]:
    n_checks = sum(1 for c in choices if c.step.kind == "check")
    for k in range(1, n_checks + 1):
        yield Attempt(build(k), {"action": "relax-checks", "dropped_last": k},
                      f"dropped the last {k} Make sure step(s)")


MOVES: tuple[Move, ...] = (swap_tied, add_candidate, relax_checks)


def repair(choices: list[StepChoice], build: Build, run: Run, trace: Trace,
           max_repairs: int) -> tuple[Query, list] | None:
    """The first repaired query that answers and its answer terms, or None (traced) when no move helps."""
    for move in MOVES:
        for attempt in move(choices, build, max_repairs):
            rows = run(attempt.query)
            trace.attempts.append({**attempt.record, "rows": len(rows)})
            if rows:
                trace.fallbacks.append(f"self-repair: {attempt.note}")
                return attempt.query, rows
    if trace.attempts:
        trace.fallbacks.append("self-repair found nothing; the answer is empty")
    return None
