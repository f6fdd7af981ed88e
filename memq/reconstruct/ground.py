"""Step choice and grounding: which recalled statements each plan step uses.

1. :func:`recall_steps` recalls, for every step of a plan, the memory
   statements that may express it (:mod:`memq.recall`): a relation for a
   Find step, a filter for a Make sure step.
2. :func:`ground` (READS-style grounded choice) keeps, step by step, the
   recalled statements that bind in the KG given the steps before them.
3. :func:`apply_step` writes one step's choice into a draft query
   (:mod:`memq.reconstruct`); grounding uses it to probe, and
   :mod:`memq.reconstruct.assemble` to build the final query.

Every fallback that fires is appended to ``Trace.fallbacks``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from ..errors import ReconstructionError
from ..recall import TIE, TIE_ORDER, RecallConfig, break_tie, is_tie, preferred, query_text, recall_step
from ..sparql.model import Query, Var
from ..types import Plan, PlanStep, Recalled, Trace
from .reconstructor import Draft, Reconstructor

#: ``select(query, var)``: the distinct values of ``var`` in the query's rows on the KG ([] when it fails).
Select = Callable[[Query, Var], list]


@dataclass
class StepChoice:
    """One plan step and the statements chosen for it."""

    step: PlanStep
    index: int
    kept: list[Recalled] = field(default_factory=list)  # the statements the query uses (several: a UNION)
    candidates: list[Recalled] = field(default_factory=list)  # everything recalled, best first
    filter_statement: Recalled | None = None
    tied: list[Recalled] = field(default_factory=list)  # tied statements that bound too, not kept
    # a check of a relation that no filter statement expresses: the Find of the relation it reads (``kept`` holds
    # that Find's statements), whose value the check compares (:func:`relation_find`)
    relation_find: PlanStep | None = None


def recall_steps(bank, plan: Plan, config: RecallConfig, trace: Trace) -> list[StepChoice]:
    """Recall the statements of every step of ``plan`` from the memory ``bank``."""
    choices = []
    named = {v for st in plan.steps for v in re.findall(r"\?\w+", st.text)}  # the plan's ?variables
    for i, step in enumerate(plan.steps):
        choice = StepChoice(step, i)
        if step.kind == "find":
            # A step that relates two known things reads a structure-3 statement; one that starts from
            # one known thing reads structure 1 or 2. The other arity is used only if nothing fits.
            structures = ("3",) if step.value else ("1", "2")
            kept, candidates, fallback = recall_step(bank, step, i, config, structures)
            pinned = _chosen(bank, step, i, candidates, trace)
            if pinned is not None:
                if [r.statement.id for r in kept] != [pinned.statement.id]:
                    trace.fallbacks.append(f"step {i + 1}: planner's statement kept ({pinned.statement.id}; recall by "
                                           f"text would keep {', '.join(r.statement.id for r in kept) or 'none'})")
                kept, fallback = [pinned], None
                candidates = [pinned] + [r for r in candidates if r.statement.id != pinned.statement.id]
            elif not candidates:
                trace.fallbacks.append(f"step {i + 1}: no statement of structure {'/'.join(structures)}; "
                                       "any structure allowed")
                kept, candidates, fallback = recall_step(bank, step, i, config)
            choice.kept, choice.candidates = kept, candidates
            if fallback:
                trace.fallbacks.append(f"step {i + 1}: recall {fallback}")
        elif step.kind == "class":
            kept, candidates, fallback = recall_step(bank, step, i, config, structures=("class",))
            choice.kept, choice.candidates = kept[:1], candidates
            best, n = break_tie(kept) if kept else (None, 0)
            if n > 1:
                # classes of one name in several domains (film.producer, music.producer: "producer"): the
                # preferred one is kept, the others wait for grounding (:func:`ground`)
                choice.kept = [best]
                choice.tied = [r for r in kept if r is not best and kept[0].score - r.score <= TIE]
                trace.fallbacks.append(f"step {i + 1}: {n} tied class statements; kept {best.statement.id} "
                                       f"({TIE_ORDER})")
            if fallback or not kept:
                trace.fallbacks.append(f"step {i + 1}: class recall {fallback or 'found nothing'}")
        elif step.kind == "check" and step.relation and step.relation != step.target:
            kept, candidates, fallback = recall_step(bank, step, i, config, structures=("filter",))
            if kept and not fallback:
                choice.filter_statement, tied = break_tie(kept)
                if tied > 1:
                    trace.fallbacks.append(f"step {i + 1}: {tied} tied filter statements; kept "
                                           f"{choice.filter_statement.statement.id} ({TIE_ORDER})")
            elif (find := relation_find(step, i, named)) is not None \
                    and (found := recall_step(bank, find, i, config, ("1", "2")))[0]:
                choice.relation_find, choice.kept, choice.candidates = find, found[0], found[1]
                trace.fallbacks.append(f"step {i + 1}: no filter statement recalled; the relation is found "
                                       f"({', '.join(r.statement.id for r in found[0])}) and its value checked")
            else:
                trace.fallbacks.append(f"step {i + 1}: no filter statement recalled; checked by rule")
        choices.append(choice)
    return choices


def relation_find(step: PlanStep, index: int, taken: Iterable[str] = ()) -> PlanStep | None:
    """The Find a check of a relation reads, when no filter statement expresses it: "Make sure the gender of the
    deceased person ?y is Male." finds the gender of ?y (``?checked_<step>``), which the check then holds to Male,
    as the train plans write it ("Find the gender of ?y, assign it to ?gender. Make sure ?gender is Male.",
    :mod:`memq.plan.derive`). Checked by rule instead, the check compared ?y itself with Male and found nothing.
    Only for ``=`` and ``!=`` of a checked ?variable: a date or number compared so keeps the rule's reading. A name
    the plan already uses (``taken``: a hand-written plan may say ``?checked_3``) gets a number more."""
    if step.op not in ("=", "!=") or not step.relation or not (step.target or "").startswith("?") \
            or not step.value:
        return None
    target, n = f"?checked_{index + 1}", 1
    while target in taken:
        n += 1
        target = f"?checked_{index + 1}_{n}"
    return PlanStep("find", f"Find {step.relation}, assign it to {target}.", source=step.target,
                    relation=step.relation, target=target)


def _chosen(bank, step: PlanStep, index: int, candidates: list[Recalled], trace: Trace) -> Recalled | None:
    """The statement a grounded planner chose ``step`` from (``PlanStep.statement``), as recalled with the
    similarity of its description to the step; None when the step names none or the memory lacks it."""
    if step.statement is None:
        return None
    record = bank.get(step.statement)
    if record is None:
        trace.fallbacks.append(f"step {index + 1}: the planner's statement {step.statement} is not in this memory; "
                               "recalled by the step's text")
        return None
    for r in candidates:
        if r.statement.id == step.statement:
            return r
    hit = next((h for h in bank.search(query_text(step), k=len(bank)) if h[0].statement.id == step.statement), None)
    return Recalled(index, record.statement, hit[1] if hit else record.descriptions[0], hit[2] if hit else 0.0)


def ground(choices: list[StepChoice], rec: Reconstructor, select: Select, trace: Trace) -> None:
    """READS-style grounded choice: keep the candidates that bind given the previous steps.

    Of several tied statements that bind, one is kept (:data:`~memq.recall.TIE_ORDER`) and the others
    are set aside in ``StepChoice.tied`` for self-repair. When none binds, all are kept.

    A later step that binds nothing may be the earlier tie's fault: equal descriptions (a relation and its reverse
    property) both bind at step 1, and only the one not preferred leads to a node where step 2 binds. Then each
    earlier tied statement is tried in turn, and the first with which every step binds is taken (traced).
    Tied class statements (one class name in several domains) are tried the same way.

    When every step binds but the whole pattern, with its checks and the classes after the last find step, has
    no row, the tie is also the likely fault: two relations of one label (``thrust (sea level)`` and ``thrust
    (vacuum)``: "the thrust of the rocket engine") both bind, and the check's value is on one of them only. Then
    the first tied statement with which the whole pattern has a row is taken (traced). This runs before the
    query does, so it also decides a count, whose query answers (0) either way.
    """
    recalled = [list(c.kept) for c in choices]
    unbound = _ground_once(choices, rec, select, trace)
    if unbound:
        upto, why = unbound[0], f"with which step {unbound[0] + 1} binds too"
    elif any(c.tied for c in choices) and not _pattern_holds(choices, rec, select):
        upto, why = len(choices), "with which the whole pattern, checks included, has a row"
    else:
        return
    for j, c in enumerate(choices[:upto]):
        for alt in list(c.tied):
            trial = [replace(x, kept=list(recalled[i]), tied=[]) for i, x in enumerate(choices)]
            trial[j].kept = [alt]
            if _ground_once(trial, rec, select, Trace()):
                continue
            if not unbound and not _pattern_holds(trial, rec, select):
                continue
            trial[j].tied = [r for r in [*c.kept, *c.tied] if r is not alt]
            for x, t in zip(choices, trial, strict=True):
                x.kept, x.tied = t.kept, t.tied
            trace.fallbacks.append(f"step {j + 1}: took tied statement {alt.statement.id}, {why}")
            return


def _pattern_holds(choices: list[StepChoice], rec: Reconstructor, select: Select) -> bool:
    """Whether every step's choice together (checks and classes included, no boilerplate) has a row in the KG."""
    draft = Draft()
    for c in choices:
        apply_step(draft, c, rec, None, skip=False)
    nodes = [n for t in draft.all_triples() for n in (t.s, t.o) if isinstance(n, Var)]
    if not nodes:
        return True
    return bool(select(draft.probe(nodes[0]), nodes[0]))


