"""The structural rules on the lines a grounded search may take (:mod:`memq.plan.candidates`), each read off the
derived train plans (``benchmarks/plan_rules_train.py`` counts how often those plans break one).

:class:`LineRules` is a part of :class:`~memq.plan.candidates.CandidateLines`: whether a plan may end at a ?variable
(not at a CVT node, only where the plan joins every other ?variable, not at one it sorts unless the question asks
for a time, only at one whose notable type it checks if it checks one, with GrailQA's lines only at one a class line
names where one could), whether a Find line is offered (not a given entity's own name, not a walk back along an
edge it took, not a statement found again), and whether a line the model wrote may continue a plan (no line twice,
no Sort of nodes, no check whose value the KG never gives where the plan assigns its ?variable). Each refusal is
counted in the plan's cost (``refused``). The class supplies ``bank``, ``config`` and ``classes``.
"""

from __future__ import annotations

import re
from dataclasses import replace

from memq.describe.schema import schema
from memq.schema import freebase_schema
from memq.sparql.model import Iri
from memq.types import PlanStep

from .format import VAR, classed, unjoined
from .lines import HOW_MANY, Hyp
from .neighbourhood import Neighbourhood, assigned_types, assigns_cvt

__all__ = ["KEY_RULES", "LITERAL_TYPES", "NAME_ASKED", "TIME_ASKED", "LineRules", "assigns_literals", "class_lined",
           "edge_text", "held_to_values", "unread_dropped", "walks_back"]

# the refusals (keys of the plan's ``refused`` cost) that a grounded search with no plan that ends drops, planning
# again with keys=False (memq.plan.grounded), each with its note
KEY_RULES = {"endings_before_the_key_is_used": "sort keys: no plan that ends sorts or checks the date or number it "
             "found as ?skN or ?num; planned again without those names",
             "endings_before_the_superlative": "superlative: no plan that ends sorts what the question's superlative "
             "word asks for; planned again without the rule",
             "answers_sorted_not_asked_when": "sorted answer: no plan that ends answers with other than what it sorts "
             "(the question asks for no time); planned again without the rule",
             "answers_unclassed": "class checked: no plan that ends answers with a ?variable whose class (notable "
             "type) it checks; planned again without the rule",
             "literal_answers_refused": "literal answer: every plan that ends answers with dates, numbers or text, "
             "not entities (GrailQA's lines); planned again without the rule"}

# Freebase's value types: a relation with one of these ranges holds literals (type.type, type.object and the
# other type.* ranges hold nodes)
LITERAL_TYPES = frozenset({"type.boolean", "type.datetime", "type.enumeration", "type.float", "type.id", "type.int",
                           "type.key", "type.rawstring", "type.text", "type.uri"})
# a question that asks for a name: the 4 WebQSP train questions answered with their topic entity's own name say one of
# these ("what was the name of the original seattle baseball team?", "what is the australian open called?")
NAME_ASKED = re.compile(r"\b(?:names?|named|call|called|stands? for)\b", re.I)
# a question that asks for a time: the only train plans that answer with the ?variable they sort ask one (4 of
# WebQSP's 34 sorting plans of such questions, "when was the last time iran invaded another country?"; none of its 61
# others, none of CWQ's 1,818 sorting plans; benchmarks/plan_rules_train.py, sorts_asking_*)
TIME_ASKED = re.compile(r"\bwhen\b|\b(?:what|which) (?:year|date|day|time|month)\b|\bhow long\b", re.I)


def held_to_values(steps) -> set[str]:
    """The ?variables a Make sure step of ``steps`` holds to a value itself ("Make sure ?genre is Fantasy.", any
    comparison; not a check of a relation of it, "Make sure the start date of ?y ...")."""
    return {st.target for st in steps if st.kind == "check" and st.relation is None}


def class_lined(steps) -> set[str]:
    """The ?variables a GrailQA class line of ``steps`` names ("Find every wine, assign it to ?x0.", "Make sure ?x0
    is a wine.") or a count counts."""
    return {st.target for st in steps if st.kind in ("class", "count") and st.target}


