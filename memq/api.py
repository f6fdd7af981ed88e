"""The public API: ``memq.answer(question, entities)``.

>>> import memq
>>> a = memq.answer("what does jamaican people speak?", {"m.03_r3": "Jamaica"})  # doctest: +SKIP
>>> a.answers  # doctest: +SKIP
[('m.01428y', 'Jamaican English'), ('m.04ygk0', 'Jamaican Creole English Language')]

The memory bank, the knowledge graph and the planner load once per process
(per :class:`~memq.pipeline.Config`) and are reused by later calls.
"""

from __future__ import annotations

import threading

from .pipeline import Config, Pipeline
from .types import Answer, Plan

_PIPELINES: dict[Config, Pipeline] = {}
_LOCK = threading.Lock()


def pipeline(config: Config | None = None) -> Pipeline:
    """The process-wide pipeline for ``config`` (created on first use)."""
    config = config or Config()
    with _LOCK:
        if config not in _PIPELINES:
            _PIPELINES[config] = Pipeline(config)
        return _PIPELINES[config]


def answer(question: str, entities: dict[str, str] | list[tuple[str, str]], *, config: Config | None = None,
           plan: Plan | None = None) -> Answer:
    """Answer ``question`` about the topic ``entities`` (Freebase id -> name).

    Returns an :class:`~memq.types.Answer`: answers as (id, name) in a
    deterministic order (see :mod:`memq.assemble`), the final SPARQL, the
    plan, each recalled statement with its score, the fallbacks that fired and
    the time spent in each stage. Raises ValueError for bad input (naming the
    value) and :class:`~memq.errors.MemQError` when a stage fails.
    """
    return pipeline(config).answer(question, entities, plan=plan)
