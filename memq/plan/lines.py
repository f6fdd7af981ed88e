"""The grounded planner's partial plans and candidate lines, and GrailQA's lines among them.

:class:`Hyp` is a partial plan of the search (:mod:`memq.plan.grounded`), :class:`Line` a candidate line, and
:func:`extend` continues a partial plan with a scored line.

**GrailQA's lines**: a class to start from, class checks, counts and superlatives.

GrailQA's questions may name no entity ("which building has less than 9
floors?"), check the class of their answer, count it, or keep the largest of a
value (:mod:`memq.plan.format`). The grounded planner (:mod:`memq.plan.grounded`)
offers these lines when its memory holds ``class`` statements (the GrailQA form
of the schema does; WebQSP's and CWQ's banks have none, so their planning is
unchanged), each grounded in the KG as the Find lines are:

* **a class to start from** (first step, and only when the question names no entity: GrailQA's plans start
  from their entity): ``Find every building, assign it to ?x0.`` for the classes where the path statements
  most similar to the question start ("1.0 teu's is measured in what?": the capacity in TEUs of a unit of cargo
  capacity), then the class statements most similar to the question, each with a member in the KG. In all 172
  of GrailQA's train plans that start from a class, a Find follows the start and the plan ends after a check or a
  superlative (a count comes after a check): so do these (:func:`may_end`);
* **a class check**: ``Make sure ?x0 is a building.`` for each class that some value bound to an assigned
  ``?variable`` has (``type.object.type``), at most ``CHECKS`` per variable, the most similar to the question first;
* **a count**: ``Count ?x0, assign it to ?count.``, when the question asks for one (``ASKS_COUNT``); after it the plan
  can only end with ``?count``, and one that asks "how many" ends only so or at a number (:func:`may_end`);
* **a superlative**: ``Sort ?x1 in descending (ascending) order and keep every result tied for first.``, of a
  variable found through a relation whose range is a number or a date, when the question has a superlative word
  (``SUPERLATIVE``: "most", "earliest", "first", "smallest", ...) and no number or date it writes is left
  unchecked (:func:`unchecked_values`: "which film producer has the highest weight of 57.0kg?" compares);
* **a check** of the variable the last step found: ``Make sure ?x1 < 9.`` for each number and date the question
  writes (:func:`question_values`; a date in GrailQA's form, ``1970-07-01-08:00``) and each comparison when it
  is a numbered ``?xN`` and the question compares (``COMPARES``: "less than", "at least", "before", ...; ``=``
  when it does not); ``Make sure ?thrust_sea_level is 1.519e+06.`` and ``Make sure ?practices is male
  circumcision.`` (each topic entity no step names yet) when it is named after its relation. That is how all 189
  checks of GrailQA's train plans are written (derivation names an equality's variable after its relation).

Every line is closed: there are no open lines (which the model completes token by token, one forward pass
each) with these lines. In GrailQA's train plans every check's value is a number or date the question writes, or
a topic entity.

Variables follow GrailQA's plans: the first unused ``?xN`` (``?x0`` is the answer of
most questions) and the relation-named one, instead of WebQSP's ``?x`` and ``?y``.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field, replace
from functools import cached_property

from memq.errors import MemQError, ReconstructionError
from memq.sparql.model import Group, Var
from memq.types import PlanStep

from .asked import asked_class, asked_patterns, shortens
from .compare import COMPARE, compare_ops
from .format import VAR, answers_its_check, parse_step, render_step
from .neighbourhood import assigned_types
from .values import question_values, unchecked_values

__all__ = ["ClassStatements", "Hyp", "Line", "ShapeLine", "check_lines", "closed", "count_lines", "extend",
           "grail_targets", "has_classes", "may_end", "numeric_at", "question_values", "related_classes",
           "shape_lines", "starts_from_class", "superlative_lines", "unchecked_values", "unnamed"]

STARTS = 12  # class statements offered as a start
RELATED = 6  # of them at most: the classes where the path statements most similar to the question start
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
    """A candidate line: a Find line with its statement, a Finally line, an open line start, a closed Sort line
    (``closed_sorts``), or a GrailQA line."""

    kind: str  # "find", "answer", "open", "sort", or "shape" (GrailQA's lines, :class:`ShapeLine`)
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
    rank: float = 0.0  # a bonus (<= 0) the search adds: a class start other than the class asked for

    @property
    def text(self) -> str:
        return self.step.text


def closed(kind: str, statement=None, **fields) -> ShapeLine:
    """A closed line: the step of ``kind`` with ``fields``, its text as the plan language renders it."""
    step = PlanStep(kind, "", **fields)
    return ShapeLine(replace(step, text=render_step(step)), statement)


def has_classes(bank) -> bool:
    """Whether ``bank`` holds class statements (GrailQA's form of the schema)."""
    return any(r.statement.structure == "class" for r in bank.records)


def class_id(statement) -> str:
    """``?entity1 ns:type.object.type ns:architecture.building .`` -> ``architecture.building``."""
    return statement.sparql.split()[-2].removeprefix("ns:")


class ClassStatements:
    """The class statements of a bank, by class id, with their plan names (built once per bank)."""

    def __init__(self, bank, edges_of=None) -> None:
        """``edges_of(statement)``: a path statement's edges at ``?entity1`` and ``?entity2`` (the grounded
        planner's cache of :func:`memq.plan.neighbourhood.statement_edges`)."""
        from .derive import class_name

        self.bank, self.edges_of = bank, edges_of
        self.by_class: dict[str, object] = {}
        self.names: dict[str, str] = {}
        for record in bank.records:
            st = record.statement
            if st.structure == "class" and class_id(st) not in self.by_class:
                self.by_class[class_id(st)] = st
                self.names[st.id] = class_name(st)

    def starts(self, sims: dict[str, float], has_members, k: int = STARTS, first: list[str] = ()) -> list[ShapeLine]:
        """``Find every <class>, assign it to ?x0.`` for the class ids ``first`` (:func:`related_classes`), then the
        classes most similar to the question (``sims``: statement id -> similarity), ``k`` in all, each with
        ``has_members(class id)``; one line per class name."""
        ranked = [(c, self.by_class[c]) for c in first if c in self.by_class]
        ranked += sorted(self.by_class.items(), key=lambda kv: -sims.get(kv[1].id, -1.0))
        out: list[ShapeLine] = []
        seen: set[str] = set()
        for cid, st in ranked:
            if len(out) >= k:
                break
            name = self.names[st.id]
            if name in seen or not has_members(cid):
                continue
            seen.add(name)
            out.append(closed("class", st, target="?x0", value=name, op="find"))
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
            out.append(closed("class", st, target=var, value=name))
            if len(out) >= k:
                break
        return out

    def values_named(self, neigh, draft, group: Group) -> set[str]:
        """The class names of the values that ``group`` (a Find line's probe, its target ``?memq_t``) binds after
        ``draft`` (the plan so far), those the bank holds."""
        probe = draft.copy()
        probe.add_alternatives([group])
        return {self.names[self.by_class[t].id] for t in neigh.types(Var("memq_t"), probe) if t in self.by_class}

    def asked(self, question: str, entities=()) -> str | None:
        """The class ``question`` about the topic ``entities`` (names) asks for by name
        (:func:`memq.plan.asked.asked_class`), or None."""
        return asked_class(question, self.patterns, self.named, entities)

    @cached_property
    def patterns(self) -> tuple[re.Pattern, re.Pattern]:
        """The patterns that read the class asked for (:func:`memq.plan.asked.asked_patterns`)."""
        return asked_patterns(self.named)

    @cached_property
    def named(self) -> dict[str, str]:
        """Each class name in lower case -> the name (the first, sorted, of those alike: it is written last)."""
        return {name.lower(): name for name in sorted(self.names.values(), reverse=True)}


def count_lines(assigned: list[str]) -> list[ShapeLine]:
    """``Count ?v, assign it to ?count.`` for each assigned ``?v``."""
    return [closed("count", source=v, target="?count") for v in assigned]


def superlative_lines(assigned: list[str]) -> list[ShapeLine]:
    """The two superlatives (largest, smallest, ties kept) of each assigned ``?v`` but the first (the answer)."""
    return [closed("superlative", target=v, op=op) for v in assigned[1:] for op in ("max", "min")]


def grail_targets(used: set[str]) -> list[str]:
    """The two first unused ``?xN`` (GrailQA's plans name their nodes so)."""
    out: list[str] = []
    n = 0
    while len(out) < 2:
        if f"?x{n}" not in used:
            out.append(f"?x{n}")
        n += 1
    return out


def shape_lines(classes: ClassStatements, h: Hyp, neigh, sims: dict[str, float], question: str = "",
                names: list[str] = (), asked_class: float = 0.0, shortened: bool = False,
                viable=None) -> list[ShapeLine]:
    """GrailQA's lines after the partial plan ``h``: a class to start from (before any step, when the question names no
    entity: ``names`` is empty), or class checks of the ``?variables`` not checked yet, checks of the last one
    against the ``question``'s values (:func:`question_values`) and the topic entity ``names`` no step names
    (each only when some value of the plan so far passes it, :meth:`Neighbourhood.passing`), counts, and
    superlatives (one a plan). With ``asked_class``, the class the question asks for
    (:meth:`ClassStatements.asked`) is offered first as a start, and the other starts lose that many nats (63 of
    the 65 GrailQA train questions with no entity that ask for a class start from it), and so do the classes it
    shortens when ``shortened`` (:func:`~memq.plan.asked.shortens`). ``viable(class id)``: whether a start may end."""
    from memq.sparql.model import Var
    if not h.assigned:
        if names:
            return []
        first = related_classes(classes.bank.records, sims, classes.edges_of) if classes.edges_of else []
        asked = classes.asked(question, names) if asked_class else None

        def fits(name: str | None) -> bool:
            return name == asked or shortened and shortens(asked or "", name or "")

        if asked:
            first = [c for c, st in classes.by_class.items() if fits(classes.names[st.id])] + first
        members = neigh.has_members if viable is None else (lambda c: neigh.has_members(c) and viable(c))
        starts = classes.starts(sims, members, first=first)
        if not any(fits(line.step.value) for line in starts):
            return starts
        return [line if fits(line.step.value) else replace(line, rank=-asked_class) for line in starts]
    if len(h.steps) == 1 and starts_from_class(h.steps):
        return []  # a Find follows a class start (in all 172 train plans that start from a class)
    checked = {st.target for st in h.steps if st.kind == "class"}
    out = [line for v in h.assigned if v not in checked
           for line in classes.checks(v, neigh.types(Var(v[1:]), h.draft), sims)]
    last = h.steps[-1] if h.steps else PlanStep("answer", "")
    if last.kind == "find":  # a check follows the find of its variable: = on a named one, a comparison on ?xN
        numbered = re.fullmatch(r"\?x\d+", last.target or "") is not None
        compares = numbered and COMPARES.search(question) is not None  # else = (a question that compares says so)
        checks = check_lines(last.target, question_values(question), [] if numbered else unnamed(h.steps, names),
                             ops=compare_ops(question) if compares else ("=",))
        passed = neigh.passing(h.draft, h.rec, [line.step for line in checks])  # one no value passes: no line
        out += [line for line, ok in zip(checks, passed, strict=True) if ok]
    if ASKS_COUNT.search(question):
        out += count_lines(h.assigned)
    if (not any(st.kind == "superlative" for st in h.steps) and SUPERLATIVE.search(question)
            and not unchecked_values(h.steps, question, names)):
        out += [line for line in superlative_lines(h.assigned) if numeric_at(classes.bank, h.steps, line.step.target)]
    return out


# "how many": all 40 GrailQA train questions that say it count; of the 81 synthetic programs' questions that say it,
# 50 count, 11 read a number ("how many employees does audi have?"), the rest a list or a number in a CVT. "what is
# the number of", "what number of", "what are the total numbers of": the 6 train questions that say so count
HOW_MANY = re.compile(r"\bhow many\b|\bwhat\s+(?:(?:is|are|was|were)\s+)?(?:the\s+)?(?:total\s+)?(?:numbers?|amount)"
                      r"\s+of\b", re.I)
# 45 of GrailQA's 46 train questions that count say so (and 5 of the 954 others)
ASKS_COUNT = re.compile(rf"\b(?:number of|count)\b|{HOW_MANY.pattern}", re.I)  # HOW_MANY reads "how many"
# 67 of GrailQA's 68 train questions whose plan has a superlative say so with one of these (906 of the 932 others
# none): "most", "earliest", "first", "smallest", ...
SUPERLATIVE = re.compile(r"\b(?:most|least|fewest|maximum|minimum|max|min|first|last|top|\w{2,}est)\b", re.I)
# 40 of GrailQA's 41 train questions whose plan compares a number or date (<, <=, >, >=) say so with one of these
# words; 88 of the 93 whose plan checks a number with = say none (4 of the 5 others name a "maximum" or "minimum"
# relation, which is why those are not among them)
COMPARES = re.compile(r"\b(?:more|less|fewer|greater|larger|bigger|smaller|higher|lower|over|under|above|below|"
                      r"at least|at most|exceed\w*|before|after|earlier|later|sooner|prior to|since|until|beyond|"
                      r"up to|than|older|younger|longer|shorter|heavier|lighter)\b", re.I)
NUMERIC = ("type.int", "type.float", "type.datetime")


def numeric_at(bank, steps, var: str) -> bool:
    """Whether the find that assigned ``var`` finds numbers or dates (unknown statements do): the ?variable's side of
    its statement (``assigned_types``; "the court whose founded is ?x0" finds courts), else any relation's range."""
    from memq.describe.schema import schema

    for st in steps:
        if st.kind == "find" and st.target == var:
            record = bank.get(st.statement) if st.statement and bank is not None else None
            types = assigned_types(record.statement, schema()) if record is not None else {"type.int"}
            return any(t in NUMERIC for t in types or {schema().range(r) for r in record.statement.relations})
    return False


def check_lines(var: str, values: list[str], entities: list[str], ops=("=",) + COMPARE) -> list[ShapeLine]:
    """``Make sure <var> <op> <value>.`` for each value and each of ``ops``, and ``Make sure <var> is <entity>.``."""
    return [closed("check", target=var, op=op, value=value)
            for value, each in [(v, ops) for v in values] + [(e, ("=",)) for e in entities] for op in each]


def related_classes(records, sims: dict[str, float], edges_of, k: int = RELATED) -> list[str]:
    """The classes (schema domain or range) at the ``?entity1`` end of the path statements among ``records`` most
    similar to the question (``sims``), ``k`` at most, most similar first; ``edges_of`` gives a statement's edges."""
    from memq.describe.schema import schema

    roles = schema()
    paths = sorted((r.statement for r in records if r.statement.structure in ("1", "2", "3")),
                   key=lambda st: -sims.get(st.id, -1.0))
    out: list[str] = []
    for st in paths:
        for rel, way in sorted(edges_of(st)[0]):
            cid = roles.domain(rel) if way == "out" else roles.range(rel)
            if cid and cid not in out:
                out.append(cid)
        if len(out) >= k:
            break
    return out[:k]


def may_end(steps, question: str = "", target: str | None = None, bank=None, names=None) -> bool:
    """Whether a plan may end (a Finally line) after ``steps``: one that starts from a class only after a check
    or a superlative (a question that names no entity constrains its class; a count comes after a check); one for
    a ``question`` that asks "how many" not at the ``?variable`` ``target`` unless a number was found there
    (:func:`numeric_at` with ``bank``) and no check holds it (a number the question gives is not the one it asks
    for): such a plan counts (``HOW_MANY``; a counted plan's one ending is offered apart). Give the question only
    with GrailQA's lines: WebQSP's plans never count. Never at a ``target`` a check makes equal to one of ``names``."""
    if target is not None and (answers_its_check(steps, target, names or ()) or HOW_MANY.search(question) and (
            not numeric_at(bank, steps, target) or any(st.kind == "check" and st.target == target for st in steps))):
        return False
    if starts_from_class(steps):
        return any(st.kind in ("check", "superlative") for st in steps)
    return True


def starts_from_class(steps) -> bool:
    return bool(steps) and steps[0].kind == "class" and steps[0].op == "find"


def extend(h: Hyp, line: Line, scored, lm, question: str, names, allows=None) -> Hyp | None:
    """``h`` continued with one scored line, or None when the line cannot be used. ``allows(h, step)``: whether a
    written *Make sure* or *Sort* step may continue ``h`` (any, without it)."""
    new = Hyp(list(h.lines), list(h.steps), h.ids + list(scored.ids), h.total + scored.score,
              h.tokens + len(scored.ids), h.draft.copy(), copy.deepcopy(h.rec), list(h.assigned),
              False, list(h.notes))
    if line.kind == "find":
        try:
            group = new.rec.find(line.step, line.statement)
        except ReconstructionError:
            return None
        new.draft.add_alternatives([group])
        new.assigned.append(line.step.target)
        new.lines.append(line.text)
        new.steps.append(replace(line.step, statement=line.statement.id))
    elif line.kind == "shape":  # GrailQA's lines (ShapeLine)
        if line.step.kind == "class":
            try:
                new.draft.add_alternatives([Group(triples=(new.rec.class_triple(line.step, line.statement),))])
            except ReconstructionError:
                return None
        if line.step.kind == "count" or line.step.op == "find":
            new.assigned.append(line.step.target)
        new.lines.append(line.text)
        new.steps.append(line.step)
    elif line.kind == "answer":
        new.lines.append(line.text)
        new.steps.append(line.step)
        new.done = True
    else:  # an open line the model completed, or a closed Sort line: parsed and held to the rules alike
        text = " ".join(lm.decode(list(scored.ids)).split())
        try:
            step = parse_step(text, names)
        except MemQError:
            return None
        if step.kind not in ("check", "sort") or not set(VAR.findall(text)) <= set(new.assigned) \
                or not VAR.findall(text) or (allows and not allows(h, step)):
            return None
        if step.kind == "check" and step.value:
            origin = "copied from the question" if step.value.lower() in question.lower() else "generated"
            new.notes.append(f"step {len(new.lines) + 1}: constant {step.value!r} {origin}")
        new.lines.append(text)
        new.steps.append(step)
        new.done = scored.ids[-1] == lm.eos_id
    return new
