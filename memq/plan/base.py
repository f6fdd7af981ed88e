"""What every planner is: the Planner role, and the batched prompt -> text -> plan loop of the LLM planners.

``Planner.plan(question, entities) -> Plan``: ``entities`` are the topic
entities, as names, ``(mid, name)`` pairs or a ``{mid: name}`` dict; the
plan mentions them by name. It raises :class:`~memq.errors.PlanParseError`
when the model wrote no readable step; a partly readable plan comes back
with ``Plan.dropped`` filled in. :class:`BatchPlanner` is shared by the
fine-tuned planner (:mod:`memq.plan.planner`) and the few-shot one
(:mod:`memq.plan.fewshot`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from memq.errors import MemQError
from memq.types import Plan

from .format import parse_plan
from .prompt import entity_names

Entities = Sequence[str] | Sequence[tuple[str, str]] | Mapping[str, str]

BACKENDS = ("llamacpp", "transformers")
DEFAULT_BACKEND = "llamacpp"  # answering; training runs on transformers
# the trace's line before a hybrid rescue's notes (memq.pipeline): a saved record's planner notes after it
# are the rescue's
RESCUED = "hybrid: free generation's plan found nothing (self-repair included); the grounded planner planned again"


def check_backend(backend: object) -> str:
    """``backend`` if it names an LLM backend, else a MemQError naming it."""
    if backend not in BACKENDS:
        raise MemQError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    return backend  # type: ignore[return-value]


@runtime_checkable
class Planner(Protocol):
    name: str

    def plan(self, question: str, entities: Entities) -> Plan: ...


class BatchPlanner:
    """Shared by the LLM planners: prompts -> raw text -> parsed plans, batched."""

    name = "planner"
    max_new_tokens = 160

    @property
    def backend_used(self) -> str | None:
        """The backend that runs the model ("llamacpp", "transformers"), None for an endpoint."""
        return getattr(self.llm, "backend", None)

    @property
    def llm(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def prompt(self, question: str, entities: Entities) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def calls(self) -> int:
        return self.llm.calls

    def raw_many(self, items: Sequence[tuple[str, Entities]], progress=None) -> list[str]:
        """Raw model output for ``(question, entities)`` pairs, in batches."""
        prompts = [self.prompt(q, e) for q, e in items]
        size = max(1, getattr(self.llm, "batch_size", 8))
        out: list[str] = []
        chunks = range(0, len(prompts), size)
        for i in (progress(chunks) if progress else chunks):
            out.extend(self.generate(prompts[i:i + size]))
        return out

    def generate(self, prompts: list[str]) -> list[str]:
        """One generate call of the model; planners that need stop strings or chat override it."""
        return self.llm.generate(prompts, max_new_tokens=self.max_new_tokens)

    def plan_many(self, items: Sequence[tuple[str, Entities]], progress=None) -> list[Plan | MemQError]:
        """Plans for many questions; an unreadable output gives its PlanParseError instead of raising."""
        out: list[Plan | MemQError] = []
        for (_, e), raw in zip(items, self.raw_many(items, progress), strict=True):
            try:
                out.append(parse_plan(raw, entity_names(e)))
            except MemQError as exc:
                out.append(exc)
        return out

    def plan(self, question: str, entities: Entities) -> Plan:
        raw = self.raw_many([(question, entities)])[0]
        return parse_plan(raw, entity_names(entities))