def _ground_once(choices: list[StepChoice], rec: Reconstructor, select: Select, trace: Trace) -> list[int]:
    """One pass of grounded choice; the indices of the find steps where no recalled statement binds."""
    unbound = []
    draft = Draft()
    for c in choices:
        if c.step.kind == "find" and c.kept:
            target = rec.var(c.step.target)
            grounded = [r for r in c.kept if _binds(draft, rec, c.step, r, target, select)]
            if len(grounded) > 1 and is_tie(c.kept):
                best = min(grounded, key=lambda r: preferred(r.statement))
                trace.fallbacks.append(f"step {c.index + 1}: {len(grounded)} tied statements bind; kept "
                                       f"{best.statement.id} ({TIE_ORDER})")
                c.kept, c.tied = [best], [r for r in grounded if r is not best]
            elif grounded and len(grounded) < len(c.kept):
                trace.fallbacks.append(f"step {c.index + 1}: grounded choice kept {len(grounded)} of "
                                       f"{len(c.kept)} recalled statements")
                c.kept = grounded
            elif not grounded:
                trace.fallbacks.append(f"step {c.index + 1}: no recalled statement binds in the KG; kept all")
                unbound.append(c.index)
        elif c.relation_find is not None and c.kept:
            target = rec.var(c.relation_find.target)
            bound = [r for r in c.kept if _binds(draft, rec, c.relation_find, r, target, select)]
            if len(bound) < len(c.kept):
                trace.fallbacks.append(f"step {c.index + 1}: the checked relation binds with {len(bound)} of "
                                       f"{len(c.kept)} recalled statements" + ("" if bound else "; checked by rule"))
            c.kept = bound
        apply_step(draft, c, rec, trace, skip=False)
    return unbound


