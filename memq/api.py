"""The public API: ``memq.answer(question, entities)``.

>>> import memq
>>> a = memq.answer("what does jamaican people speak?", {"m.03_r3": "Jamaica"})  # doctest: +SKIP
>>> a.answers  # doctest: +SKIP
[('m.01428y', 'Jamaican English'), ('m.04ygk0', 'Jamaican Creole English Language')]

Without entities (``memq.answer("what does jamaican people speak?")``) or with names alone (``["Jamaica"]``)
the question's entities are linked first (:mod:`memq.link`, docs/linking.md).

The memory bank, the knowledge graph and the planner load once per process
(per :class:`~memq.pipeline.Config`) and are reused by later calls.

:func:`answer` and ``memq serve`` check their input with :func:`check_request`:
the checks of :func:`memq.pipeline.validate` plus the limits of one public
request (:data:`MAX_QUESTION_CHARS`, :data:`MAX_ENTITIES`). ``Pipeline.answer``
keeps the wider limits because the gold datasets need them (one WebQSP test
question has 86 topic entities).
"""

from __future__ import annotations

import threading

from .link.resolve import check_names, needs_linking
from .pipeline import Config, Pipeline, check_question, validate
from .types import Answer, Plan

__all__ = ["MAX_ENTITIES", "MAX_QUESTION_CHARS", "answer", "check_request", "pipeline"]

MAX_QUESTION_CHARS = 1000
MAX_ENTITIES = 20

_PIPELINES: dict[Config, Pipeline] = {}
_LOCK = threading.Lock()


def pipeline(config: Config | None = None) -> Pipeline:
    """The process-wide pipeline for ``config`` (created on first use)."""
    config = config or Config()
    with _LOCK:
        if config not in _PIPELINES:
            _PIPELINES[config] = Pipeline(config)
        return _PIPELINES[config]


def answer(question: str, entities: dict[str, str] | list[tuple[str, str]] | list[str] | None = None, *,
           config: Config | None = None, plan: Plan | None = None) -> Answer:
    """Answer ``question`` about the topic ``entities`` (Freebase id -> name).

    Without ``entities`` they are linked from the question (:mod:`memq.link`); ``entities`` may also be names
    alone (``["Jamaica"]``), each resolved to the most popular entity of that name. ``Answer.trace.links`` lists
    what was linked, with scores.

    Returns an :class:`~memq.types.Answer`: answers as (id, name) in a
    deterministic order (see :mod:`memq.reconstruct.assemble`), the final SPARQL, the
    plan, each recalled statement with its score, the fallbacks that fired and
    the time spent in each stage. Raises ValueError for bad input (naming the
    value) and :class:`~memq.errors.MemQError` when a stage fails.
    """
    question, entities = check_request(question, entities, plan_given=plan is not None)
    return pipeline(config).answer(question, entities, plan=plan)


def check_request(question: object, entities: object = None, *,
                  plan_given: bool = False) -> tuple[str, dict[str, str] | list[str] | None]:
    """The question and the entities of one request, checked; raises ValueError naming the bad value.

    ``entities`` None (to be linked) and a list of names alone come back as they are (names checked like the
    names of ids); ids with names come back as a dict. An empty dict or list is refused (leave it out to link),
    except with a given plan (``plan_given``): a plan that starts from a class (GrailQA's "which building has
    less than 9 floors?") needs no entity, and the pipeline refuses a plan that does.

    At most :data:`MAX_QUESTION_CHARS` characters of question and :data:`MAX_ENTITIES` topic entities,
    then everything :func:`memq.pipeline.validate` checks (ids are Freebase ids; names are non-empty, at most
    200 characters, without control characters or any of ``" { } < > \\``). Names never enter a SPARQL query
    (entities reach the KG by id only), so a name that merely reads like SPARQL, or holds an apostrophe, is
    accepted.
    """
    if isinstance(question, str) and len(question) > MAX_QUESTION_CHARS:
        raise ValueError(f"question is {len(question)} characters long; at most {MAX_QUESTION_CHARS} are accepted "
                         f"(it starts {question[:40]!r})")
    if isinstance(entities, (dict, list, tuple)) and len(entities) > MAX_ENTITIES:
        raise ValueError(f"{len(entities)} topic entities given; at most {MAX_ENTITIES} are accepted "
                         f"(the first: {list(entities)[:3]!r})")
    if needs_linking(entities):
        return check_question(question), None if entities is None else check_names(entities)
    if isinstance(entities, (dict, list, tuple)) and not entities:
        if plan_given:
            return check_question(question), {}
        raise ValueError(f"entities is empty ({entities!r}): give at least one topic entity, or leave entities "
                         "out to have memq link them from the question")
    return validate(question, entities)
