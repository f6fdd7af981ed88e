"""Answer assembly: the steps' chosen statements -> one query; the KG's rows -> named answers.

* :func:`answer_variable`: the variable the plan answers with.
* :func:`build_query`: every step's choice (:func:`memq.reconstruct.ground.apply_step`)
  in one draft, plus the boilerplate every gold query carries (the language
  filter on the answer, and that the answer is not the node its own step
  starts from: ``?x != topic`` in WebQSP, ``?x != ?c`` in CWQ's compositions).
* :func:`distinct_values` and :func:`named_answers`: the answer terms of
  the rows, then ``(id, name)`` pairs.

Answer order (documented, deterministic): when the query has ORDER BY, the
order the KG returns; otherwise sorted by (name, id), case-insensitively.
Hits@1 takes the first answer of this list.
"""

from __future__ import annotations

from ..errors import ReconstructionError
from ..sparql.model import Iri, Literal, Query, Var
from ..types import Plan, Trace
from .ground import StepChoice, apply_step
from .reconstructor import Draft, Reconstructor


def answer_variable(plan: Plan, trace: Trace) -> Var:
    """The target of the last Finally step; without one, the last find target (traced)."""
    for step in reversed(plan.steps):
        if step.kind == "answer" and step.target and step.target.startswith("?"):
            return Var(step.target[1:])
    for step in reversed(plan.steps):
        if step.kind == "find" and step.target and step.target.startswith("?"):
            trace.fallbacks.append(f"plan has no answer step; answering the last find target {step.target}")
            return Var(step.target[1:])
    raise ReconstructionError("the plan assigns no variable to answer with")


def build_query(choices: list[StepChoice], rec: Reconstructor, answer: Var, trace: Trace | None,
                skip_checks: int = 0) -> Query:
    """The query of all steps' current choices, leaving out the last ``skip_checks`` Make sure steps."""
    draft = Draft()
    checks = [c.index for c in choices if c.step.kind == "check"]
    skipped = set(checks[len(checks) - skip_checks:]) if skip_checks else set()
    for c in choices:
        apply_step(draft, c, rec, trace, skip=c.index in skipped)
    if not draft.triples and not draft.unions:
        raise ReconstructionError("no step produced a graph pattern")
    counted = draft.count[0] if draft.count is not None and draft.count[1] == answer else None
    if draft.count is not None and counted is None:
        if trace is not None:
            trace.fallbacks.append(f"count of {draft.count[0]} dropped: the plan answers {answer}, "
                                   f"not {draft.count[1]}")
        draft.count = None
    node = counted or answer  # what the boilerplate is about: the answer, or what a count counts
    starts = rec.answer_starts([c.step for c in choices], node, draft.all_triples())
    return draft.query(answer, rec.boilerplate(node, starts, draft.all_triples(), draft.filters))


def distinct_values(rows: list[dict], var: Var) -> list:
    """The values of ``var`` in ``rows``, first occurrence first, each once."""
    out, seen = [], set()
    for row in rows:
        term = row.get(var.name)
        if term is not None and term not in seen:
            seen.add(term)
            out.append(term)
    return out


def named_answers(kg, terms: list, ordered: bool) -> list[tuple[str, str]]:
    """``(id, name)`` for each answer term (a literal is its own id and name), in the documented order."""
    ids = [t.local for t in terms if isinstance(t, Iri) and t.is_freebase]
    names = kg.names(ids) if ids else {}
    out = []
    for t in terms:
        if isinstance(t, Iri):
            key = t.local if t.is_freebase else t.value
            out.append((key, names.get(key, key)))
        elif isinstance(t, Literal):
            out.append((t.value, t.value))
    if not ordered:
        out.sort(key=lambda p: (p[1].lower(), p[0]))
    return out
