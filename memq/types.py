"""The few dataclasses that flow between memq's stages.

sparql -> decompose -> describe -> memory -> plan -> recall -> reconstruct -> kg

Canonical statement variables (see :mod:`memq.decompose`):

* structure ``"1"`` (one triple, or a UNION of one-triple/CVT alternatives):
  ``?entity1`` is the known side, ``?entity2`` the side the step assigns.
* structure ``"2"`` (entity -> CVT -> entity): ``?entity1`` known, ``?cvt`` the
  mediator, ``?entity2`` assigned.
* structure ``"3"`` (a CVT with a third edge): ``?entity1`` and ``?entity2``
  known, ``?entity3`` assigned, ``?cvt`` the mediator.
* ``"filter"``: ``?entity1`` is the checked variable, ``?value`` the value it
  is compared with (an entity id or a literal filled in from the plan).
* ``"order"``: ``?entity1`` is the sort key.
* ``"class"``: ``?entity1 ns:type.object.type ns:<class>``, a class constraint
  (GrailQA); ``?entity1`` is the node of that class.
* ``"superlative"``: ``MAX(?entity1)`` or ``MIN(?entity1)``: ``?entity1`` takes
  the largest (smallest) value it has over the whole query pattern.
* ``"count"``: ``COUNT(DISTINCT ?entity1)``: the answer is how many values
  ``?entity1`` has.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

STRUCTURES = ("1", "2", "3", "filter", "order", "class", "superlative", "count")


@dataclass(frozen=True)
class Statement:
    """One reusable piece of a query, in canonical form.

    ``sparql`` is the fragment in the readable ``ns:`` form using only the
    canonical variables. ``id`` is a stable hash of ``structure`` and
    ``sparql``. ``question_ids`` lists the questions it was decomposed from,
    deduplicated and sorted.
    """

    id: str
    structure: str
    sparql: str
    relations: tuple[str, ...]
    question_ids: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "structure": self.structure,
            "sparql": self.sparql,
            "relations": list(self.relations),
            "question_ids": list(self.question_ids),
        }

    @classmethod
    def from_json(cls, obj: dict) -> Statement:
        return cls(
            id=obj["id"],
            structure=obj["structure"],
            sparql=obj["sparql"],
            relations=tuple(obj["relations"]),
            question_ids=tuple(obj.get("question_ids", ())),
        )


@dataclass(frozen=True)
class MemoryRecord:
    """A statement as stored in a memory bank: with its English descriptions.

    ``fallback`` names what fired while describing it (for example
    ``"llm-invalid->template"``), or is ``None``.
    """

    statement: Statement
    descriptions: tuple[str, ...]
    describer: str
    fallback: str | None = None


@dataclass(frozen=True)
class PlanStep:
    """One planner step.

    ``kind`` is ``"find"``, ``"check"`` (Make sure), ``"sort"``, ``"answer"``, or for
    GrailQA's constructs ``"class"``, ``"superlative"`` and ``"count"``.
    ``text`` is the step as written; the other fields are what the parser read
    from it:

    * find: ``source`` (entity name or ``?var``), ``relation`` (phrase),
      ``target`` (``?var`` assigned).
    * check: ``target`` (``?var`` checked), ``op`` (``=`` ``!=`` ``<`` ``<=``
      ``>`` ``>=``), ``value`` (entity name or literal text).
    * sort: ``target`` (sort key ``?var``), ``op`` (``asc``/``desc``),
      ``limit``, ``offset``.
    * answer: ``target``.
    * class (GrailQA): ``target`` (``?var``), ``value`` (class name); ``op``
      ``"find"`` when the step finds the members of the class, None when it
      checks ``target``'s class.
    * superlative: ``target`` (the ``?var`` that takes its largest or smallest
      value), ``op`` (``max``/``min``).
    * count: ``source`` (``?var`` counted), ``target`` (``?var`` for the count).

    ``statement``: the id of the memory statement a grounded planner chose a find step from (the step is
    that statement's rendering, and the planner checked that it binds); recall keeps it instead of
    searching for one by the step's text. None for steps that were written, not chosen.
    """

    kind: str
    text: str
    source: str | None = None
    relation: str | None = None
    target: str | None = None
    op: str | None = None
    value: str | None = None
    limit: int | None = None
    offset: int | None = None
    statement: str | None = None

    def to_json(self) -> dict:
        """The fields that are set, for a saved plan (:meth:`from_json` reads them back)."""
        return {k: v for k, v in self.__dict__.items() if v is not None}

    @classmethod
    def from_json(cls, obj: dict) -> PlanStep:
        """A step from :meth:`to_json`; ValueError names what is not one."""
        if not isinstance(obj, dict) or not {"kind", "text"} <= set(obj) or set(obj) - set(cls.__dataclass_fields__):
            raise ValueError(f"not a saved plan step: {obj!r}")
        return cls(**obj)


class BeamPlan(NamedTuple):
    """One complete plan of a grounded planner's beam: its text, its score and the planner's own steps."""

    text: str
    score: float
    steps: tuple[PlanStep, ...] = ()  # () when only the text is known (an older saved run): it is parsed


@dataclass
class Plan:
    """The parsed steps and what the tolerant parser dropped (with reasons).

    A grounded planner also gives ``beam``: the complete plans it found (:class:`BeamPlan`), best first
    (the first is this plan); the pipeline runs them in order and keeps the first that answers.

    ``rescue``: the hybrid planner's grounded plan for a question whose plan (this one) found nothing
    (:mod:`memq.plan.hybrid`). The pipeline sets it when it plans the rescue; a saved run carries it, so that
    re-scoring needs no model call.
    """

    steps: list[PlanStep]
    raw: str = ""
    dropped: list[tuple[str, str]] = field(default_factory=list)
    beam: list[BeamPlan] = field(default_factory=list)  # a grounded planner's complete plans, best first
    notes: list[str] = field(default_factory=list)  # what the planner did that the trace must show
    cost: dict = field(default_factory=dict)  # the planner's cost for this plan (forward passes, tokens, ...)
    ranked: list[dict] = field(default_factory=list)  # a ranked grounded planner: each step's candidates, both scores
    # a grounded planner's line searches, in order: each partial plan and the lines the model took after it
    searched: list[dict] = field(default_factory=list)
    rescue: Plan | None = None  # the hybrid planner's grounded plan, made when this plan found nothing


@dataclass(frozen=True)
class Recalled:
    """A statement recalled for a plan step, with its similarity score."""

    step_index: int
    statement: Statement
    description: str
    score: float


@dataclass
class Trace:
    """What happened while answering: nothing the pipeline does is silent."""

    fallbacks: list[str] = field(default_factory=list)
    attempts: list[dict] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    llm_calls: int = 0
    plans: list[dict] = field(default_factory=list)  # execution-guided choice: {"plan", "score", "rows"} per plan tried
    cost: dict = field(default_factory=dict)  # the planner's cost: forward passes, tokens scored, candidates, ...
    backend: str | None = None  # the planner's LLM backend ("llamacpp", "transformers"); None without a model call
    links: list[dict] = field(default_factory=list)  # entity linking: each entity linked, its mention and score


@dataclass
class Answer:
    """The result of :func:`memq.answer`.

    ``answers`` are ``(id, name)`` pairs, ordered as documented in
    :mod:`memq.api`.
    """

    question: str
    answers: list[tuple[str, str]]
    sparql: str
    plan: Plan
    recalled: list[Recalled]
    trace: Trace
