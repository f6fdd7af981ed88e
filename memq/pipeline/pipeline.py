"""The :class:`Pipeline`: one question, from :meth:`Pipeline.answer` to the KG and back (its stages: the
package's docstring, :mod:`memq.pipeline`)."""

from __future__ import annotations

import logging
import time
from functools import cached_property
from pathlib import Path

from ..errors import KnowledgeGraphError, LinkingError, MemQError, ReconstructionError
from ..kg import open_kg
from ..link.constraints import known_optional, left_out, linked_entities, unused_suggestions
from ..link.resolve import check_names, check_question, known_entities, needs_linking, validate
from ..plan.asked import of_class
from ..plan.base import RESCUED
from ..plan.format import answers_its_check, needs_entity
from ..reconstruct import Reconstructor
from ..reconstruct.assemble import answer_variable, build_query, distinct_values, named_answers
from ..reconstruct.filters import pins
from ..reconstruct.ground import ground, recall_steps
from ..reconstruct.repair import repair
from ..sparql import to_standard
from ..sparql.model import Query, Var
from ..types import Answer, Plan, Trace
from .config import BANK_ALONE, FREE_PLANNERS, GROUNDED_BY_DEFAULT, HYBRID_BY_DEFAULT, Config, search_for

log = logging.getLogger(__name__)

# how the trace ends a linking note where the question is answered without topic entities
WITHOUT_ENTITIES = "answered without topic entities (a plan that starts from a class needs none)"


