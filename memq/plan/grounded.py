"""The grounded planner (``--planner grounded``): each Find step is chosen among memory statements that bind in the KG.

Free generation (``--planner finetuned``) writes near-miss wording: "Find the actor of the performance with film
Coronation Street" for a TV programme, a relation the entity does not have. Choosing is easier than writing, so this
planner lets the same fine-tuned model (the committed adapter) choose, one plan line at a time, among lines that exist:

* **Find steps.** The candidates are the memory's path statements (structures 1-3) whose edge from a known node exists
  in the KG. The known nodes are the topic entities and the ``?variables`` the plan assigned. The predicates at a node
  come from one KG query per node (both directions; cached per question); a ``?variable``'s are those of the values the
  plan so far binds to it. A structure-3 statement also needs its second known node to carry its edge to the CVT. Every
  candidate that passes is probed once: instantiated as the pipeline would (:meth:`memq.reconstruct.Reconstructor.find`)
  after the plan so far, it must return a row, which checks the CVT's second edge. Each candidate is rendered as plan
  derivation writes it (:func:`memq.plan.derive.find_step`, from its primary description), with each target variable the
  training plans use: ``?x``, ``?y`` and the relation-named one (``?gender``).
* **Finally** ``the answer is ?v`` for each assigned ``?v`` (then EOS).
* **Make sure / Sort** lines are *open*: the line start is a candidate, and when the search reaches it the model writes
  the rest greedily. A line that does not parse, or checks or sorts a variable the plan has not assigned, is dropped. A
  check's constant is traced as *copied* (it occurs in the question) or *generated*. After a Sort only *Finally* lines
  are offered, as every train plan that sorts answers next.

**How the lines are scored (measured, then chosen).** Scoring every candidate in full with llama.cpp took 10.2 s for
20 candidates (317 tokens, one forward pass each) on one thread of the 2-core CPU; free generation of a whole plan
takes about 2.6-3.8 s. So the candidates of a step go into a prefix tree of their token ids and
:func:`memq.plan.linesearch.best_lines` searches it best-first (constrained decoding with a beam): forward passes are
spent only where candidates branch, and the search returns the exact ``lines`` best lines by summed log-probability,
not expanding branches more than ``prune`` nats below the best complete line. Each partial plan keeps its best lines;
the ``beam`` best partial plans (by ``norm``: the sum of their lines' log-probabilities and question-prior bonuses, or
its mean per token) go on until they end with *Finally*. The MiniLM similarity of a statement's description to the
question only caps how many statements enter a step (``max_candidates``).

**The question prior** (``prior``, :mod:`memq.plan.prior`). The statements that the ``neighbours`` training questions
nearest to the question used vote, and each Find line's score gets ``prior * (log(prior_floor + support) - the
best-supported line's)``, a bonus <= 0 that the line search adds exactly.

**GrailQA's lines** (:mod:`memq.plan.lines`): with class statements in the bank, a class to start from, class checks,
counts and superlatives are offered too. A Finally line loses ``asked_class`` nats unless a step names the class the
question asks for at the ?variable it answers with; when no plan then ends, it is searched again with a beam of
``asked_beam`` (and two lines a plan), which also takes a class whose name the asked one begins (``shortens``), then
(``asked_directed``) with ``asked_class`` nats off each Find line whose values have no such class where another's
have, and when none ends there either, planned without that rule (all in the notes; :mod:`memq.plan.asked`); a plan
that ends without the class is searched again so directed (``asked_redirect``), kept unless that plan names it. A
check of a number, a date or a topic entity is offered only where some value of the plan so far passes it; so when
entity coverage leaves no plan to end, the question is planned again without coverage (traced), not freely.

**Entity coverage** (``coverage``). 99.6% of the WebQSP training plans name every topic entity (a Find step's source or
second entity, or a check's constant). A *Finally* line loses ``coverage`` nats for each topic entity that no step of
the plan so far names, so the search goes on to a line that names it (a check on "Country", the CVT statement with both
entities) unless the model strongly prefers to stop. The plan's notes name an entity the chosen plan still leaves out.
With one topic entity it never applies: the first Find line starts there.

**The statement ranker** (``ranker``, :mod:`memq.plan.ranker`). When the planner has one, a cross-encoder scores the
``rank_pool`` candidates of a step most similar to the question, and only its ``rank_top`` best that bind are probed and
offered; each Find line's score gets ``rank_weight`` times its logit minus the best one's (<= 0, added exactly).
After the first step a step's Find lines are made only when the line search reaches "Find" (``deferred`` in
:func:`~memq.plan.linesearch.best_lines`, bounded by a bonus of 0 until then): where the model ends the plan or
checks a value first, the ranker and the KG's probes are spared, and the search finds the same lines.
``Plan.ranked`` lists the ranked candidates of every step whose Find lines were made, with the ranker's and the
model's scores. ``unseen_top``: statements no training question gave (the schema's) come only where none that one
gave binds (0), or their best k beside (k).

**Calibration** (``calibrate``, GrailQA's 0.5). Each first-step Find line loses ``calibrate`` times the
log-probability of its statement's tokens after the same prompt with "?" for the question, measured from the least
likely statement's (<= 0, added exactly): the model's liking for a wording whatever the question asks weighs less.

**Pass budget.** Past ``budget`` forward passes a search (60, chosen on dev) the search goes on with a beam of 1
and one line per step (in the plan's notes). It counts a pass per token an open line writes, as greedy decoding
would, though drafted tokens are checked several a pass (:meth:`memq.llm.llamacpp.LlamaCppLLM.greedy`).

**Execution-guided choice.** :class:`~memq.types.Plan` carries the complete plans (``Plan.beam``, best first: text,
score and the planner's own steps); the pipeline runs them in order and keeps the first whose query returns rows
(``Trace.plans`` lists each one tried with its score and row count). Each Find step names the statement it was chosen
from (``PlanStep.statement``), and recall keeps that statement: two statements can render the same text, and only the
chosen one was checked to bind.

**Backtracking** (``backtrack``, GrailQA's 2). A search that ends with no complete plan is searched again without
the first lines it took, at most ``backtrack`` times (in the notes), before the plan is generated freely.

**Fallbacks, all traced** (``Plan.notes``): when no topic entity has a predicate that a memory statement starts
with, when the beam ends with no complete plan, or when the KG fails (an endpoint timeout: the note names the KG and
the query), the plan comes from free generation, as it does when llama.cpp is not the backend (transformers).

**Cost** (``Plan.cost``): forward passes, tokens scored, candidates (lines offered to the model, over all steps and
partial plans), KG queries, seconds (the KG's and the ranker's among them).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection
from functools import cached_property, partial

from memq.errors import KnowledgeGraphError, MemQError
from memq.llm.threads import note_threads
from memq.types import BeamPlan, Plan

from .asked import STAGES, names_class
from .base import Entities
from .candidates import CandidateLines
from .format import parse_plan
from .lines import ClassStatements, Hyp, extend, has_classes, unnamed
from .linesearch import SearchCost, best_lines_together, line_search
from .neighbourhood import Edge, Neighbourhood, statement_edges
from .prior import QuestionPrior, bonuses, unseen_steps
from .prompt import entity_names
from .rules import KEY_RULES, unread_dropped
from .search import NORMS, GroundedConfig

__all__ = ["GroundedConfig", "GroundedPlanner", "NORMS", "Neighbourhood"]

logger = logging.getLogger(__name__)


class GroundedPlanner(CandidateLines):
    """The fine-tuned planner ``free`` choosing each step among lines grounded in ``kg`` (see the module docstring).

    ``free`` (a :class:`~memq.plan.planner.FineTunedPlanner`) holds the model and is the free generation
    that the traced fallbacks use. ``kg`` and ``bank`` are the pipeline's KG and memory bank; ``lm``
    replaces the model and ``prior`` the question prior (tests; by default it is built from ``bank``).
    """

    def __init__(self, free, *, kg, bank, config: GroundedConfig | None = None, timeout: float | None = 20.0,
                 lm=None, prior: QuestionPrior | None = None, ranker=None) -> None:
        self.free = free
        self.adapter = getattr(free, "adapter", None)
        self.kg, self.bank, self.timeout = kg, bank, timeout
        self.config = config or GroundedConfig()
        self.name = "grounded:" + getattr(free, "name", "planner")
        self._lm = lm
        self.ranker = ranker  # a StatementRanker (memq.plan.ranker), or None: the model alone chooses
        if ranker is not None:
            self.name = "ranked:" + getattr(free, "name", "planner")
        self._prior, self._prior_built = prior, prior is not None
        self._edges: dict[str, tuple[set[Edge], set[Edge]]] = {}
        self._lm_calls = 0

    @cached_property
    def classes(self) -> ClassStatements | None:
        """The bank's class statements when it has any (GrailQA's lines are offered, :mod:`memq.plan.lines`)."""
        return ClassStatements(self.bank, self._statement_edges) if has_classes(self.bank) else None

    @property
    def plans_without_entities(self) -> bool:
        """With class statements a plan may start from a class, so a question may name no entity."""
        return self.classes is not None

    @property
    def fallbacks(self) -> list[str]:
        return getattr(self.free, "fallbacks", [])

    @property
    def backend_used(self) -> str | None:
        return getattr(self._lm, "backend", None) if self._lm is not None else self.free.backend_used

    @property
    def calls(self) -> int:
        """Model calls: line searches (each a constrained decode over one step's candidates) and free generations."""
        return self._lm_calls

    @property
    def llm(self):
        """The fine-tuned planner's model (what ``memq demo`` and ``memq serve`` load before the first question)."""
        return self.free.llm

    @property
    def lm(self):
        """The model as a :class:`~memq.plan.linesearch.LineModel`, or None when the backend cannot score."""
        if self._lm is not None:
            return self._lm
        llm = self.free.llm
        return llm if hasattr(llm, "expand") else None

    @property
    def prior(self) -> QuestionPrior | None:
        """The question prior (built from the bank on first use), or None when it is off or the bank has none."""
        if not self._prior_built and self.config.prior > 0:
            self._prior = QuestionPrior.from_bank(self.bank, neighbours=self.config.neighbours)
            self._prior_built = True
        return self._prior if self.config.prior > 0 else None

    def prompt(self, question: str, entities: Entities) -> str:
        return self.free.prompt(question, entities)

    def warm_up(self) -> None:
        """Build what the first question would otherwise build (``memq serve`` and ``memq demo`` call it before
        the first question): the model, the question prior, the bank's first-edge index and class statements, the
        ranker's session and the question embedder. Without it a fresh process's first plan takes about 3 s more."""
        lm = self.lm
        if lm is not None:
            lm.prompt_ids(self.prompt("warm-up", {}))
        _ = self.prior, self._first_edges, self.classes
        self.bank.similarities("warm-up")
        if self.ranker is not None:
            self.ranker.score("warm-up", ["warm-up"])

    def _statement_edges(self, statement) -> tuple[set[Edge], set[Edge]]:
        if statement.id not in self._edges:
            second = statement_edges(statement, "entity2") if statement.structure == "3" else set()
            self._edges[statement.id] = (statement_edges(statement, "entity1"), second)
        return self._edges[statement.id]

    # ------------------------------------------------------------------ planning
    def plan_many(self, items, progress=None) -> list[Plan | MemQError]:
        out: list[Plan | MemQError] = []
        for q, e in (progress(items) if progress else items):
            try:
                out.append(self.plan(q, e))
            except MemQError as exc:
                out.append(exc)
        return out

    plans_with_optional = True  # plan() takes optional entities (suggested constraints) that coverage leaves out

    def plan(self, question: str, entities: Entities, optional: Collection[str] = (),
             unprompted: Collection[str] = (), least_hops: int = 0) -> Plan:
        """``optional``: ids of ``entities`` that coverage leaves out; ``unprompted``: ids the prompt leaves out;
        ``least_hops``: a hybrid rescue's, how many Find steps from the entities the free plan's answer is, which
        the plan's answer reaches (``rescue_hops``)."""
        if not isinstance(entities, dict):
            raise MemQError("the grounded planner needs the topic entities as {id: name}, "
                            f"got {type(entities).__name__}")
        if not isinstance(least_hops, int) or isinstance(least_hops, bool) or least_hops < 0:
            raise MemQError(f"least_hops must be an int >= 0 (the free plan's answer's Find steps), got {least_hops!r}")
        self.least_hops = least_hops if self.config.rescue_hops else 0
        t0 = time.perf_counter()
        lm = self.lm
        if lm is None:
            plan = self._free(question, entities, "grounded planning needs a backend that scores tokens "
                                                  f"(llama.cpp); {self.backend_used} generates freely")
        else:
            neigh = Neighbourhood(self.kg, self.timeout)
            cost = SearchCost()
            calls = self._lm_calls
            before = lm.counters if hasattr(lm, "counters") else None
            threads_before, rank_before = getattr(lm, "thread_passes", {}), getattr(self.ranker, "seconds", None)
            self.refused = {}  # lines the CVT-answer and entity-sort rules refused (CandidateLines._refused)
            self.searched = []  # each line search: the partial plan and the lines taken after it (Plan.searched)
            try:
                plan = self._search(question, entities, lm, neigh, cost, frozenset(optional), frozenset(unprompted))
            except KnowledgeGraphError as exc:
                where = getattr(self.kg, "url", None) or type(self.kg).__name__
                plan = self._free(question, entities, f"the KG {where} failed while grounding ({exc})")
            if self.least_hops and self.refused.get("answers_nearer_than_the_free_plans"):
                plan.notes.append(f"rescue length: answers fewer than {least_hops} Find steps from the entities (the "
                                  "free plan's answer) refused")
            after = lm.counters if before is not None else None
            passes, tokens = (after[0] - before[0], after[1] - before[1]) if after else (cost.passes, cost.tokens)
            plan.cost.update(forward_passes=passes, tokens_scored=tokens, kg_queries=neigh.queries,
                             kg_seconds=round(neigh.seconds, 4), llm_calls=self._lm_calls - calls, **self.refused)
            if rank_before is not None:  # the statement ranker's own time (its runs), a part of the seconds
                plan.cost["ranker_seconds"] = round(self.ranker.seconds - rank_before, 4)
            # the searches run, in order ("first", then "wide", "off", ... where one ended no plan): which questions
            # a setting of a later search can change
            plan.cost["searches"] = " > ".join(dict.fromkeys(s["search"] for s in self.searched))
            note_threads(plan, lm, threads_before)
            plan.searched = self.searched
        plan.cost["seconds"] = round(time.perf_counter() - t0, 4)
        return plan

    def _free(self, question: str, entities: Entities, why: str) -> Plan:
        llm = self._lm if self._lm is not None and hasattr(self._lm, "generate") else self.free.llm
        raw = llm.generate([self.prompt(question, entities)], max_new_tokens=self.free.max_new_tokens)[0]
        self._lm_calls += 1
        plan = parse_plan(raw, entity_names(entities))
        plan.notes.append(f"grounded planner -> free generation: {why}")
        plan.cost.update(candidates=0, free_generation=True)
        return plan

    def _bonuses(self, h: Hyp, lines: list, support: dict, prior, covered=(), asked=None, wide=False) -> list[float]:
        """Each line's bonus (<= 0): the question prior's and the ranker's on Find lines; entity coverage and the
        class asked for on Finally lines."""
        cfg = self.config
        bonus = bonuses(support, [line.statement.id if line.kind == "find" else None for line in lines],
                        cfg.prior if prior is not None else 0.0, cfg.prior_floor)
        off = cfg.coverage * len(unnamed(h.steps, covered))
        return [b + line.rank - (off + (0.0 if names_class(h.steps, asked, line.step.target, wide) else cfg.asked_class)
                                 if line.kind == "answer" else 0.0) for b, line in zip(bonus, lines, strict=True)]

    def _search(self, question: str, entities: dict[str, str], lm, neigh: Neighbourhood, cost: SearchCost,
                optional: frozenset = frozenset(), unprompted: frozenset = frozenset(), stage: str = "first",
                cover=True, keys=True, avoid: frozenset = frozenset()) -> Plan:
        """One search; ``stage`` (:data:`STAGES`): how it reads the class the question asks for; ``keys``: whether
        Find lines of dates and numbers are offered under the sort keys' names too (:meth:`key_targets`);
        ``avoid``: first lines not offered (those that searches before this one took, ``backtrack``)."""
        from memq.reconstruct import Draft, Reconstructor

        cfg = self.config
        self.keys_offered = keys
        names = entity_names(entities)
        covered = entity_names({mid: name for mid, name in entities.items() if mid not in optional}) if cover else []
        self.open_start = set(entities) <= optional  # GrailQA's class starts too, when no entity is required
        ask, wide, directed = stage != "off", stage == "wide", stage == "directed"
        asked = self.classes.asked(question, names) if ask and self.classes is not None and cfg.asked_class else None
        prompted = {m: n for m, n in entities.items() if m not in unprompted}
        prefix = lm.prompt_ids(self.prompt(question, prompted))
        self.null_prefix = lm.prompt_ids(self.prompt("?", prompted)) if cfg.calibrate else None
        self.null_cost = cost
        sims = self.bank.similarities(question)
        prior = self.prior
        support = prior.support(question) if prior is not None else {}
        root = Hyp(draft=Draft(), rec=Reconstructor(entities))
        ranked: list[dict] = []
        beams, complete, taken = [root], [], set()
        offered = 0
        first = True
        width, lines_each = (max(cfg.beam, cfg.asked_beam), max(cfg.lines, 2)) if wide else (cfg.beam, cfg.lines)
        beam, before = width, cost.passes
        find_ids = self._find_start(lm)
        allows = partial(self.allows, neigh=neigh)  # whether a written Make sure / Sort step may be used
        toward = asked if directed else None  # the class the Find lines are directed to, in a directed search
        for step in range(cfg.max_steps):
            spent = cost.passes - before  # a greedily written token counts one, drafted or not: the budget as chosen
            if cfg.budget and spent >= cfg.budget and width > 1:
                width, lines_each, beams = 1, 1, beams[:1]
                beams[0].notes.append(f"pass budget: {spent} forward passes after {step} step(s) reached the budget "
                                      f"of {cfg.budget}; the rest of the plan is searched with a beam of 1")
            grown: list[Hyp] = []
            searches = []  # each partial plan's line search, run together (one forward pass for all, a request each)
            for h in beams:
                mine: list[dict] = []  # this search's entries of ``ranked``
                # after the first step the Find lines (the ranker's scores, the KG's probes) are made only when the
                # line search reaches "Find": often it ends the plan first. Until then a bonus of 0 bounds them
                later = not first and find_ids is not None
                finds = [] if later else self._find_part(h, entities, lm, neigh, sims, question, mine, wide, toward)
                lines = finds + self._other_lines(h, names, lm, neigh, sims, question, wide, mine, len(finds))
                if first and avoid:
                    lines = [line for line in lines if line.text not in avoid]
                if first and not any(line.kind in ("find", "shape") for line in lines):
                    why = (f"no first line but those searched before ({len(avoid)})" if avoid
                           else "no class start reaches a number or date the question writes"
                           if self.refused.get("class_starts_no_value_passes") and not entities
                           else "no memory statement starts from an edge of the topic entities "
                                f"{', '.join(entities) or '(none)'} in the KG")
                    return self._free(question, entities, why)
                bonus = self._bonuses(h, lines, support, prior, covered, asked, wide)
                made: dict[int, Hyp | None] = {}  # each line found, extended (None: an open line that is unusable)
                own = SearchCost()  # this search's passes, for its max_passes

                def usable(scored, h=h, lines=lines, made=made) -> bool:
                    made[scored.index] = extend(h, lines[scored.index], scored, lm, question, names, allows)
                    return made[scored.index] is not None

                def make(h=h, lines=lines, mine=mine, own=own) -> list[tuple[tuple[int, ...], float]]:
                    self.null_cost = own  # the calibration's passes count in the search that makes the lines
                    new = self._find_part(h, entities, lm, neigh, sims, question, mine, wide, toward,
                                          offset=len(lines))
                    self.null_cost = cost
                    lines.extend(new)
                    return list(zip((line.ids for line in new), self._bonuses(h, new, support, prior), strict=True))

                searches.append((h, lines, made, mine, own, line_search(
                    prefix + h.ids, [list(line.ids) for line in lines], lines_each,
                    open_ends=[line.kind == "open" for line in lines], bonus=bonus, prune=cfg.prune,
                    max_passes=cfg.max_passes, cost=own, usable=usable, deferred=[(find_ids, make)] if later else (),
                    same=partial(self._same_step, h, lines) if cfg.distinct_steps else None)))
            for (h, lines, made, mine, own, _), found in zip(
                    searches, best_lines_together(lm, [search[-1] for search in searches]), strict=True):
                cost.passes, cost.tokens = cost.passes + own.passes, cost.tokens + own.tokens
                copies = {sc.index for sc in found if sc.same_step}  # usable lines of a step found before
                offered += len(lines)
                self._lm_calls += 1
                self.searched.append({
                    "search": stage + ("" if keys else ", no sort keys") + ("" if cover else ", no coverage")
                    + (f", without {len(avoid)} first line(s)" if avoid else ""), "step": step + 1,
                    "after": h.lines[-1] if h.lines else None, "score": round(h.score(cfg.norm), 4),
                    "taken": [{"line": lines[sc.index].text, "llm": round(sc.logprob, 4),
                               "bonus": round(sc.bonus, 4), "usable": made.get(sc.index) is not None}
                              | ({"same_step": True} if sc.index in copies else {})
                              for sc in found]})
                llm = {sc.index: sc.logprob for sc in found}
                for entry in mine:  # the ranker's candidates of this search, each with the model's score
                    for c in entry["candidates"]:
                        i = c.pop("index")
                        c["llm"] = round(llm[i], 4) if i in llm else None
                ranked.extend(mine)
                grown.extend(new for sc in found if (new := made[sc.index]) is not None and sc.index not in copies)
            if first:
                taken = {h.lines[0] for h in grown}
            first = False
            complete.extend(h for h in grown if h.done)
            live = sorted((h for h in grown if not h.done), key=lambda h: -h.score(cfg.norm))[:width]
            complete.sort(key=lambda h: -h.score(cfg.norm))
            # sums of log-probabilities and bonuses only fall: no partial plan can overtake the best complete one
            if not live or cfg.norm == "sum" and complete and live[0].score("sum") < complete[0].score("sum"):
                break
            if len(complete) >= beam and live[0].score(cfg.norm) < complete[beam - 1].score(cfg.norm):
                break  # a mean can rise again; stop once the beam's worth of complete plans leads every partial one
            beams = live
        if not complete and asked:  # no plan that ends names it: wider, then directed to it, then without the rule
            later = [s for s in STAGES[STAGES.index(stage) + 1:]
                     if s == "wide" and cfg.asked_beam > cfg.beam or s == "directed" and cfg.asked_directed]
            plan = self._search(question, entities, lm, neigh, cost, optional, unprompted, (later or ["off"])[0],
                                avoid=avoid)
            how = " and Find lines directed to it" if directed else ""
            plan.notes.append(f"asked class: no plan that ends names {asked} at the answer with a beam of {beam}{how}")
            return plan
        if not complete and self.least_hops and self.refused.get("answers_nearer_than_the_free_plans"):
            # dropped before KEY_RULES, which no train plan breaks (CWQ dev: the free plan goes farther in 3 of 500)
            least, self.least_hops = self.least_hops, 0
            plan = self._search(question, entities, lm, neigh, cost, optional, unprompted, stage, cover, keys, avoid)
            plan.notes.append(f"rescue length: no plan whose answer is {least} Find steps from the entities ends; "
                              "planned again without the rule")
            return plan
        held = [k for k in KEY_RULES if self.refused.get(k)]
        if not complete and keys and held:
            # the endings KEY_RULES name kept every partial plan from ending: planned again without them (keys=False)
            plan = self._search(question, entities, lm, neigh, cost, optional, unprompted, stage, cover, False, avoid)
            plan.notes.append(KEY_RULES[held[0]])
            return plan
        if not complete and cfg.coverage and len(covered) > 1:
            # a line names an entity only where the KG has it there, so coverage may leave no plan to end
            plan = self._search(question, entities, lm, neigh, cost, optional, unprompted, "off", False, keys, avoid)
            plan.notes.append("entity coverage: no plan that ends names every topic entity; planned again without it")
            return plan
        if not complete and taken and len(avoid) < cfg.backtrack:  # each search takes one first line or more
            plan = self._search(question, entities, lm, neigh, cost, optional, unprompted, stage, cover, keys,
                                avoid | taken)
            plan.notes.append(f"backtrack: no plan that starts {' or '.join(map(repr, sorted(taken)))} ends; "
                              f"searched again without {'that first line' if len(taken) == 1 else 'those first lines'}")
            return plan
        if not complete:
            return self._free(question, entities, "the beam ended with no complete plan")
        complete = [unread_dropped(h) if self.classes is not None else h for h in complete[:beam]]
        best = complete[0]
        plan = Plan(steps=list(best.steps), raw="\n".join(best.lines))
        plan.beam = [BeamPlan("\n".join(h.lines), round(h.score(cfg.norm), 4), tuple(h.steps)) for h in complete]
        plan.notes.extend(best.notes)
        if cfg.coverage and (left := unnamed(best.steps, covered)):
            plan.notes.append(f"entity coverage: the plan names no step of {', '.join(left)}")
        if not names_class(best.steps, asked, best.steps[-1].target, wide):
            if cfg.asked_redirect and stage in ("first", "wide"):
                again = self._search(question, entities, lm, neigh, cost, optional, unprompted, "directed", cover,
                                     keys, avoid)
                if again.steps and names_class(again.steps, asked, again.steps[-1].target):
                    again.notes.append(f"asked class: a plan ended without {asked}; one directed to it names it")
                    return again
                plan.notes.append(f"asked class: a search directed to {asked} ended no plan that names it")
            plan.notes.append(f"asked class: no step names the class the question asks for at the answer, {asked}")
        if self.splits_unseen and (unseen := unseen_steps(best.steps, self.bank)):
            plan.notes.append(f"unseen statement: step {unseen} from one no training question gave")
        if cfg.prior > 0 and prior is None:
            plan.notes.append("question prior off: the memory bank's sources name no training questions")
        plan.cost.update(candidates=offered, prior_weight=cfg.prior if prior is not None else 0.0)
        if self.ranker is not None:
            plan.ranked = ranked
            plan.cost.update(ranker=self.ranker.name, ranker_runtime=getattr(self.ranker, "runtime", "torch"),
                             ranked_pairs=sum(r["scored"] for r in ranked))
            if getattr(self.ranker, "fallback", None):
                plan.notes.append(self.ranker.fallback)
        return plan