def assigns_literals(types) -> bool:
    """Whether ``types`` (what each Find step that assigns a ?variable assigns, by the schema:
    :func:`~memq.plan.neighbourhood.assigned_types`) holds one at least, and each is literals only
    (:data:`LITERAL_TYPES`)."""
    types = list(types)
    return bool(types) and all(t and t <= LITERAL_TYPES for t in types)


def walks_back(steps, records, step: PlanStep, along) -> str | None:
    """How the Find ``step`` along ``along`` (its statement's relations) would walk back, or None: ``"third"`` where
    it is the third Find in a row along the same relations, ``"back"`` where it takes the edge of the Find two back
    on its walk, with another between: the same relations or the same relation text ("the series editor of the
    book edition series ..."; ``records``: a statement id's memory record, or None:
    :meth:`memq.memory.bank.MemoryBank.get`).

    A search can walk to and fro so: "the user profile whose favorite topics is X", "the favorite topics of the user
    profile ?x0", "the user profile whose favorite topics is ?x1", ...; none of the 31,810 WebQSP, CWQ and GrailQA
    train and synthetic plans takes one edge a third time (488 take one twice in a row: "the architects of the
    architectural style ?x1" after "the architectural style of X"). Through the reverse relation it is the other
    shape: "the series editor of the book edition series X", "the book edition series edited of the series editor
    ?x0", "the series editor of the book edition series ?x1" (two statements of one text, one relation each way).
    Of the train plans 1 of GrailQA's 2,298 walks back so ("another martial art ... in the same category as northern
    shaolin?", which checks the category found again), none of WebQSP's 2,765 and 6 of CWQ's 26,747
    (``benchmarks/plan_rules_train.py``, ``back_walks``)."""
    by: dict[str, tuple[frozenset, str | None, str | None]] = {}
    for st in steps:
        if st.kind == "find" and st.target:
            record = records(st.statement) if st.statement else None
            by[st.target] = (frozenset(record.statement.relations if record is not None else ()), edge_text(st),
                             st.source)
    edge = frozenset(along)
    last = by.get(step.source or "")
    before = by.get(last[2] or "") if last is not None else None
    if before is None or not edge:
        return None
    if before[0] == edge:
        return "third" if last[0] == edge else "back"
    return "back" if before[1] is not None and before[1] == edge_text(step) else None


def edge_text(step: PlanStep) -> str | None:
    """A Find step's relation text with its source left out ("the series editor of the book edition series {}")."""
    if not isinstance(step.relation, str) or not step.source:
        return None
    return step.relation.replace(step.source, "{}")


def unread_dropped(h: Hyp) -> Hyp:
    """``h`` without the Find steps whose value no other step reads (again, until none is left), with a note naming
    them; ``h`` itself when there is none.

    A search may stack such Finds before its Finally line ("Find the lift type of the ski lift ?l"): they only ask
    that some value exists, which GrailQA's logical forms never do (none of its 2,298 train plans has one, nor any of
    CWQ's 26,747; 3 of WebQSP's 2,765), and with GrailQA's boilerplate of distinct nodes a Find back to a given entity
    leaves no row. For GrailQA's lines only: on held-out WebQSP dev dropping them cost a question, whose Find of a
    person's profession kept out the benchmark KG's synthetic distractors, which have none."""
    gone: set[int] = set()
    names = [set(VAR.findall(st.text)) for st in h.steps]  # the ?variables each step names
    while len(h.lines) == len(h.steps):
        unread = {i for i, st in enumerate(h.steps) if i not in gone and st.kind == "find" and st.target
                  and not any(st.target in named for j, named in enumerate(names) if j not in gone | {i})}
        if not unread:
            break
        gone |= unread
    if not gone:
        return h
    return replace(h, lines=[x for i, x in enumerate(h.lines) if i not in gone],
                   steps=[x for i, x in enumerate(h.steps) if i not in gone],
                   notes=[*h.notes, "unread Finds dropped: " + " ".join(h.lines[i] for i in sorted(gone))])


