"""The hybrid planner (``--planner hybrid``): free generation first, the grounded planner when its plan finds nothing.

The two planners fail in different places. Free generation (``--planner
finetuned``) writes the plan the model prefers, wording and structure
included, and on CWQ's longer plans it is the better of the two; but a step
that names a relation the entity does not have gives a query with no rows.
The grounded planner (:mod:`memq.plan.grounded`) only offers lines that bind,
so its plans almost always answer, at several times the cost.

So the hybrid planner writes the plan freely, and the pipeline runs it (with
self-repair, as for any plan). Only when free generation gives nothing to
answer with (a query with no rows, a plan whose statements cannot be put
together into a query, or an output with no readable step) does
:meth:`HybridPlanner.rescue` plan again with the grounded planner, whose beam
the pipeline then chooses by execution (:meth:`memq.pipeline.Pipeline.answer`).
Its answers differ from free generation's only there, and only where the
grounded plan found rows; the free plan's outcome (an empty answer, or its
error) stands when the grounded planner finds nothing either, or falls back
to free generation itself. Every step of this is in the trace (``hybrid: ...``).
"""

from __future__ import annotations

from collections.abc import Collection

from memq.errors import PlanParseError
from memq.types import Plan

from .base import Entities
from .format import answer_target, hops

__all__ = ["HybridPlanner"]


class HybridPlanner:
    """Free generation by ``free`` (default ``grounded.free``, the same fine-tuned model); :meth:`rescue` is
    ``grounded``'s plan (see the module docstring)."""

    def __init__(self, grounded, free=None) -> None:
        self.grounded = grounded
        self.free = free if free is not None else grounded.free
        self.adapter = getattr(self.free, "adapter", None)
        self.name = "hybrid:" + getattr(self.free, "name", "planner")
        self._free_calls = 0

    @property
    def fallbacks(self) -> list[str]:
        return getattr(self.free, "fallbacks", [])

    @property
    def backend_used(self) -> str | None:
        return getattr(self.free, "backend_used", None)

    @property
    def calls(self) -> int:
        """Model calls: free generations, and the grounded planner's line searches when it rescues a plan."""
        return self._free_calls + self.grounded.calls

    @property
    def llm(self):
        """The fine-tuned planner's model (what ``memq demo`` and ``memq serve`` load before the first question)."""
        return self.free.llm

    def prompt(self, question: str, entities: Entities) -> str:
        return self.free.prompt(question, entities)

    def warm_up(self) -> None:
        """The grounded planner's warm-up (:meth:`memq.plan.grounded.GroundedPlanner.warm_up`): it rescues plans."""
        self.grounded.warm_up()

    def plan_many(self, items, progress=None) -> list:
        self._free_calls += len(items)
        return [unreadable(p) if isinstance(p, PlanParseError) else p
                for p in self.free.plan_many(items, progress)]

    plans_with_optional = True  # the rescue's entity coverage leaves the optional entities out

    def plan(self, question: str, entities: Entities, optional: Collection[str] = (),
             unprompted: Collection[str] = ()) -> Plan:
        """Free generation; the entities ``unprompted`` names (a span's second reading) are left out of it."""
        self._free_calls += 1
        try:
            return self.free.plan(question, {m: n for m, n in entities.items() if m not in unprompted})
        except PlanParseError as exc:
            return unreadable(exc)

    def rescue(self, question: str, entities: Entities, optional: Collection[str] = (),
               unprompted: Collection[str] = (), free: Plan | None = None) -> Plan:
        """The grounded planner's plan (with its beam) for a question whose ``free`` plan found nothing, whose answer
        is as many Find steps from the entities as ``free``'s at least (``GroundedConfig.rescue_hops``)."""
        answer, stated = answer_target(free) if free is not None else (None, False)
        least = hops(free.steps, answer) if stated else 0  # a free plan with no Finally line holds nothing back
        return self.grounded.plan(question, entities, optional, unprompted, least_hops=least)


def unreadable(exc: PlanParseError) -> Plan:
    """An empty plan for free-generation output with no readable step: the pipeline goes on to the rescue."""
    return Plan(steps=[], notes=[f"hybrid: free generation wrote no readable plan ({str(exc)[:160]})"])
