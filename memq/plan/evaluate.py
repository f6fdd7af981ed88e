"""Plan-only metrics: how close a planner's output is to the derived gold plan (no KG, no recall).

Per question:

* ``exact``: the normalised plan texts are equal (parsed, re-rendered, lower
  case, single spaces; see :func:`memq.plan.format.normalise`);
* ``steps_ok``: the predicted plan has as many steps as the gold plan;
* ``kinds_ok``: the sequence of step kinds (find/check/sort/answer) is equal;
* ``parsed``: the output held a readable step; ``dropped``: lines dropped.

Aggregates average over ALL questions (an unreadable output scores 0).
Edge Hitting Rate needs recall and comes with the pipeline evaluation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memq.errors import PlanParseError

from .derive import DerivedPlan
from .format import normalise, parse_plan


@dataclass(frozen=True)
class PlanScore:
    question_id: str
    exact: bool
    steps_ok: bool
    kinds_ok: bool
    parsed: bool
    dropped: int
    gold_steps: int
    predicted_steps: int
    predicted: str

    def to_json(self) -> dict:
        return dict(self.__dict__)


def score_plan(gold: DerivedPlan, predicted: str) -> PlanScore:
    names = gold.entity_names
    want = normalise(gold.text, names)
    got = normalise(predicted, names)
    try:
        plan = parse_plan(predicted, names)
        kinds = [s.kind for s in plan.steps]
        parsed, dropped, n = True, len(plan.dropped), len(plan.steps)
    except PlanParseError:
        kinds, parsed, dropped, n = [], False, 0, 0
    return PlanScore(gold.question_id, want == got, n == len(gold.steps), kinds == [s.kind for s in gold.steps],
                     parsed, dropped, len(gold.steps), n, predicted)


def summarise(scores: Sequence[PlanScore]) -> dict:
    n = len(scores)

    def rate(attr: str) -> float:
        return round(sum(bool(getattr(s, attr)) for s in scores) / n, 4) if n else 0.0

    return {
        "questions": n,
        "exact_match": rate("exact"),
        "step_count_accuracy": rate("steps_ok"),
        "step_kinds_accuracy": rate("kinds_ok"),
        "parse_rate": rate("parsed"),
        "with_dropped_lines": rate("dropped"),
    }


def evaluate(planner, golds: Sequence[DerivedPlan], progress=None) -> tuple[dict, list[PlanScore]]:
    """Run ``planner`` (anything with ``raw_many``, or ``plan``) on the gold questions and score it."""
    items = [(g.question, list(g.entities)) for g in golds]
    if hasattr(planner, "raw_many"):
        raws = planner.raw_many(items, progress)
    else:
        raws = []
        for q, e in items:
            try:
                raws.append(planner.plan(q, e).raw)
            except PlanParseError as exc:
                raws.append(str(exc))
    scores = [score_plan(g, r) for g, r in zip(golds, raws, strict=True)]
    return summarise(scores), scores
