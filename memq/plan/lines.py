"""The grounded planner's partial plans and candidate lines, and GrailQA's lines among them.

:class:`Hyp` is a partial plan of the search (:mod:`memq.plan.grounded`), :class:`Line` a candidate line.

**GrailQA's lines**: a class to start from, class checks, counts and superlatives.

GrailQA's questions may name no entity ("which building has less than 9
floors?"), check the class of their answer, count it, or keep the largest of a
value (:mod:`memq.plan.format`). The grounded planner (:mod:`memq.plan.grounded`)
offers these lines when its memory holds ``class`` statements (the GrailQA form
of the schema does; WebQSP's and CWQ's banks have none, so their planning is
unchanged), each grounded in the KG as the Find lines are:

* **a class to start from** (first step, and only when the question names no entity: GrailQA's plans start
  from their entity): ``Find every building, assign it to ?x0.`` for the
  ``starts`` class statements most similar to the question whose class has a member in the KG;
* **a class check**: ``Make sure ?x0 is a building.`` for each class that some value bound to an assigned
  ``?variable`` has (``type.object.type``), at most ``checks`` per variable, the most similar to the question first;
* **a count**: ``Count ?x0, assign it to ?count.``; after it the plan can only end with ``?count``;
* **a superlative**: ``Sort ?x1 in descending (ascending) order and keep every result tied for first.``

A comparison (``Make sure ?x1 < 9.``) needs its number from the question: the
open ``Make sure`` line, which the model completes, writes it. There is no open
``Sort`` line with these lines (GrailQA's superlatives keep ties: closed lines).

Variables follow GrailQA's plans: the first unused ``?xN`` (``?x0`` is the answer of
most questions) and the relation-named one, instead of WebQSP's ``?x`` and ``?y``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memq.sparql.model import Group
from memq.types import PlanStep

from .format import render_step

__all__ = ["ClassStatements", "Hyp", "Line", "ShapeLine", "count_lines", "grail_targets", "has_classes", "shape_lines",
           "superlative_lines", "unnamed"]

STARTS = 12  # class statements offered as a start, by similarity to the question
CHECKS = 6  # class checks offered per ?variable


@dataclass
class Hyp:
    """A partial plan of the grounded planner's search."""

    lines: list[str] = field(default_factory=list)
    steps: list[PlanStep] = field(default_factory=list)  # the lines as steps, find steps with their statement ids
    ids: list[int] = field(default_factory=list)  # the response so far, newlines included
    total: float = 0.0  # the lines' summed log-probabilities plus their question-prior bonuses (each <= 0)
    tokens: int = 0
    draft: object = None
    rec: object = None
    assigned: list[str] = field(default_factory=list)
    done: bool = False
    notes: list[str] = field(default_factory=list)

    def score(self, norm: str) -> float:
        return self.total if norm == "sum" else self.total / max(1, self.tokens)


@dataclass(frozen=True)
class Line:
    """A candidate line: a Find line with its statement, a Finally line, an open line start, or a GrailQA line."""

    kind: str  # "find", "answer", "open", or "shape" (GrailQA's lines, :class:`ShapeLine`)
    text: str
    ids: tuple[int, ...]
    step: PlanStep | None = None
    statement: object = None
    group: Group | None = None
    rank: float = 0.0  # the ranker's bonus (<= 0): rank_weight times its logit minus the best candidate's


def unnamed(steps, names) -> list[str]:
    """The topic entity ``names`` that no step of a plan names: as a Find step's source or second entity, or as
    a check's constant (case aside)."""
    named = {str(n).lower() for st in steps for n in (st.source, st.value) if n}
    return [n for n in names if n.lower() not in named]


@dataclass(frozen=True)
class ShapeLine:
    """A candidate line that is no path statement: its step and, for a class line, the class statement."""

    step: PlanStep
    statement: object = None  # a class Statement, or None

    @property
    def text(self) -> str:
        return self.step.text


def has_classes(bank) -> bool:
    """Whether ``bank`` holds class statements (GrailQA's form of the schema)."""
    return any(r.statement.structure == "class" for r in bank.records)


def class_id(statement) -> str:
    """``?entity1 ns:type.object.type ns:architecture.building .`` -> ``architecture.building``."""
    return statement.sparql.split()[-2].removeprefix("ns:")


