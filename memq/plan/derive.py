"""Gold query -> target plan: the planner's training data (MemQ section 4.2).

Each gold query is decomposed (:func:`memq.decompose.decompose_query`) into
bound statements in execution order from the topic entity; each statement's
description (from a ``describe`` callable, e.g. the TemplateDescriber) becomes
one step, with the canonical variables replaced by what they are bound to in
this query:

* structures 1-3: ``Find <description without "?entity2 is">, assign it to ?v.``
  ``?entity1`` (and ``?entity2`` for structure 3) become the topic entity's
  NAME or the query's own variable (``?y``); ``?v`` is the query variable the
  statement assigns. A statement whose assigned end is a constant (a *check*:
  ``?x gender Male``) becomes two steps: ``Find the gender of ?x, assign it to
  ?gender.`` and ``Make sure ?gender is Male.`` (the new variable is named
  after the relation, as in the paper's ``?type_of_union``).
* ``filter``: a plain comparison ``FILTER(?entity1 <op> ?value)`` (casts and
  ``str()`` allowed) -> ``Make sure ?v <op> <value>.``; any other filter (time
  constraints, arithmetic) -> ``Make sure <description>.`` read back and
  re-rendered, kept only if the parser recovers its variable and value.
* ``order``: ``Sort ?v in descending order and keep the first result.``
* ``class`` (GrailQA): ``Make sure ?v is a building.``; the class that starts a
  query with no topic entity: ``Find every building, assign it to ?v.`` The
  class is named by :meth:`memq.describe.schema.FreebaseSchema.class_name`.
* ``superlative``: ``Sort ?v in descending order and keep every result tied
  for first.``
* ``count``: ``Count ?v, assign it to ?count.``, and ``?count`` is the answer.
* the query's answer variable ends the plan: ``Finally the answer is ?x.``

Every derived plan is parsed back and must give the same steps; what cannot
be derived raises :class:`DerivationError` with a short ``reason`` code.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from memq.errors import MemQError, PlanParseError
from memq.sparql.model import MIRRORED, Call, Iri, Literal, Term, Var
from memq.types import PlanStep, Statement

from .format import OPS, VAR, parse_plan, render_plan, render_step

Describe = Callable[[Statement], str]

#: Bumped whenever the derived plans change (it names the cached data files).
DERIVE_VERSION = "1"

_PLACEHOLDER = re.compile(r"\?(entity[123]|value\d*|cvt\d*)\b")
_LEAD = re.compile(r"^\s*\?entity[23]\s+(?:is|are)\s+", re.I)
_CASTS = ("str", "year", "http://www.w3.org/2001/XMLSchema#")


class DerivationError(MemQError):
    """A gold query could not be turned into a plan; ``reason`` is a short code for statistics."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


@dataclass(frozen=True)
class DerivedPlan:
    """One training example: question, topic entities, and the target plan."""

    question_id: str
    question: str
    dataset: str
    parse_id: str
    entities: tuple[tuple[str, str], ...]
    steps: tuple[PlanStep, ...]
    statement_ids: tuple[str | None, ...] = field(default=())

    @property
    def text(self) -> str:
        return render_plan(self.steps)

    @property
    def entity_names(self) -> list[str]:
        return [name for _, name in self.entities]


def term_name(term: Term, names: dict[str, str]) -> str:
    """How a plan mentions a query term: ``?var``, an entity's name, or a literal's text."""
    if isinstance(term, Var):
        return f"?{term.name}"
    if isinstance(term, Iri):
        if term.is_entity:
            return names.get(term.local) or _mid_names().get(term.local) or term.local
        return term.local
    if isinstance(term, Literal):
        value = term.value
        if term.datatype and term.datatype.endswith(("dateTime", "date")) and value.endswith("T00:00:00"):
            value = value[: -len("T00:00:00")]
        return " ".join(value.split())
    raise DerivationError("unknown-term", repr(term))


def _mid_names() -> dict[str, str]:
    from memq.datasets import mid_names

    return mid_names()


def _substitute(text: str, binding: dict[str, Term], names: dict[str, str]) -> str:
    def repl(m: re.Match) -> str:
        key = "?" + m.group(1)
        if key not in binding:
            raise DerivationError("unbound-placeholder", f"{key} in {text!r}")
        return term_name(binding[key], names)

    return _PLACEHOLDER.sub(repl, text)


def _phrase(description: str) -> str:
    return _LEAD.sub("", description.strip()).rstrip(" .")


def fresh_variable(statement: Statement, used: set[str]) -> str:
    """A new ``?name`` after the statement's last relation, not in ``used`` (which it joins)."""
    base = statement.relations[-1].split(".")[-1] if statement.relations else "value"
    base = re.sub(r"[^A-Za-z0-9_]", "_", base).strip("_") or "value"
    if base[0].isdigit():
        base = "v_" + base
    name, n = base, 2
    while name in used:
        name, n = f"{base}{n}", n + 1
    used.add(name)
    return f"?{name}"