def _binds(draft: Draft, rec: Reconstructor, step: PlanStep, r: Recalled, target: Var | None, select: Select) -> bool:
    """Whether ``r``'s statement, read for the find ``step``, binds ``target`` after ``draft``."""
    if (alt := _instantiated(rec, step, r, 0, None)) is None:
        return False
    probe = draft.copy()
    probe.add_alternatives([alt])
    return target is not None and bool(select(probe.probe(target), target))


def _instantiated(rec: Reconstructor, step: PlanStep, r: Recalled, index: int, trace: Trace | None):
    """``r``'s statement read for the find ``step`` (:meth:`Reconstructor.find`); None (traced) when it cannot be."""
    try:
        return rec.find(step, r.statement)
    except ReconstructionError as exc:
        if trace is not None:
            trace.fallbacks.append(f"step {index + 1}: statement {r.statement.id} skipped: {exc}")
        return None


def apply_step(draft: Draft, c: StepChoice, rec: Reconstructor, trace: Trace | None, skip: bool) -> None:
    """Add one step to ``draft``: a find step's kept statements (a UNION of them), a check's filter
    (unless ``skip``), a sort's ORDER BY/LIMIT. What cannot be added is traced (when ``trace`` is given)."""
    step = c.step
    if step.kind == "find":
        draft.add_alternatives([g for r in c.kept if (g := _instantiated(rec, step, r, c.index, trace)) is not None])
    elif step.kind == "check" and not skip and c.relation_find is not None and c.kept:
        find = c.relation_find
        draft.add_alternatives([g for r in c.kept if (g := _instantiated(rec, find, r, c.index, trace)) is not None])
        try:
            draft.filters.append(rec.check(replace(step, relation=None, target=find.target)))
        except ReconstructionError as exc:
            if trace is not None:
                trace.fallbacks.append(f"step {c.index + 1}: check dropped: {exc}")
    elif step.kind == "check" and not skip:
        try:
            draft.filters.append(rec.check(step, c.filter_statement.statement if c.filter_statement else None))
        except ReconstructionError as exc:
            if trace is not None:
                trace.fallbacks.append(f"step {c.index + 1}: check dropped: {exc}")
    elif step.kind == "sort":
        try:
            draft.order, draft.limit, draft.offset = rec.sort(step)
        except ReconstructionError as exc:
            if trace is not None:
                trace.fallbacks.append(f"step {c.index + 1}: sort dropped: {exc}")
    elif step.kind == "class" and c.kept:
        try:
            triple = rec.class_triple(step, c.kept[0].statement)
        except ReconstructionError as exc:
            if trace is not None:
                trace.fallbacks.append(f"step {c.index + 1}: class dropped: {exc}")
        else:
            if triple not in draft.triples:
                draft.triples.append(triple)
    elif step.kind == "superlative":
        var = rec.var(step.target)
        if var is None or step.op not in ("max", "min"):
            if trace is not None:
                trace.fallbacks.append(f"step {c.index + 1}: superlative dropped: it needs a ?variable and max/min")
        else:
            draft.superlatives.append(("MAX" if step.op == "max" else "MIN", var))
    elif step.kind == "count":
        counted, alias = rec.var(step.source), rec.var(step.target)
        if counted is None or alias is None:
            if trace is not None:
                trace.fallbacks.append(f"step {c.index + 1}: count dropped: it needs ?variables to count and assign")
        else:
            draft.count = (counted, alias)