class ClassStatements:
    """The class statements of a bank, by class id, with their plan names (built once per bank)."""

    def __init__(self, bank) -> None:
        from .derive import class_name

        self.by_class: dict[str, object] = {}
        self.names: dict[str, str] = {}
        for record in bank.records if bank is not None else ():
            st = record.statement
            if st.structure == "class" and class_id(st) not in self.by_class:
                self.by_class[class_id(st)] = st
                self.names[st.id] = class_name(st)

    @classmethod
    def empty(cls) -> ClassStatements:
        return cls(None)

    def starts(self, sims: dict[str, float], has_members, k: int = STARTS) -> list[ShapeLine]:
        """``Find every <class>, assign it to ?x0.`` for the ``k`` classes most similar to the question (``sims``:
        statement id -> similarity) that ``has_members(class id)``; one line per class name."""
        ranked = sorted(self.by_class.items(), key=lambda kv: -sims.get(kv[1].id, -1.0))
        out: list[ShapeLine] = []
        seen: set[str] = set()
        for cid, st in ranked:
            if len(out) >= k:
                break
            name = self.names[st.id]
            if name in seen or not has_members(cid):
                continue
            seen.add(name)
            step = PlanStep("class", "", target="?x0", value=name, op="find")
            out.append(ShapeLine(PlanStep("class", render_step(step), target="?x0", value=name, op="find"), st))
        return out

    def checks(self, var: str, types: set[str], sims: dict[str, float], k: int = CHECKS) -> list[ShapeLine]:
        """``Make sure <var> is a <class>.`` for the classes among ``types`` (class ids the values of ``var``
        have) that the bank holds, the ``k`` most similar to the question; one line per class name."""
        found = sorted((self.by_class[t] for t in types if t in self.by_class), key=lambda st: -sims.get(st.id, -1.0))
        out: list[ShapeLine] = []
        seen: set[str] = set()
        for st in found:
            name = self.names[st.id]
            if name in seen:
                continue
            seen.add(name)
            step = PlanStep("class", "", target=var, value=name)
            out.append(ShapeLine(PlanStep("class", render_step(step), target=var, value=name), st))
            if len(out) >= k:
                break
        return out


def count_lines(assigned: list[str]) -> list[ShapeLine]:
    """``Count ?v, assign it to ?count.`` for each assigned ``?v``."""
    out = []
    for v in assigned:
        step = PlanStep("count", "", source=v, target="?count")
        out.append(ShapeLine(PlanStep("count", render_step(step), source=v, target="?count")))
    return out


def superlative_lines(assigned: list[str]) -> list[ShapeLine]:
    """The two superlatives (largest, smallest, ties kept) of each assigned ``?v`` but the first (the answer)."""
    out = []
    for v in assigned[1:]:
        for op in ("max", "min"):
            step = PlanStep("superlative", "", target=v, op=op)
            out.append(ShapeLine(PlanStep("superlative", render_step(step), target=v, op=op)))
    return out


def grail_targets(used: set[str]) -> list[str]:
    """The two first unused ``?xN`` (GrailQA's plans name their nodes so)."""
    out: list[str] = []
    n = 0
    while len(out) < 2:
        if f"?x{n}" not in used:
            out.append(f"?x{n}")
        n += 1
    return out


def shape_lines(classes: ClassStatements, h: Hyp, neigh, sims: dict[str, float], start: bool = True) -> list[ShapeLine]:
    """GrailQA's lines after the partial plan ``h``: a class to start from (before any step, when ``start``: the
    question names no entity), or class checks of the ``?variables`` not checked yet, counts, and superlatives
    (one a plan)."""
    from memq.sparql.model import Var

    if not h.assigned:
        return classes.starts(sims, neigh.has_members) if start else []
    checked = {st.target for st in h.steps if st.kind == "class"}
    out = [line for v in h.assigned if v not in checked
           for line in classes.checks(v, neigh.types(Var(v[1:]), h.draft), sims)]
    out += count_lines(h.assigned)
    if not any(st.kind == "superlative" for st in h.steps):
        out += superlative_lines(h.assigned)
    return out