def _comparison(statement: Statement) -> tuple[str, bool] | None:
    """``(op, ok)`` when the filter is ``?entity1 <op> ?value`` up to casts; else None."""
    from memq.describe.template import parse_fragment

    try:
        query = parse_fragment(statement)
    except MemQError:
        return None
    filters = query.where.filters
    if len(filters) != 1:
        return None
    expr = filters[0]
    if not (isinstance(expr, Call) and expr.op in OPS and len(expr.args) == 2):
        return None
    lhs, rhs = expr.args
    while isinstance(lhs, Call) and len(lhs.args) == 1 and lhs.op.startswith(_CASTS):
        lhs = lhs.args[0]
    while isinstance(rhs, Call) and len(rhs.args) == 1 and rhs.op.startswith(_CASTS):
        rhs = rhs.args[0]
    if lhs == Var("entity1") and rhs == Var("value"):
        return expr.op, True
    if lhs == Var("value") and rhs == Var("entity1"):
        return MIRRORED.get(expr.op, expr.op), True
    return None


_VALID_AT = re.compile(r"^(?P<subject>.+?\?entity1) was valid at time \?value, with its (?P<what>.+?) "
                       r"(?P<cmp>on or before|on or after|before|after) \?value\.?$")


def _check_from_description(statement: Statement, binding: dict[str, Term], names: dict[str, str],
                            describe: Describe) -> PlanStep:
    desc = describe(statement)
    m = _VALID_AT.match(desc.strip())
    if m:  # time constraint: "the start date of the sports team roster ?y is on or before 2015-08-10"
        desc = f"the {m.group('what')} of {m.group('subject')} is {m.group('cmp')} ?value"
    if desc.lower().startswith(("filter on", "make sure")) and "FILTER" in desc:
        raise DerivationError("filter-not-described", statement.sparql)
    desc = re.sub(r"^make sure\s+", "", desc.strip(), flags=re.I)
    text = "Make sure " + _substitute(desc, binding, names).rstrip(" .") + "."
    try:
        plan = parse_plan(text)
    except PlanParseError as exc:
        raise DerivationError("filter-unreadable", text) from exc
    step = _with_text(plan.steps[0])
    want_target = term_name(binding["?entity1"], names) if "?entity1" in binding else None
    value = binding.get("?value")
    mentioned = {step.target} | set(VAR.findall(step.relation or ""))
    if step.kind != "check" or (want_target and want_target not in mentioned) or (
            value is not None and step.value != term_name(value, names)):
        raise DerivationError("filter-unreadable", text)
    return step


def _order_step(query, binding: dict[str, Term]) -> PlanStep:
    if not query.order_by:
        raise DerivationError("limit-without-order", f"LIMIT {query.limit}")
    if len(query.order_by) > 1:
        raise DerivationError("multi-key-order", str(len(query.order_by)))
    key = binding.get("?entity1")
    if not isinstance(key, Var):
        raise DerivationError("order-not-on-variable", repr(key))
    op = "desc" if query.order_by[0].descending else "asc"
    step = PlanStep("sort", "", target=f"?{key.name}", op=op, limit=query.limit, offset=query.offset or None)
    return _with_text(step)


def _with_text(step: PlanStep) -> PlanStep:
    from dataclasses import replace

    return replace(step, text=render_step(step))


def find_step(description: str, structure: str, mentions: dict[str, str], target: str,
              others: dict[str, str] | None = None) -> PlanStep:
    """The Find step derivation writes for a path statement (structure 1-3) with this primary ``description``.

    ``mentions`` maps the known placeholders (``?entity1``, and ``?entity2`` for structure 3) to how the
    plan names them: a topic entity's name or a ``?var``; ``target`` is the ``?var`` the step assigns.
    ``others``: how any other placeholder the description mentions is named (a gold query's ``?cvt``).
    The grounded planner (:mod:`memq.plan.grounded`) renders its candidates with it, so they read as the
    plans the fine-tuned planner was trained on.
    """
    phrase = _phrase(description)
    missing = [k for k in mentions if k not in phrase]
    names = {**(others or {}), **mentions}

    def repl(m: re.Match) -> str:
        key = "?" + m.group(1)
        if key not in names:
            raise DerivationError("unbound-placeholder", f"{key} in {phrase!r}")
        return names[key]

    phrase = _PLACEHOLDER.sub(repl, phrase)
    if missing:  # the description does not name its known side: "... of <source>"
        phrase += " of " + " and ".join(mentions[k] for k in missing)
    second = mentions.get("?entity2") if structure == "3" else None
    return _with_text(PlanStep("find", "", source=mentions.get("?entity1"), relation=phrase, target=target,
                               value=second))


