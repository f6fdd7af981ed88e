"""The lines a partial plan of the grounded planner may continue with (:mod:`memq.plan.grounded`).

:class:`CandidateLines` is the part of :class:`~memq.plan.grounded.GroundedPlanner` that builds a step's
candidates: the Find lines of the memory's path statements that bind after the plan so far (with a statement
ranker, its best ones and their bonus, each step's entry in the trace's ``ranked``), GrailQA's class lines, the
*Finally* lines and the open *Make sure* / *Sort* starts. The structural rules on which of them a plan may take
are :class:`~memq.plan.rules.LineRules`, a part of it. The planner supplies ``bank``, ``config``, ``ranker``,
``classes``, ``_edges`` and ``_statement_edges``.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Hashable
from dataclasses import replace
from functools import cached_property
from types import SimpleNamespace

from memq.errors import ReconstructionError
from memq.sparql.model import Var
from memq.types import PlanStep

from .asked import reaches
from .calibrate import calibrated
from .compare import compare_ops
from .derive import DerivationError, find_step, fresh_variable
from .format import hops
from .lines import (
    COMPARES,
    HOW_MANY,
    SUPERLATIVE,
    Hyp,
    Line,
    extend,
    grail_targets,
    may_end,
    shape_lines,
    starts_from_class,
    unchecked_values,
)
from .linesearch import SearchCost
from .neighbourhood import Neighbourhood, bank_edges, first_edges, path_options
from .prior import trained_first
from .ranker import rank_candidates
from .rules import LineRules

__all__ = ["OPEN_STARTS", "CandidateLines"]

OPEN_STARTS = ("Make sure", "Sort")
# the value types a plan sorts and compares, and the names the train plans give such a value: WebQSP's sort keys
# are ?sk0, ?sk1, ... (79 of its 95 sorts), CWQ's ?num (1,388 sorts and 1,508 comparisons) or ?skN (299 sorts)
ORDERED_TYPES = frozenset({"type.datetime", "type.float", "type.int"})
KEY_NAME = re.compile(r"\?(?:sk\d+|num)\Z")
# the class starts (with members, best first) whose reach to a value the question writes is looked up two edges away
# (one for the others)
VIABLE_CHECKS = 48
_UNSCORED = SimpleNamespace(ids=(), score=0.0)  # a line taken with no score (to look past it)


class CandidateLines(LineRules):
    """Builds each step's candidate lines for the grounded planner (see the module docstring)."""

    keys_offered = True  # whether Find lines of dates and numbers take the sort keys' names (a search may say not)
    open_start = False  # whether a class may start a plan beside entities given (all optional; a search sets it)
    null_prefix: list[int] | None = None  # the question-less prompt's tokens, when Find lines are calibrated
    null_cost: SearchCost | None = None  # where the calibration's forward passes are counted
    least_hops = 0  # in a hybrid rescue: how far the free plan's answer is from the entities (format.hops)

    def options(self, entities: dict[str, str], assigned, draft, neigh: Neighbourhood) -> list:
        """The bank's path statements whose edges exist at the known nodes (:func:`path_options`)."""
        return path_options(self.bank.records, entities, assigned, draft, neigh, self._statement_edges,
                            self._first_edges)

    @staticmethod
    def _find_start(lm) -> list[int] | None:
        """The tokens every Find line starts with (those of "Find"), or None when this tokenizer does not start
        one so: the Find lines are then made at once, never deferred."""
        start = list(lm.token_ids("Find"))
        probe = list(lm.token_ids("Find the place of birth of the person Anna, assign it to ?x.\n"))
        return start if start and probe[:len(start)] == start and len(probe) > len(start) else None

    @staticmethod
    def _same_step(h: Hyp, lines: list, i: int) -> Hashable:
        """What makes line ``i`` the step it is after ``h`` (``distinct_steps``): a Find line's text up to the
        ?variable it assigns, unless that one is already bound, so that "Find the variants of the computer processor
        Zilog Z80, assign it to ?x0." and its copies to ?x1 or ?variants, or from the statement of the reverse
        relation, are one step; any other line's text."""
        line = lines[i]
        if line.kind != "find" or line.step is None:
            return line.text
        bound = {v for st in h.steps for v in (st.source, st.target) if v}
        target = line.step.target
        return line.text.rpartition(", assign it to ")[0], target if target in bound else None

    @cached_property
    def splits_unseen(self) -> bool:  # unseen_top >= 0, and some statement was given by a training question
        return self.config.unseen_top >= 0 and any(r.statement.question_ids for r in self.bank.records)

    @cached_property
    def _first_edges(self) -> dict:
        self._edges.update(bank_edges(self.bank.records))  # parsed once per bank, then read from the cache
        return first_edges(self.bank.records, self._statement_edges)

    def _find_lines(self, h: Hyp, kept: list, lm, neigh: Neighbourhood, question: str, ranked: list[dict] | None,
                    wide: bool, directed: str | None, top: int, offset: int = 0, best=None,
                    unseen: bool = False) -> list[Line]:
        """The Find lines of ``kept`` that bind after ``h`` (with a ranker, its ``top`` best with their bonus, measured
        from ``best`` if higher, and an entry in ``ranked`` whose candidates' ``index`` counts from ``offset``).
        ``unseen``: they are the statements no training question gave (the entry says so)."""
        cfg, entry, lines = self.config, None, []
        if self.ranker is not None and kept:
            kept, entry = rank_candidates(self.ranker, kept, question, h.lines, pool=cfg.rank_pool,
                                          weight=cfg.rank_weight, best=best)
            if unseen:
                entry["unseen"] = True
        probe_rec = copy.deepcopy(h.rec)
        offered = 0
        reach: list[int] = []  # with ``directed``, the Find lines whose values have the class, and the others
        astray: list[int] = []
        found = self.found_before(h)
        waiting = self._values_waiting(h, question)
        for record, mentions, rank in kept:
            if entry is not None and offered >= top:
                break
            st = record.statement
            try:
                probe = find_step(record.descriptions[0], st.structure, mentions, "?memq_t")
                group = probe_rec.find(probe, st)
            except (DerivationError, ReconstructionError):
                continue
            if self.found_again(found, st.id, probe.source) or probe.relation in found \
                    or self.own_name(st, probe.source, question) or self.walks_again(h, st, probe) \
                    or not neigh.binds(h.draft, group, Var("memq_t")):
                continue
            if waiting and not self._checkable(h, probe_rec, group, st.id, waiting, question, neigh):
                continue
            off = directed and not reaches(self.classes.values_named(neigh, h.draft, group), directed, wide)
            offered += 1
            used = set(h.assigned)
            targets = grail_targets(used) if self.classes else [v for v in ("?x", "?y") if v not in used]
            fresh = fresh_variable(st, {v[1:] for v in used})
            if fresh not in targets:
                targets.append(fresh)
            if self.classes is None:
                targets += self.key_targets(st.id, used)
            for target in targets:
                step = find_step(record.descriptions[0], st.structure, mentions, target)
                if entry is not None:
                    entry["candidates"].append({"line": step.text, "statement": st.id,
                                                "ranker": entry["logits"][(st.id, step.relation)],
                                                "bonus": round(rank, 4), "index": offset + len(lines)})
                if directed:
                    (astray if off else reach).append(len(lines))
                lines.append(Line("find", step.text, tuple(lm.token_ids(step.text + "\n")), step, st, rank=rank))
        if reach and astray:  # directed to the class asked for, and some Find line reaches it: the others lose
            for i in astray:
                lines[i] = replace(lines[i], rank=lines[i].rank - cfg.asked_class)
            for c in entry["candidates"] if entry is not None else ():
                c["bonus"] = round(lines[c["index"] - offset].rank, 4)
        if entry is not None:
            del entry["logits"]
            ranked.append(entry)
        return lines

    def _values_waiting(self, h: Hyp, question: str) -> list[str]:
        """With ``value_finds``: the numbers and dates the question writes that no check of ``h`` uses yet, when
        ``h`` starts from a class and checks nothing yet (:meth:`_checkable` then holds its Find lines to them)."""
        if not self.config.value_finds or self.classes is None or not starts_from_class(h.steps) \
                or any(st.kind == "check" for st in h.steps):
            return []
        return unchecked_values(h.steps, question)

    def _viable_start(self, h: Hyp, question: str, neigh: Neighbourhood):
        """With ``value_finds``, before any step of a question that writes numbers or dates: whether a class start
        may lead to a plan that ends, which needs a check of one of them (:func:`~memq.plan.lines.may_end`): some
        member of the class has a value that passes one (:meth:`Neighbourhood.reaches_value`; the checks of
        :meth:`_value_checks`) one edge away, or two for the first ``VIABLE_CHECKS`` classes with members that the
        starts consider (two edges from a large class take seconds). None (any start) otherwise."""
        if not self.config.value_finds or h.steps:  # called for every line set: no reconstructor copied for nothing
            return None
        checks = self._value_checks(h.rec, unchecked_values([], question), question, "?memq_v")
        if not checks:
            return None
        asked = [0]

        def viable(class_id: str) -> bool:
            asked[0] += 1
            if neigh.reaches_value(class_id, checks, Var("memq_v"), hops=2 if asked[0] <= VIABLE_CHECKS else 1):
                return True
            return self._refused("class_starts_no_value_passes")

        return viable

    @staticmethod
    def _value_checks(rec, values: list[str], question: str, target: str) -> list:
        """The FILTER expressions on ``target`` of the checks GrailQA's lines would offer for ``values``: ``=``, and
        the comparisons when the question compares (``COMPARES``) the way it does (:func:`compare_ops`), as ``rec``
        writes them."""
        if not values:
            return []
        ops = ("=",) + (compare_ops(question) if COMPARES.search(question) else ())
        rec, out = copy.deepcopy(rec), []
        for value in values:
            for op in ops:
                try:
                    out.append(rec.check(PlanStep("check", "", target=target, op=op, value=value)))
                except ReconstructionError:
                    continue
        return out

    def _checkable(self, h: Hyp, rec, group, statement_id: str, values: list[str], question: str,
                   neigh: Neighbourhood) -> bool:
        """Whether a Find line (``group``, its target ``?memq_t``, written by ``rec``) may continue ``h`` while the
        question's ``values`` wait for a check: one that finds a number or a date only where some value it binds
        passes a check of one of them (:meth:`_value_checks`), one that finds nodes only where some node it binds
        has such a value one edge away (the plan may go on from it). A plan that starts from a class may end only
        after a check (:func:`~memq.plan.lines.may_end`), and 117 of the 125 GrailQA train plans that start from a
        class for a question that writes a value check the value the next Find line found (the other 8 one edge
        further); so a line from which no value passes leads the search to a dead end ("Find the effective
        resolution of the digital camera ?x0" for "may the 11st, 2010 is an effective resolution of what digital
        cameras?", where the release date passes)."""
        types = self._assigned(statement_id)[1]
        if not types:
            return True
        numeric = types <= ORDERED_TYPES
        draft = h.draft.copy()
        draft.add_alternatives([group])
        checks = self._value_checks(rec, values, question, "?memq_t" if numeric else "?memq_v")
        if not checks or neigh.value_near(draft, Var("memq_t"), checks, hops=0 if numeric else 1):
            return True
        return self._refused("value_finds_no_value_passes")

    def _lines(self, h: Hyp, entities: dict[str, str], names, lm, neigh: Neighbourhood, sims, question: str = "",
               ranked: list[dict] | None = None, wide: bool = False, directed: str | None = None) -> list[Line]:
        """Every line the partial plan ``h`` may continue with: its Find lines (:meth:`_find_part`), then the others
        (:meth:`_other_lines`)."""
        finds = self._find_part(h, entities, lm, neigh, sims, question, ranked, wide, directed)
        return finds + self._other_lines(h, names, lm, neigh, sims, question, wide, ranked, len(finds))

    def _find_part(self, h: Hyp, entities: dict[str, str], lm, neigh: Neighbourhood, sims, question: str = "",
                   ranked: list[dict] | None = None, wide: bool = False, directed: str | None = None,
                   offset: int = 0) -> list[Line]:
        """The Find lines ``h`` may continue with. With a ranker, its ``rank_top`` best candidates that bind, each
        with its bonus, and ``ranked`` gets this step's entry for the trace (each candidate's ``index`` among the
        step's lines, which start at ``offset``). When some Find line's values have a class that names
        ``directed`` (the class asked for), the other Find lines lose ``asked_class`` nats."""
        cfg = self.config
        if any(st.kind in ("count", "sort") for st in h.steps):  # a count or a Sort ends the plan (_other_lines)
            return []
        options = self.options(entities, h.assigned, h.draft, neigh)
        options.sort(key=lambda o: -sims.get(o[0].statement.id, -1.0))
        seen: set[str] = set()
        kept = []
        for record, mentions in options:
            if record.statement.id not in seen and len(seen) >= cfg.max_candidates:
                continue
            seen.add(record.statement.id)
            kept.append((record, mentions, 0.0))
        trained, unseen = trained_first(kept, self.splits_unseen)
        entries = len(ranked or ())
        lines = self._find_lines(h, trained, lm, neigh, question, ranked, wide, directed, cfg.rank_top, offset)
        if unseen and (cfg.unseen_top or not lines):  # the statements no training question gave
            best = ranked[entries]["best"] if lines and len(ranked or ()) > entries else None
            lines += self._find_lines(h, unseen, lm, neigh, question, ranked, wide, directed,
                                      cfg.unseen_top if lines else cfg.rank_top, offset + len(lines), best, True)
        if self.null_prefix is not None and not h.steps and len(lines) > 1:  # set by a search when calibrate > 0
            lines = calibrated(lines, self.null_prefix + list(h.ids), lm, self.config.calibrate, self.null_cost)
            for entry in (ranked or [])[entries:]:
                for c in entry["candidates"]:
                    c["bonus"] = round(lines[c["index"] - offset].rank, 4)
        return lines

    def key_targets(self, statement_id: str, used: set[str]) -> list[str]:
        """The names the train plans give a date or number that a plan may sort or compare (:data:`KEY_NAME`: the
        first unused ``?skN``, and ``?num`` unless used), for a statement that assigns one (every type
        :func:`assigned_types` gives is in :data:`ORDERED_TYPES`); none for the others. Offered beside ``?x``, ``?y``
        and the relation's name, as the model was trained to write "Find the start date of the event ?x, assign it to
        ?sk0." before "Sort ?sk0 ...", and without them it seldom sorted at all. None in a search planned again without
        them (``keys_offered`` False: no plan that ends sorted or checked its key)."""
        types = self._assigned(statement_id)[1]
        if not self.keys_offered or not types or not types <= ORDERED_TYPES:
            return []
        key = next(f"?sk{n}" for n in range(len(used) + 1) if f"?sk{n}" not in used)
        return [key] if "?num" in used else [key, "?num"]

    def keys_waiting(self, h: Hyp) -> bool:
        """Whether ``h`` found a value under a sort key's name (:data:`KEY_NAME`) that no *Sort* or *Make sure*
        has used yet: then it may not end. Every one of the 64 WebQSP and 3,501 CWQ train plans that names one sorts
        or checks it, and none answers with it (so no *Finally* line names one either)."""
        used = {st.target for st in h.steps if st.kind in ("check", "sort")}
        if any(st.kind == "find" and KEY_NAME.match(st.target or "") and st.target not in used for st in h.steps):
            self._refused("endings_before_the_key_is_used")
            return True
        return False

    def superlative_waiting(self, h: Hyp, question: str, names) -> bool:
        """With ``superlative_ends`` (GrailQA's lines; tried, off): whether ``h`` may not end before a superlative: the
        ``question`` has a superlative word outside the entity ``names`` and the relations its Find steps read ("the
        *first* ascenders"), no number or date, no "how many" (64 of the 67 such train questions sort). A search may
        turn it off (``keys_offered``, as for the sort keys)."""
        if not self.config.superlative_ends or self.classes is None or not self.keys_offered \
                or any(st.kind == "superlative" for st in h.steps) or HOW_MANY.search(question) \
                or unchecked_values([], question, names):
            return False
        text = question
        for name in names:
            text = re.sub(re.escape(name), " ", text, flags=re.I)
        read = " ".join(st.relation or "" for st in h.steps if st.kind == "find").lower()
        if any(not re.search(rf"\b{re.escape(w.lower())}\b", read) for w in SUPERLATIVE.findall(text)):
            self._refused("endings_before_the_superlative")
            return True
        return False

    def far_enough(self, h: Hyp, var: str) -> bool:
        """Whether ``h`` may answer with ``var``: in a hybrid rescue with ``rescue_hops``, only when ``var`` is as
        many Find steps from the entities as the free plan's answer at least (``least_hops``, set by
        :meth:`memq.plan.grounded.GroundedPlanner.plan`)."""
        if self.least_hops and hops(h.steps, var) < self.least_hops:
            return self._refused("answers_nearer_than_the_free_plans")
        return True

    def _looked_ahead(self, h: Hyp, starts: list[Line], lm, neigh: Neighbourhood, sims, question: str,
                      ranked: list[dict] | None, offset: int) -> list[Line]:
        """With ``start_lookahead`` and a ranker: the class ``starts``, each judged by the Find lines that may follow
        it (:meth:`_find_part` after it), as its words say little ("what measures 1.0 in teus?": "Find the capacity
        in TEUs of the unit of cargo capacity ?x0" follows the units, not the tv series episodes). A start gains
        ``start_lookahead`` times the ranker's logit of its best following line (with the start as the plan so far)
        less the best start's; starts that one line follows best gain alike, by its best logit; one that no Find line
        follows is not offered, unless none is. The trace's ``ranked`` gets the starts' entry (each with ``via``)."""
        ahead: dict[int, dict] = {}
        judged = [i for i, line in enumerate(starts) if line.kind == "shape" and starts_from_class([line.step])]
        for i in judged:
            line = starts[i]
            after = extend(h, line, _UNSCORED, lm, question, ())
            entries: list[dict] = []
            if after is not None:
                self._find_part(after, {}, lm, neigh, sims, question, entries)
            follows = [c for entry in entries for c in entry["candidates"]]
            if follows:
                ahead[i] = max(follows, key=lambda c: c["ranker"])
        if not ahead:
            return starts
        tied: dict[str, float] = {}  # the best logit of each line that follows some start best
        for c in ahead.values():
            tied[c["line"]] = max(tied.get(c["line"], c["ranker"]), c["ranker"])
        ahead = {i: {**c, "ranker": tied[c["line"]]} for i, c in ahead.items()}
        best = max(tied.values())
        weight = self.config.start_lookahead
        out, entry = [], {"step": 1, "plan_so_far": [], "scored": len(ahead), "best": round(best, 4),
                          "lookahead": True, "candidates": []}
        for i, line in enumerate(starts):
            if i in judged:
                if i not in ahead:
                    self._refused("class_starts_nothing_follows")
                    continue
                line = replace(line, rank=line.rank + weight * (ahead[i]["ranker"] - best))
                entry["candidates"].append({"line": line.text, "statement": line.statement.id,
                                            "ranker": ahead[i]["ranker"], "bonus": round(line.rank, 4),
                                            "via": ahead[i]["line"], "index": offset + len(out)})
            out.append(line)
        if ranked is not None:
            entry["candidates"].sort(key=lambda c: -c["ranker"])
            ranked.append(entry)
        return out

    def _other_lines(self, h: Hyp, names, lm, neigh: Neighbourhood, sims, question: str = "",
                     wide: bool = False, ranked: list[dict] | None = None, offset: int = 0) -> list[Line]:
        """The lines ``h`` may continue with but Find lines: GrailQA's class lines, *Finally* and the open starts.
        ``ranked`` and ``offset`` as for :meth:`_find_part` (the class starts' entry, with ``start_lookahead``)."""
        cfg = self.config
        counted = [st.target for st in h.steps if st.kind == "count"]
        if counted:  # a count ends the plan
            text = f"Finally the answer is {counted[-1]}."
            return [Line("answer", text, tuple(lm.token_ids(text)) + (lm.eos_id,),
                         PlanStep("answer", text, target=counted[-1]))]
        lines = []
        if self.classes is not None:
            # a plan may start from a class when the question names no entity, or names only optional ones (a linker's
            # guesses that a plan may leave out: "Desperate Times, Desperate Measures" for "what measures 1.0 in teus?")
            shape_names = [] if not h.steps and self.open_start else names
            lines += [Line("shape", sl.text, tuple(lm.token_ids(sl.text + "\n")), sl.step, sl.statement, rank=sl.rank)
                      for sl in shape_lines(self.classes, h, neigh, sims, question, shape_names, cfg.asked_class, wide,
                                            self._viable_start(h, question, neigh))]
            if cfg.start_lookahead and self.ranker is not None and not h.steps:
                lines = self._looked_ahead(h, lines, lm, neigh, sims, question, ranked, offset)
        ending = [] if self.keys_waiting(h) or self.superlative_waiting(h, question, names) else h.assigned
        checkable = {line.step.target for line in lines if line.kind == "shape" and line.step.kind == "class"}
        for v in [v for v in ending if not KEY_NAME.match(v)
                  and may_end(h.steps, question if self.classes else "", v, self.bank, names)
                  and not self.holds_cvt(h, v) and self.joined(h, v) and self.far_enough(h, v)
                  and not self.answers_its_key(h, v, question)
                  and not self.answers_unclassed(h, v, checkable) and not self.answers_values(h, v, question)]:
            text = f"Finally the answer is {v}."
            lines.append(Line("answer", text, tuple(lm.token_ids(text)) + (lm.eos_id,),
                              PlanStep("answer", text, target=v)))
        # GrailQA's checks and superlatives are closed; only Finally follows a Sort, as in each WebQSP/CWQ train plan
        if h.assigned and self.classes is None and not any(st.kind == "sort" for st in h.steps):
            for start in OPEN_STARTS:
                if start == "Sort" and cfg.closed_sorts:
                    lines += [Line("sort", text, tuple(lm.token_ids(text + "\n"))) for text in self._sorts(h)]
                else:
                    lines.append(Line("open", start, tuple(lm.token_ids(start))))
        return lines

    def _sorts(self, h: Hyp) -> list[str]:
        """``closed_sorts``: the Sort lines ``h`` may take, each in the two wordings of 1,816 of WebQSP's and CWQ's
        1,913 train Sort lines (the others keep the first 3 results, or skip one), of each ?variable it has assigned
        that :meth:`~memq.plan.rules.LineRules.sortable` allows."""
        return [f"Sort {v} in {order} order and keep the first result."
                for v in h.assigned if self.sortable(h, v) for order in ("descending", "ascending")]