class Pipeline:
    """Loads the memory, the KG and the planner once, on first use, and answers questions."""

    def __init__(self, config: Config | None = None, *, bank=None, kg=None, planner=None, linker=None) -> None:
        self.config = config or Config()
        self._bank, self._kg, self._planner, self._linker = bank, kg, planner, linker
        self._suggester: object = False
        self._planner_source: tuple[str, Path] | None = None

    # -- lazily loaded parts -------------------------------------------------
    @property
    def bank(self):
        if self._bank is None:
            from ..memory.bank import MemoryBank

            self._bank = MemoryBank.load(self.config.memory, include=not self.bank_alone)
        return self._bank

    @property
    def bank_alone(self) -> bool:
        """The bank is read without the banks it includes (``FREE_PLANNERS``, ``BANK_ALONE``)."""
        return self.planner_kind in FREE_PLANNERS or (self.planner_kind, self.planner_source[0]) in BANK_ALONE

    @property
    def kg(self):
        if self._kg is None:
            self._kg = open_kg(self.config.kg_file, self.config.endpoint)
        return self._kg

    @property
    def linker(self):
        """The entity linker (:mod:`memq.link`), loaded on the first question asked without ids (``memq serve``
        too: its warm-up does not load it)."""
        if self._linker is None:
            from ..link.resolve import open_linker

            shared = not self.bank_alone  # the fit reads a bank with what it includes
            self._linker = open_linker(self.config, kg=lambda: self.kg, bank=(lambda: self.bank) if shared else None)
        return self._linker

    def suggest(self, question: str, given) -> list:
        """Constraint entities suggested for a linked question, best first (:mod:`memq.link.constraints`)."""
        if self._suggester is False:
            from ..link.constraints import ConstraintSuggester

            self._suggester = self.config.constraints and ConstraintSuggester.from_bank(
                self.bank, min_support=self.config.constraints, link=self.config.link)
        return self._suggester.suggest(question, given) if self._suggester else []

    @cached_property
    def listed(self):
        """How the memory's training questions list their entities (:mod:`memq.link.order`), or None."""
        from ..link.order import ListedFirst

        return ListedFirst.from_bank(self.bank) if self.config.link.listed_order else None

    @property
    def planner(self):
        if self._planner is None:
            from ..plan.planner import make_planner
            from ..plan.ranker import ranker_choice

            if self.config.planner == "given":
                raise ReconstructionError("this pipeline takes plans from the caller (planner='given'); pass plan=")
            kind, adapter = self._planner_choice()
            if self.config.planner == "auto":
                log.info("planner auto -> %s", kind)
            extra = {}
            if kind in ("grounded", "hybrid"):
                ranker = ranker_choice(self.config.ranker, self.planner_source[0])
                extra = {"kg": self.kg, "bank": self.bank, "search": self.search,
                         "timeout": self.config.timeout, "ranker": ranker}
            self._planner = make_planner(kind, model=self.config.planner_model, adapter=adapter,
                                         batch_size=self.config.planner_batch_size,
                                         dataset=self.planner_source[0], backend=self.config.backend, **extra)
        return self._planner

    @property
    def planner_adapter(self) -> Path | None:
        """The LoRA adapter of the fine-tuned planner, loaded or not yet; None for any other planner."""
        if self._planner is not None:
            return getattr(self._planner, "adapter", None)
        kind, adapter = self._planner_choice()
        return adapter if kind in ("finetuned", "grounded", "hybrid") else None

    @property
    def planner_source(self) -> tuple[str, Path]:
        """(dataset, adapter) of the planner, read once. ``planner_dataset`` set: that dataset, and ``adapter`` or
        the dataset's default one. Unset (``memq.answer``, ``memq ask``, ``memq serve``): a memory bank that holds
        ``planner/`` (as ``memory_bank/cwq``) gives its planner, unless ``adapter`` names one, and the dataset of the
        bank (:func:`~memq.pipeline.config.bank_dataset`: the one its planner was trained on, else GrailQA for a
        bank of GrailQA's form), so CWQ questions in the CWQ bank are planned as ``memq evaluate --dataset cwq``
        plans them; a bank that names none gives WebQSP's."""
        if self._planner_source is None:
            from ..plan.planner import default_adapter, read_manifest

            config, dataset, adapter = self.config, self.config.planner_dataset, None
            if dataset is None:
                bank_planner = Path(config.memory) / "planner"
                if (bank_planner / "adapter_config.json").is_file():
                    adapter = bank_planner
                    read_manifest(bank_planner)  # an adapter without a readable manifest is refused by name
                dataset = config.dataset or "webqsp"
            adapter = Path(config.adapter) if config.adapter else adapter or default_adapter(dataset)
            self._planner_source = (dataset, adapter)
        return self._planner_source

    @property
    def search(self):
        """The grounded planner's search settings: ``Config.search``, else the planner's dataset's."""
        return self.config.search or search_for(self.planner_source[0])

    @property
    def distinct_nodes(self) -> bool:
        """Whether every node of a reconstructed query differs from every other: ``Config.distinct_nodes``, else
        whether the planner's dataset's gold queries are written so (``memq.datasets.DISTINCT_NODES``)."""
        from ..datasets import DISTINCT_NODES

        given = self.config.distinct_nodes
        return given if given is not None else self.planner_source[0] in DISTINCT_NODES

    @property
    def planner_kind(self) -> str:
        """``auto`` resolved: the planner ``planner`` loads."""
        return self._planner_choice()[0]

    def _planner_choice(self) -> tuple[str, Path]:
        """(planner kind, adapter path). ``auto``: few-shot without an adapter; with one and llama.cpp (it scores
        tokens), the grounded or hybrid planner where it won on dev (``*_BY_DEFAULT``), else free generation."""
        config = self.config
        dataset, adapter = self.planner_source
        kind = config.planner
        if kind == "auto":
            if not (adapter / "adapter_config.json").exists():
                kind = "fewshot"
            elif dataset in GROUNDED_BY_DEFAULT and config.backend == "llamacpp":
                kind = "grounded"
            elif dataset in HYBRID_BY_DEFAULT and config.backend == "llamacpp":
                kind = "hybrid"
            else:
                kind = "finetuned"
        return kind, adapter

    def warm_up(self, step=None, planner: bool = True) -> None:
        """Load what a fresh process's first question would (the bank, embedder and KG; with ``planner``, the planner's
        model and first-use builds), so no question's time carries it. ``step(what, fn)`` runs each, returns
        ``fn()``."""
        step = step or (lambda what, fn: fn())
        bank = step(f"memory bank {Path(self.config.memory).name}", lambda: self.bank)
        step("sentence embedder", lambda: bank.search("warm-up", 1))
        step("knowledge graph", lambda: self.kg.select("SELECT ?s WHERE { ?s ?p ?o } LIMIT 1",
                                                       timeout=self.config.timeout))
        if planner and self.config.planner != "given":
            llm = getattr(self.planner, "llm", None)
            if callable(getattr(llm, "load", None)):
                step(f"planner model ({getattr(llm, 'backend', '?')}: {getattr(llm, 'name', '?')})", llm.load)
            if callable(getattr(self.planner, "warm_up", None)):  # the grounded search's indexes, examples' embeddings
                step(f"{self.planner_kind} planner's first-use builds", self.planner.warm_up)

    # -- answering -----------------------------------------------------------
    def answer(self, question: str, entities: dict[str, str] | list[str] | None = None,
               plan: Plan | None = None, *, optional: dict[str, str] | None = None) -> Answer:
        """Answer one question about the topic ``entities`` (id -> name); a given ``plan`` skips the planner.

        No entities (``{}``): a plan that starts from a class (GrailQA's ``Find every building, assign it to
        ?x0.``) needs none; a plan with a step that starts from an entity, or a planner that plans from them,
        raises ValueError. Names get the wider limits of the gold datasets (``validate(strict_names=False)``).

        ``entities`` None: they are linked from the question, and the plan need not name them all (all but the
        best ``Config.link.required`` are optional; by default none is required); names alone (``["Jamaica"]``):
        each is resolved in the entity index (:mod:`memq.link.resolve`). An id the KG does not hold is dropped
        (traced) as long as another is left.

        A plan with a ``beam`` (the grounded planner's complete plans) is chosen by execution: its plans run
        in order and the first whose query returns rows is kept (``Trace.plans`` lists each one tried).
        With the hybrid planner, a plan that finds nothing is rescued by the grounded planner (:meth:`_rescue`).
        A given plan counts as the free plan there (that is how ``memq evaluate --plans`` re-scores saved free
        plans), and its ``rescue``, if it has one, is used as it is. ``optional``: entities the plan may name but
        need not (the constraint entities suggested for a linked question, :meth:`suggest`)."""
        trace = Trace()
        clock = time.perf_counter()
        second: tuple[str, ...] = ()  # linked second readings of a span: lines may start there, prompts don't name them
        if needs_linking(entities):
            question = check_question(question)
            try:
                entities, linked, second = self.link(question, entities, trace, suggest=optional is None)
            except LinkingError as exc:  # nothing linked: a plan may still start from a class ("which building ...")
                if entities is not None or not (plan is not None or self.plans_without_entities):
                    raise
                found = str(exc).partition("; give ")[0]  # the advice to give entities is not taken here
                trace.fallbacks.append(f"entity linking: {found}; {WITHOUT_ENTITIES}")
                entities, linked, second = {}, {}, ()
            optional, second = (linked, second) if optional is None else (optional, ())
        question, entities = validate(question, entities, allow_empty=True, strict_names=False)
        if entities:
            entities = known_entities(self.kg, entities, trace, self.config.timeout)
        asked = list(optional or ())
        optional = known_optional(self.kg, question, optional, entities, trace, self.config.timeout)
        if not entities and asked and not optional:  # linked entities, all optional, none of them in the KG
            unknown = f"unknown entity ids {', '.join(map(repr, asked))}: the knowledge graph has no triple about them"
            if not (plan is not None or self.plans_without_entities):
                raise LinkingError(unknown)
            trace.fallbacks.append(f"entity linking: {unknown}; {WITHOUT_ENTITIES}")
        if not entities and not optional and plan is None and not self.plans_without_entities:
            raise ValueError(f"at least one topic entity (id -> name) is needed: the {self.planner_kind} planner "
                             "plans from topic entities; give them, or a plan that starts from a class (plan=)")
        second = tuple(m for m in second if m in optional)  # those the KG holds
        entities = {**entities, **optional}
        if plan is None:
            calls_before = getattr(self.planner, "calls", 0)
            t0 = time.perf_counter()
            if optional and getattr(self.planner, "plans_with_optional", False):
                left_out(trace, second, entities, "second readings, unprompted links not in the planner's prompt")
                plan = self.planner.plan(question, entities, optional=tuple(optional), unprompted=second)
                if self.config.link.replan_unused and (unused := unused_suggestions(plan.steps, entities, trace,
                                                                                    second)):
                    plan = self.planner.plan(question, entities, optional=tuple(optional), unprompted=second + unused)
            else:
                plan = self.planner.plan(question, entities)
            trace.timings["plan"] = time.perf_counter() - t0
            trace.llm_calls += getattr(self.planner, "calls", 0) - calls_before
            trace.backend = getattr(self.planner, "backend_used", None)
            trace.fallbacks.extend(getattr(self.planner, "fallbacks", ()))
        if not entities and (why := needs_entity(plan.steps)) is not None:
            raise ValueError(f"at least one topic entity (id -> name) is needed: {why}, and none was given")
        trace.fallbacks.extend(f"planner: {note}" for note in plan.notes)
        trace.cost = dict(plan.cost)
        hybrid = plan.rescue is not None or (not plan.beam and self._planner_choice()[0] == "hybrid")
        result = failed = None
        try:
            if len(plan.beam) > 1:
                plan, result = self._choose(plan, entities, trace)
            else:
                result = self._execute(plan, entities, trace, self.config.repair)
        except ReconstructionError as exc:  # the plan's statements do not make a query: the hybrid's rescue tries
            if not hybrid:
                raise
            failed = exc
            trace.fallbacks.append(f"hybrid: free generation's plan makes no query ({str(exc)[:160]})")
        pinned = hybrid and result is not None and bool(result[1]) and answers_its_check(plan.steps) and pins(result[0])
        if pinned:  # its one answer is the value its check names: no train plan answers so (memq.plan.lines.may_end)
            trace.fallbacks.append("hybrid: free generation's plan answers with the value one of its checks names")
        if hybrid and (result is None or not result[1] or pinned):
            plan, result = self._rescue(question, entities, plan, result, trace, tuple(optional), second)
            if result is None:
                raise failed
        query, rows, choices, rec = result
        t0 = time.perf_counter()
        answers = named_answers(self.kg, rows, ordered=bool(query.order_by))
        trace.timings["names"] = time.perf_counter() - t0
        trace.timings["total"] = time.perf_counter() - clock
        recalled = [r for c in choices for r in c.kept] + [c.filter_statement for c in choices
                                                            if c.filter_statement is not None]
        return Answer(question, answers, to_standard(query), plan, recalled, trace)

    @property
    def plans_without_entities(self) -> bool:
        """Whether the planner may plan a question that names no entity: the grounded planner on a memory bank with
        class statements (GrailQA's form), whose plans may start from a class. Read without loading the planner."""
        if self._planner is not None:
            return bool(getattr(self._planner, "plans_without_entities", False))
        if self.config.planner == "given" or self.planner_kind != "grounded":
            return False
        from ..plan.lines import has_classes

        return has_classes(self.bank)  # as the grounded planner's own plans_without_entities reads its bank

    def unclassed(self, question: str, entities: dict[str, str], optional: dict[str, str], trace: Trace):
        """``(entities, optional)`` less the linked entities read from the words of the class the question asks for
        ("which *building* has less than 9 floors?": P&O Building from "building"; "the largest *unit* of
        frequency": Astronomical Unit of Mass), where the grounded planner reads that class (a bank with class
        statements; :meth:`memq.plan.lines.ClassStatements.asked`). Such a question names the class, not an
        entity, and a plan that starts from the entity answers another question. ``LinkConfig.class_words``
        True keeps them. Each one dropped is traced."""
        classes = None
        if not self.config.link.class_words and self.plans_without_entities:
            classes = getattr(self.planner, "classes", None)
        asked = classes.asked(question, [*entities.values(), *optional.values()]) if classes is not None else None
        if not asked:
            return entities, optional
        words = set(asked.lower().split())
        drop = {}
        for link in trace.links:
            if link.get("mention") and of_class(link["mention"], words):  # memq.plan.asked
                link["class_word"] = True  # the trace keeps it, marked
                drop[link["id"]] = link["mention"]
        for mid, mention in drop.items():
            name = entities.get(mid, optional.get(mid))
            if name is not None:
                trace.fallbacks.append(f"entity linking: {name} ({mid}) dropped: read from {mention!r}, the words of "
                                       f"the class the question asks for ({asked})")
        return ({m: n for m, n in entities.items() if m not in drop},
                {m: n for m, n in optional.items() if m not in drop})

    def link(self, question: str, names: list[str] | None, trace: Trace, suggest: bool = True):
        """``(entities, optional, second)`` for a question asked without ids or with names alone
        (:func:`memq.link.constraints.linked_entities`); linked ones read from the words of the class the question
        asks for left out (:meth:`unclassed`)."""
        names = None if names is None else check_names(names)  # before the index loads
        entities, optional, second = linked_entities(self.linker, question, names, trace, self.config.link,
                                                     self.suggest if suggest else None, names is None and self.listed)
        if names is None:  # linked from the question (a caller's names are all kept)
            entities, optional = self.unclassed(question, entities, optional, trace)
            second = tuple(m for m in second if m in entities or m in optional)
        return entities, optional, second

    def _choose(self, plan: Plan, entities: dict[str, str], trace: Trace):
        """Execution-guided choice among ``plan.beam``: the first plan whose query returns rows (no self-repair),
        else the first plan with self-repair. Each plan tried is listed in ``trace.plans``."""
        from ..plan.format import parse_plan

        names = list(entities.values())
        for i, (text, score, steps) in enumerate(plan.beam):
            try:
                if i == 0 and plan.raw == text:
                    candidate = plan  # the planner's best plan, with its notes and dropped lines
                else:
                    candidate = Plan(list(steps), raw=text) if steps else parse_plan(text, names)
            except MemQError as exc:
                trace.plans.append({"plan": text, "score": score, "rows": 0, "error": str(exc)[:160]})
                continue
            sub = Trace(timings=trace.timings)
            result = self._execute(candidate, entities, sub, False)
            trace.plans.append({"plan": text, "score": score, "rows": len(result[1])})
            if result[1]:
                trace.fallbacks.extend(sub.fallbacks)
                trace.attempts.extend(sub.attempts)
                if i:
                    trace.fallbacks.append(f"execution-guided choice: plan {i + 1} of {len(plan.beam)} in the beam "
                                           "is the first that answers")
                return candidate, result
        trace.fallbacks.append(f"execution-guided choice: none of the {len(plan.beam)} plans in the beam "
                               "answers; the first one goes on with self-repair")
        return plan, self._execute(plan, entities, trace, self.config.repair)

    def _rescue(self, question: str, entities: dict[str, str], free: Plan, result, trace: Trace, optional=(),
                unprompted=()):
        """The hybrid planner's second chance for ``free``, a plan whose query (``result``) found nothing, self-repair
        included, that made no query (``result`` None) or that answers with a value its check names: the grounded
        planner's plan (``free.rescue``, planned here unless saved), chosen by execution. Its result when it finds
        rows; else ``free`` and ``result`` stand. Each step is in the trace."""
        rows = len(result[1]) if result else 0
        stands = "the free plan's " + ("answer stands" if rows else "empty answer stands")
        trace.plans.append({"plan": free.raw, "score": None, "rows": rows, "planner": "free generation"})
        if free.rescue is None:
            t0 = time.perf_counter()
            free.rescue = self.planner.rescue(question, entities, optional, unprompted, free)
            trace.timings["plan"] = trace.timings.get("plan", 0.0) + time.perf_counter() - t0
        grounded = free.rescue
        trace.llm_calls += grounded.cost.get("llm_calls", 0)
        trace.cost["rescue"] = dict(grounded.cost)
        trace.fallbacks.append(RESCUED)
        trace.fallbacks.extend(f"planner: {note}" for note in grounded.notes)
        if grounded.cost.get("free_generation"):
            trace.fallbacks.append(f"hybrid: the grounded planner fell back to free generation; {stands}")
            return free, result
        sub = Trace(timings=trace.timings, plans=trace.plans)
        if len(grounded.beam) > 1:
            chosen, found = self._choose(grounded, entities, sub)
        else:
            chosen, found = grounded, self._execute(grounded, entities, sub, self.config.repair)
            sub.plans.append({"plan": grounded.raw, "score": grounded.beam[0].score if grounded.beam else None,
                              "rows": len(found[1])})
        if not found[1]:
            trace.fallbacks.append(f"hybrid: the grounded planner's plans found nothing either; {stands}")
            return free, result
        trace.fallbacks.extend(sub.fallbacks)
        trace.attempts.extend(sub.attempts)
        return chosen, found

    def _execute(self, plan: Plan, entities: dict[str, str], trace: Trace, repair_on: bool):
        """Recall, grounding, assembly and execution of one plan: ``(query, rows, choices, reconstructor)``."""
        for line, reason in plan.dropped:
            trace.fallbacks.append(f"plan-line-dropped: {line!r} ({reason})")
        rec = Reconstructor(entities, distinct_nodes=self.distinct_nodes)
        t0 = time.perf_counter()
        choices = recall_steps(self.bank, plan, self.config.recall, trace)
        trace.timings["recall"] = trace.timings.get("recall", 0.0) + time.perf_counter() - t0
        embedder_note = getattr(self.bank.embedder, "fallback", None)  # e.g. MiniLM on torch, not onnxruntime
        if embedder_note and f"recall: {embedder_note}" not in trace.fallbacks:
            trace.fallbacks.append(f"recall: {embedder_note}")
        t0 = time.perf_counter()

        def probe(query: Query, var: Var) -> list:
            return self.select(query, var, trace, quiet=True)

        if self.config.grounded:
            ground(choices, rec, probe, trace)
        answer_var = answer_variable(plan, trace)
        query = build_query(choices, rec, answer_var, trace)
        trace.timings["reconstruct"] = trace.timings.get("reconstruct", 0.0) + time.perf_counter() - t0
        t0 = time.perf_counter()
        rows = self.select(query, answer_var, trace)
        if not rows and repair_on:
            repaired = repair(choices, lambda skip: build_query(choices, rec, answer_var, None, skip),
                              lambda q: probe(q, answer_var), trace, self.config.max_repairs)
            query, rows = repaired or (query, [])
        trace.timings["execute"] = trace.timings.get("execute", 0.0) + time.perf_counter() - t0
        for name, mids in rec.ambiguous.items():
            trace.fallbacks.append(f"entity name {name!r} matches {len(mids)} given ids ({', '.join(mids)}); "
                                   "each reading tried as a UNION")
        for text, note in rec.notes.items():
            trace.fallbacks.append(f"step {next(i for i, s in enumerate(plan.steps) if s.text == text) + 1}: {note}")
        return query, rows, choices, rec

    def select(self, query: Query, var: Var, trace: Trace, quiet: bool = False) -> list:
        """The distinct values of ``var`` in ``query``'s rows; ``quiet``: a KG error is traced and gives []."""
        text = to_standard(query)
        try:
            rows = self.kg.select(text, timeout=self.config.timeout)
        except KnowledgeGraphError as exc:
            if quiet:
                trace.fallbacks.append(f"probe failed: {str(exc)[:160]}")
                return []
            raise
        return distinct_values(rows, var)