class LineRules:
    """The rules (see the module docstring); mixed into :class:`~memq.plan.candidates.CandidateLines`."""

    def holds_cvt(self, h: Hyp, var: str) -> bool:
        """Whether a Find step of ``h`` assigns ``var`` a CVT node (by the schema,
        :func:`~memq.plan.neighbourhood.assigns_cvt`): a plan may go on from it, but no plan ends there, as no gold
        query answers with one."""
        if any(self._assigned(st.statement)[0] for st in self._finds(h, var)):
            self._refused("cvt_answers_withheld")
            return True
        return False

    def joined(self, h: Hyp, var: str) -> bool:
        """Whether every ?variable of ``h`` is joined with ``var`` (:func:`~memq.plan.format.unjoined`): else no plan
        ends there, as no WebQSP or CWQ train plan and 1 of GrailQA's does."""
        return not unjoined(h.steps, var) or self._refused("unjoined_answers_withheld")

    def walks_again(self, h: Hyp, st, probe: PlanStep) -> bool:
        """Whether the Find line ``probe`` of statement ``st`` walks back (:func:`walks_back`: to and fro, as almost no
        train plan goes): the third Find in a row along the same relations, or, with GrailQA's lines, along the edge
        of the Find two back on its walk. Then it is not offered."""
        way = walks_back(h.steps, self.bank.get, probe, st.relations)
        if way == "back" and self.classes is None:
            return False
        return way is not None and not self._refused(f"{way}_walks_refused")

    def found_before(self, h: Hyp) -> set:
        """What no Find line after ``h`` may find again: GrailQA's 2,298 train plans never find a statement twice
        from one node, nor one of the same text (two statements may render alike: "the ships built of the ship
        builder ?x0"), so with GrailQA's lines each (statement, node) and each text ``h`` found; no WebQSP or CWQ train
        plan finds a statement twice from a given entity, so for them each (statement, given entity) ``h`` found. From a
        ?variable, 9 of CWQ's 26,747 do, and each only after checking what the first Find found ("Find the genre of the
        book ?x, assign it to ?genre. Make sure ?genre is Children's literature. Find the genre of the book ?x, assign
        it to ?genre2. Make sure ?genre2 is Fantasy."), so for them also each (statement, ?variable) whose first Find's
        target no Make sure step of ``h`` holds to a value (``repeated_variable_finds_unchecked``, 0 in every train
        set): a search whose check was refused used to find the same notable types again and again."""
        if self.classes is not None:
            return {k for s in h.steps if s.kind == "find" for k in ((s.statement, s.source), s.relation)}
        checked = held_to_values(h.steps)
        return {(s.statement, s.source) for s in h.steps
                if s.kind == "find" and (not (s.source or "?").startswith("?") or s.target not in checked)}

    def found_again(self, found: set, statement_id: str, source: str) -> bool:
        """Whether a Find line of ``statement_id`` from ``source`` finds what :meth:`found_before` holds: then it is
        not offered (counted as ``repeated_finds_refused`` for WebQSP and CWQ; GrailQA's older rule is not)."""
        if (statement_id, source) not in found:
            return False
        if self.classes is None:
            self._refused("repeated_finds_refused")
        return True

    def own_name(self, statement, source: str, question: str) -> bool:
        """Whether a Find line of ``statement`` from ``source`` finds a given entity's own name (``type.object.name``
        from an entity, not a ?variable) for a question that asks no name (:data:`NAME_ASKED`): then it is not
        offered. 4 of WebQSP's 3,098 train questions are answered with their topic entity's name, each asking for
        one, and no train plan finds a given entity's name but to answer with it; none of CWQ's 30,403 train and dev
        queries nor GrailQA's 1,000 train queries finds one."""
        if list(statement.relations) != ["type.object.name"] or (source or "?").startswith("?") \
                or NAME_ASKED.search(question):
            return False
        self._refused("own_name_finds_refused")
        return True

    def allows(self, h: Hyp, step: PlanStep, neigh: Neighbourhood) -> bool:
        """Whether a written step may continue ``h``: no line ``h`` has (the same FILTER again changes no answer; 17 of
        the 29,512 WebQSP and CWQ train plans repeat one, and searches wrote date checks over and over); a Sort of what
        :meth:`may_sort` allows; with ``check_passes``, a ``Make sure ?v is X`` that some value of the plan so far
        passes (:meth:`Neighbourhood.passing`, the FILTER the query would get, as GrailQA's closed checks are offered);
        with ``check_values``, a ``Make sure ?v is X`` (X an entity) only where X is anywhere in the KG what a Find
        step assigning ``?v`` assigns (:meth:`may_check`)."""
        if step.text in h.lines:
            return self._refused("repeated_lines_refused")
        if step.kind == "sort":
            return self.may_sort(h, step.target)
        if step.kind == "check" and step.relation is None and step.op == "=":
            if self.config.check_passes and not neigh.passing(h.draft, h.rec, [step])[0]:
                return self._refused("checks_none_passes")
            return not self.config.check_values or self.may_check(h, step, neigh) \
                or self._refused("checks_never_passing_refused")
        return True

    def may_check(self, h: Hyp, step: PlanStep, neigh: Neighbourhood) -> bool:
        """Whether the entity a check compares with (``Make sure ?containedby is Country.``) is anywhere in the KG a
        value of what a Find step of ``h`` assigns to the checked ?variable (:meth:`Neighbourhood.takes`); else no
        node can pass it, and the query would find nothing. Each of the 354 such checks of WebQSP's train plans can
        pass (``benchmarks/plan_rules_train.py``). Not probed: a value that is no entity, a ?variable no Find step of
        ``h`` assigns, and a check of a ?variable of ``type.type`` (the range of notable types) whose value names a
        commons type of the schema (:meth:`~memq.describe.schema.FreebaseSchema.names_type`: "Super Bowl"): the
        benchmark KG types only some nodes, and where self-repair drops such a check the plan keeps its answers
        unfiltered ("what year did baltimore ravens win the superbowl?", held-out dev: 0.67 so, 0 when the search went
        on). A notable type that names no type ("Make sure ?notable_types is Tirana.", written in CWQ's rescues to
        name a given entity) is probed like any other value."""
        value = h.rec.value(step.value)
        finds = [self.bank.get(st.statement) for st in self._finds(h, step.target)]
        if not isinstance(value, Iri) or not finds or not all(finds):
            return True
        if step.value and schema().names_type(step.value) \
                and any("type.type" in self._assigned(record.statement.id)[1] for record in finds):
            return True
        return any(neigh.takes(record.statement, value) for record in finds)

    def may_sort(self, h: Hyp, var: str) -> bool:
        """Whether ``var`` may be sorted after ``h`` (:meth:`sortable`); a refusal is counted."""
        return self.sortable(h, var) or self._refused("entity_sorts_refused")

    def sortable(self, h: Hyp, var: str) -> bool:
        """Whether ``var`` may be sorted after ``h``: unless every Find step that assigns it assigns nodes (a type
        of the schema not in :data:`LITERAL_TYPES`, :func:`~memq.plan.neighbourhood.assigned_types`). The train
        plans of WebQSP and CWQ sort dates and numbers only; the order of nodes is their ids'."""
        finds = self._finds(h, var)
        return not finds or any(t is None or t == "" or t in LITERAL_TYPES
                                for st in finds for t in self._assigned(st.statement)[1] or {None})

    def answers_its_key(self, h: Hyp, var: str, question: str) -> bool:
        """Whether ``h`` may not answer with ``var`` (``sorted_answers``): ``h`` sorts ``var`` and the question
        asks for no time (:data:`TIME_ASKED`). A plan that sorts answers with what its key belongs to: the team
        founded first, not the founding date. A search may turn it off (``keys_offered``, as for the sort keys)."""
        if not self.config.sorted_answers or not self.keys_offered or TIME_ASKED.search(question) \
                or not any(st.kind == "sort" and st.target == var for st in h.steps):
            return False
        self._refused("answers_sorted_not_asked_when")
        return True

    def answers_unclassed(self, h: Hyp, var: str, checkable=frozenset()) -> bool:
        """Whether ``h`` may not answer with ``var`` (``classed_answers``). With WebQSP's and CWQ's lines: ``h``
        checks the notable type of other ?variables (:func:`~memq.plan.format.classed`: "Make sure ?notable_types is
        City/Town/Village." of the notable types of ?containedby) and not ``var``'s. Each of the 2,480 WebQSP and CWQ
        train plans that checks a notable type answers with a ?variable whose notable type it checks
        (``benchmarks/plan_rules_train.py``, ``class_checked*``): "what cities should i visit in california?" answers
        with the city, not with the tourist attraction in it. With GrailQA's lines (``classes``): no class line of
        ``h`` names ``var`` (:func:`class_lined`), and one could (``var`` is in ``checkable``, the ?variables a class
        check is offered for: values with a class). 999 of GrailQA's 1,000 train plans answer with a ?variable a class
        line names or counts ("Make sure ?x0 is a computer game engine."), and the other with a number
        (``answers_*``). A search may turn it off (``keys_offered``, as for the sort keys)."""
        if not self.config.classed_answers or not self.keys_offered:
            return False
        if self.classes is not None:
            if var in class_lined(h.steps) or var not in checkable:
                return False
        elif not (held := classed(h.steps, self.bank.get)) or var in held:
            return False
        self._refused("answers_unclassed")
        return True

    def answers_values(self, h: Hyp, var: str, question: str) -> bool:
        """Whether ``h`` may not answer with ``var`` (``classed_answers``, GrailQA's lines): every Find step of ``h``
        that assigns ``var`` assigns literals (:meth:`literal_only`: dates, numbers, text), and the question does not
        ask "how many" (:data:`~memq.plan.lines.HOW_MANY`, where :func:`~memq.plan.lines.may_end` lets a number
        found answer). Each of GrailQA's 1,000 real train questions but one ("what are the odi stumps for devon
        thomas?") is answered with entities or a count, and so is each of the 208 of its dev tuning part: "the latest
        released date of the musical release that has engineers including mathieu soucy is what?" asks for the
        release. Its synthetic programs, which the planner was trained on too, answer 153 of 1,298 with literals.
        A search may turn it off (``keys_offered``, as for the sort keys)."""
        if self.classes is None or not self.config.classed_answers or not self.keys_offered \
                or var in class_lined(h.steps) or HOW_MANY.search(question) or not self.literal_only(h, var):
            return False
        self._refused("literal_answers_refused")
        return True

    def literal_only(self, h: Hyp, var: str) -> bool:
        """Whether some Find step of ``h`` assigns ``var`` and each assigns literals only, by the schema
        (:func:`assigns_literals`)."""
        return assigns_literals(self._assigned(st.statement)[1] for st in self._finds(h, var))

    def _refused(self, what: str) -> bool:
        """Counts a line a rule refused, for the plan's cost (the planner resets ``refused`` for each plan); False."""
        refused = self.__dict__.setdefault("refused", {})
        refused[what] = refused.get(what, 0) + 1
        return False

    def _finds(self, h: Hyp, var: str) -> list:
        return [st for st in h.steps if st.kind == "find" and st.target == var and st.statement]

    def _assigned(self, statement_id: str) -> tuple[bool, set]:
        """What a statement assigns, by the schema: whether a CVT, and its types (kept per statement)."""
        known = self.__dict__.setdefault("_assigned_of", {})
        if statement_id not in known:
            record, schema = self.bank.get(statement_id), freebase_schema()
            types = assigned_types(record.statement, schema) if record is not None else set()
            known[statement_id] = (record is not None and assigns_cvt(record.statement, schema, types), types)
        return known[statement_id]