def derive_steps(decomposition, names: dict[str, str], describe: Describe) -> tuple[list[PlanStep], list[str | None]]:
    """Bound statements of one query -> plan steps (+ the statement id behind each step)."""
    used = {v.name for v in _query_vars(decomposition.query)}
    steps: list[PlanStep] = []
    ids: list[str | None] = []
    for bound in decomposition.bounds:
        st, binding = bound.statement, dict(bound.binding)
        if st.structure in ("1", "2", "3"):
            assigned = "?entity3" if st.structure == "3" else "?entity2"
            if assigned not in binding:
                raise DerivationError("check-without-target", st.sparql)
            target = binding[assigned]
            check_value = None
            if not isinstance(target, Var):
                check_value = term_name(target, names)
                binding[assigned] = Var(fresh_variable(st, used)[1:])
            mentions = {k: term_name(binding[k], names) for k in ("?entity1", "?entity2")
                        if k != assigned and k in binding}
            var = term_name(binding[assigned], names)
            others = {k: term_name(v, names) for k, v in binding.items() if _PLACEHOLDER.fullmatch(k)}
            steps.append(find_step(describe(st), st.structure, mentions, var, others))
            ids.append(st.id)
            if check_value is not None:
                steps.append(_with_text(PlanStep("check", "", target=var, op="=", value=check_value)))
                ids.append(st.id)
        elif st.structure == "filter":
            cmp = _comparison(st)
            if cmp is not None and "?entity1" in binding and "?value" in binding:
                step = PlanStep("check", "", target=term_name(binding["?entity1"], names), op=cmp[0],
                                value=term_name(binding["?value"], names))
                steps.append(_with_text(step))
            else:
                steps.append(_check_from_description(st, binding, names, describe))
            ids.append(st.id)
        elif st.structure == "order":
            steps.append(_order_step(decomposition.query, binding))
            ids.append(st.id)
        elif st.structure == "class":
            steps.append(_with_text(PlanStep("class", "", target=term_name(binding["?entity1"], names),
                                             value=class_name(st), op=None if bound.check else "find")))
            ids.append(st.id)
        elif st.structure == "superlative":
            op = "max" if st.sparql.startswith("MAX") else "min"
            steps.append(_with_text(PlanStep("superlative", "", target=term_name(binding["?entity1"], names), op=op)))
            ids.append(st.id)
        elif st.structure == "count":
            counted = term_name(binding["?entity1"], names)
            count_var = "?count" if "count" not in used else f"?count_{len(used)}"
            used.add(count_var[1:])
            steps.append(_with_text(PlanStep("count", "", source=counted, target=count_var)))
            ids.append(st.id)
        else:
            raise DerivationError("unknown-structure", st.structure)
    answer = decomposition.query.answer_var
    counts = [s for s in steps if s.kind == "count"]
    target = counts[-1].target if counts else f"?{answer.name}"
    steps.append(_with_text(PlanStep("answer", "", target=target)))
    ids.append(None)
    return steps, ids


def class_name(statement: Statement) -> str:
    """How a plan names the class of a ``class`` statement: ``architecture.building`` -> ``building``, ``film.producer``
    -> ``film producer`` (:meth:`memq.describe.schema.FreebaseSchema.class_name`)."""
    from memq.describe.schema import schema

    return schema().class_name(statement.sparql.split()[-2].removeprefix("ns:"))


def _query_vars(query) -> set[Var]:
    out: set[Var] = set()
    for t in query.where.all_triples():
        out.update(x for x in t.terms() if isinstance(x, Var))
    return out


def derive_plan(question, describe: Describe, *, decompose=None) -> DerivedPlan:
    """The target plan of a GoldQuestion: its first parse that decomposes and derives.

    ``decompose(query, question_id, topics)`` defaults to
    :func:`memq.decompose.decompose_query`.
    """
    from memq.decompose import decompose_query
    from memq.sparql import parse_query

    decompose = decompose or decompose_query
    first_error: DerivationError | None = None
    for parse in question.parses:
        names = {mid: name for mid, name in parse.topic_entities}
        try:
            try:
                query = parse_query(parse.sparql)
            except MemQError as exc:
                raise DerivationError("sparql-parse", str(exc)) from exc
            try:
                decomposition = decompose(query, question.id, [m for m, _ in parse.topic_entities])
            except MemQError as exc:
                raise DerivationError("decompose", str(exc)) from exc
            steps, ids = derive_steps(decomposition, names, describe)
            _verify(steps, names.values())
        except DerivationError as exc:
            first_error = first_error or exc
            continue
        return DerivedPlan(question.id, question.question, question.dataset, parse.parse_id,
                           tuple(parse.topic_entities), tuple(steps), tuple(ids))
    raise first_error or DerivationError("no-parse", question.id)


def _verify(steps: Sequence[PlanStep], entities) -> None:
    """The rendered plan must parse back into the same steps."""
    text = render_plan(steps)
    try:
        back = parse_plan(text, list(entities))
    except PlanParseError as exc:
        raise DerivationError("roundtrip", str(exc)) from exc
    if back.dropped or len(back.steps) != len(steps):
        raise DerivationError("roundtrip", f"dropped {back.dropped}")
    for a, b in zip(steps, back.steps, strict=True):
        if (a.kind, a.target, a.op, a.value if a.kind != "find" else None) != (
                b.kind, b.target, b.op, b.value if b.kind != "find" else None) or (
                a.kind == "count" and a.source != b.source):
            raise DerivationError("roundtrip", f"{a.text!r} reads back as {b!r}")
