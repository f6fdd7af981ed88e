"""The answering pipeline: plan -> recall -> grounded choice -> reconstruct -> execute -> self-repair.

Every fallback that fires is appended to ``Answer.trace.fallbacks`` and every
self-repair attempt to ``Answer.trace.attempts``; nothing happens silently.

Answer order (documented, deterministic): when the query has ORDER BY, the
order the KG returns; otherwise sorted by (name, id), case-insensitively.
Hits@1 takes the first answer of this list.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import KnowledgeGraphError, MemQError, ReconstructionError
from .recall import TIE_ORDER, RecallConfig, break_tie, is_tie, preferred, recall_step
from .reconstruct import Draft, Reconstructor, query_terms
from .sparql import to_standard
from .sparql.model import Iri, Literal, Var
from .types import Answer, Plan, PlanStep, Recalled, Trace

log = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Config:
    """Where the memory and the KG are, which planner, and how to recall.

    Defaults work on a fresh clone: the committed WebQSP memory bank and the
    bundled benchmark KG in an embedded Oxigraph store.
    """

    memory: str = str(ROOT / "memory_bank" / "webqsp")
    kg: str = str(ROOT / "data" / "kg" / "benchmark.nq.gz")
    endpoint: str | None = None
    planner: str = "auto"
    planner_model: str = "qwen2.5-coder-0.5b"
    adapter: str | None = None
    planner_dataset: str = "webqsp"
    planner_batch_size: int = 8  # prompts per generate call (batched evaluation)
    recall: RecallConfig = field(default_factory=RecallConfig)
    grounded: bool = True
    repair: bool = True
    max_repairs: int = 4
    timeout: float = 20.0

    def __post_init__(self) -> None:
        if self.planner not in ("auto", "fewshot", "finetuned", "given"):
            raise ValueError(f"unknown planner {self.planner!r}; expected auto, fewshot, finetuned or given")
        if self.planner_batch_size < 1:
            raise ValueError(f"planner_batch_size must be >= 1, got {self.planner_batch_size}")
        if self.max_repairs < 0:
            raise ValueError(f"max_repairs must be >= 0, got {self.max_repairs}")


@dataclass
class _StepChoice:
    step: PlanStep
    index: int
    kept: list[Recalled] = field(default_factory=list)
    candidates: list[Recalled] = field(default_factory=list)
    filter_statement: Recalled | None = None
    tied: list[Recalled] = field(default_factory=list)  # tied statements that bound too, not kept


class Pipeline:
    """Loads the memory, the KG and the planner once, on first use, and answers questions."""

    def __init__(self, config: Config | None = None, *, bank=None, kg=None, planner=None) -> None:
        self.config = config or Config()
        self._bank, self._kg, self._planner = bank, kg, planner

    # -- lazily loaded parts -------------------------------------------------
    @property
    def bank(self):
        if self._bank is None:
            from .memory.bank import MemoryBank

            self._bank = MemoryBank.load(self.config.memory)
        return self._bank

    @property
    def kg(self):
        if self._kg is None:
            self._kg = open_kg(self.config.kg, self.config.endpoint)
        return self._kg

    @property
    def planner(self):
        if self._planner is None:
            from .plan.planner import make_planner

            if self.config.planner == "given":
                raise ReconstructionError("this pipeline takes plans from the caller (planner='given'); pass plan=")
            kind, adapter = self._planner_choice()
            if self.config.planner == "auto":
                log.info("planner auto -> %s", kind)
            self._planner = make_planner(kind, model=self.config.planner_model, adapter=adapter,
                                         batch_size=self.config.planner_batch_size,
                                         dataset=self.config.planner_dataset)
        return self._planner

    @property
    def planner_adapter(self) -> Path | None:
        """The LoRA adapter of the fine-tuned planner, loaded or not yet; None for any other planner."""
        if self._planner is not None:
            return getattr(self._planner, "adapter", None)
        kind, adapter = self._planner_choice()
        return adapter if kind == "finetuned" else None

    def _planner_choice(self) -> tuple[str, Path]:
        """(planner kind, fine-tuned adapter path); ``auto`` picks the committed or cached adapter if there is one,
        else few-shot."""
        from .plan.planner import default_adapter

        adapter = Path(self.config.adapter) if self.config.adapter else default_adapter(self.config.planner_dataset)
        kind = self.config.planner
        if kind == "auto":
            kind = "finetuned" if (adapter / "adapter_config.json").exists() else "fewshot"
        return kind, adapter

    # -- answering -----------------------------------------------------------
    def answer(self, question: str, entities: dict[str, str], plan: Plan | None = None) -> Answer:
        question, entities = validate(question, entities)
        trace = Trace()
        clock = time.perf_counter()
        self._check_entities_known(entities)
        if plan is None:
            calls_before = getattr(self.planner, "calls", 0)
            t0 = time.perf_counter()
            plan = self.planner.plan(question, entities)
            trace.timings["plan"] = time.perf_counter() - t0
            trace.llm_calls += getattr(self.planner, "calls", 0) - calls_before
        for line, reason in plan.dropped:
            trace.fallbacks.append(f"plan-line-dropped: {line!r} ({reason})")
        rec = Reconstructor(entities)
        t0 = time.perf_counter()
        choices = self._recall(plan, trace)
        trace.timings["recall"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        if self.config.grounded:
            self._ground(choices, rec, trace)
        answer_var = self._answer_var(plan, trace)
        query = self._build(choices, rec, answer_var, trace, skip_checks=0)
        trace.timings["reconstruct"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        rows = self._run(query, answer_var, trace)
        if not rows and self.config.repair:
            query, rows = self._repair(choices, rec, answer_var, trace, query)
        trace.timings["execute"] = time.perf_counter() - t0
        for name, mids in rec.ambiguous.items():
            trace.fallbacks.append(f"entity name {name!r} matches {len(mids)} given ids ({', '.join(mids)}); "
                                   "each reading tried as a UNION")
        for text, note in rec.notes.items():
            trace.fallbacks.append(f"step {next(i for i, s in enumerate(plan.steps) if s.text == text) + 1}: {note}")
        t0 = time.perf_counter()
        answers = self._named(rows, ordered=bool(query.order_by))
        trace.timings["names"] = time.perf_counter() - t0
        trace.timings["total"] = time.perf_counter() - clock
        recalled = [r for c in choices for r in c.kept] + [c.filter_statement for c in choices
                                                            if c.filter_statement is not None]
        return Answer(question, answers, to_standard(query), plan, recalled, trace)

    def _check_entities_known(self, entities: dict[str, str]) -> None:
        from .sparql.safety import entity_iri

        for mid in entities:
            rows = self.kg.select(f"SELECT ?p WHERE {{ {entity_iri(mid)} ?p ?o }} LIMIT 1",
                                  timeout=self.config.timeout)
            if not rows:
                rows = self.kg.select(f"SELECT ?p WHERE {{ ?s ?p {entity_iri(mid)} }} LIMIT 1",
                                      timeout=self.config.timeout)
            if not rows:
                raise MemQError(f"unknown entity id {mid!r}: the knowledge graph has no triple about it")

    def _recall(self, plan: Plan, trace: Trace) -> list[_StepChoice]:
        choices = []
        for i, step in enumerate(plan.steps):
            choice = _StepChoice(step, i)
            if step.kind == "find":
                # A step that relates two known things reads a structure-3 statement; one that starts from
                # one known thing reads structure 1 or 2. The other arity is used only if nothing fits.
                structures = ("3",) if step.value else ("1", "2")
                kept, candidates, fallback = recall_step(self.bank, step, i, self.config.recall, structures)
                if not candidates:
                    trace.fallbacks.append(f"step {i + 1}: no statement of structure {'/'.join(structures)}; "
                                           "any structure allowed")
                    kept, candidates, fallback = recall_step(self.bank, step, i, self.config.recall)
                choice.kept, choice.candidates = kept, candidates
                if fallback:
                    trace.fallbacks.append(f"step {i + 1}: recall {fallback}")
            elif step.kind == "check" and step.relation and step.relation != step.target:
                kept, candidates, fallback = recall_step(self.bank, step, i, self.config.recall,
                                                         structures=("filter",))
                if kept and not fallback:
                    choice.filter_statement, tied = break_tie(kept)
                    if tied > 1:
                        trace.fallbacks.append(f"step {i + 1}: {tied} tied filter statements; kept "
                                               f"{choice.filter_statement.statement.id} ({TIE_ORDER})")
                else:
                    trace.fallbacks.append(f"step {i + 1}: no filter statement recalled; checked by rule")
            choices.append(choice)
        return choices

    def _ground(self, choices: list[_StepChoice], rec: Reconstructor, trace: Trace) -> None:
        """READS-style grounded choice: keep the candidates that bind given the previous steps."""
        draft = Draft()
        for c in choices:
            if c.step.kind == "find" and c.kept:
                target = rec.var(c.step.target)
                grounded = []
                for r in c.kept:
                    try:
                        alt = rec.find(c.step, r.statement)
                    except ReconstructionError:
                        continue
                    probe = draft.copy()
                    probe.add_alternatives([alt])
                    if target is not None and self._run(probe.probe(target), target, trace, quiet=True):
                        grounded.append(r)
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
            self._apply(draft, c, rec, trace, skip=False)

    def _apply(self, draft: Draft, c: _StepChoice, rec: Reconstructor, trace: Trace | None, skip: bool) -> None:
        step = c.step
        if step.kind == "find":
            alts = []
            for r in c.kept:
                try:
                    alts.append(rec.find(step, r.statement))
                except ReconstructionError as exc:
                    if trace is not None:
                        trace.fallbacks.append(f"step {c.index + 1}: statement {r.statement.id} skipped: {exc}")
            draft.add_alternatives(alts)
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

    def _answer_var(self, plan: Plan, trace: Trace) -> Var:
        for step in reversed(plan.steps):
            if step.kind == "answer" and step.target and step.target.startswith("?"):
                return Var(step.target[1:])
        for step in reversed(plan.steps):
            if step.kind == "find" and step.target and step.target.startswith("?"):
                trace.fallbacks.append(f"plan has no answer step; answering the last find target {step.target}")
                return Var(step.target[1:])
        raise ReconstructionError("the plan assigns no variable to answer with")

    def _build(self, choices: list[_StepChoice], rec: Reconstructor, answer: Var, trace: Trace | None,
               skip_checks: int):
        draft = Draft()
        checks = [c.index for c in choices if c.step.kind == "check"]
        skipped = set(checks[len(checks) - skip_checks:]) if skip_checks else set()
        for c in choices:
            self._apply(draft, c, rec, trace, skip=c.index in skipped)
        if not draft.triples and not draft.unions:
            raise ReconstructionError("no step produced a graph pattern")
        return draft.query(answer, rec.boilerplate(answer, query_terms(draft)))

    def _repair(self, choices, rec, answer, trace, query):
        """EffiQA-style self-repair when the query finds nothing, each attempt traced.

        First swap in the other tied statements that bound (grounded choice kept one
        of several statements sharing a description; the later steps may need the
        other), one attempt each; then widen find steps (last first) with their next
        recalled candidates, at most ``max_repairs`` attempts; then drop the last
        1, 2, ... Make sure steps, one attempt each.
        """
        for c in choices:
            kept = c.kept
            for r in c.tied:
                c.kept = [r]
                q = self._build(choices, rec, answer, None, 0)
                rows = self._run(q, answer, trace, quiet=True)
                trace.attempts.append({"action": "swap-tied", "step": c.index + 1, "statement": r.statement.id,
                                       "rows": len(rows)})
                if rows:
                    trace.fallbacks.append(f"self-repair: step {c.index + 1} took tied statement {r.statement.id} "
                                           f"instead of {kept[0].statement.id}")
                    return q, rows
            c.kept = kept
        budget = self.config.max_repairs
        finds = [c for c in reversed(choices) if c.step.kind == "find"]
        for c in finds:
            used = {r.statement.id for r in c.kept}
            for r in c.candidates:
                if budget <= 0:
                    break
                if r.statement.id in used:
                    continue
                budget -= 1
                c.kept = c.kept + [r]
                used.add(r.statement.id)
                q = self._build(choices, rec, answer, None, 0)
                rows = self._run(q, answer, trace, quiet=True)
                trace.attempts.append({"action": "add-candidate", "step": c.index + 1,
                                       "statement": r.statement.id, "score": round(r.score, 4), "rows": len(rows)})
                if rows:
                    trace.fallbacks.append(f"self-repair: step {c.index + 1} widened with statement "
                                           f"{r.statement.id}")
                    return q, rows
                c.kept = c.kept[:-1]
        n_checks = sum(1 for c in choices if c.step.kind == "check")
        for k in range(1, n_checks + 1):  # one relaxation per Make sure step, outside the widening budget
            q = self._build(choices, rec, answer, None, k)
            rows = self._run(q, answer, trace, quiet=True)
            trace.attempts.append({"action": "relax-checks", "dropped_last": k, "rows": len(rows)})
            if rows:
                trace.fallbacks.append(f"self-repair: dropped the last {k} Make sure step(s)")
                return q, rows
        if trace.attempts:
            trace.fallbacks.append("self-repair found nothing; the answer is empty")
        return query, []

    def _run(self, query, var: Var, trace: Trace, quiet: bool = False) -> list:
        text = to_standard(query)
        try:
            rows = self.kg.select(text, timeout=self.config.timeout)
        except KnowledgeGraphError as exc:
            if quiet:
                trace.fallbacks.append(f"probe failed: {str(exc)[:160]}")
                return []
            raise
        out, seen = [], set()
        for row in rows:
            term = row.get(var.name)
            if term is not None and term not in seen:
                seen.add(term)
                out.append(term)
        return out

    def _named(self, terms: list, ordered: bool) -> list[tuple[str, str]]:
        ids = [t.local for t in terms if isinstance(t, Iri) and t.is_freebase]
        names = self.kg.names(ids) if ids else {}
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


def open_kg(data: str, endpoint: str | None = None):
    """An HTTP endpoint when ``endpoint`` is given, else the embedded Oxigraph store of ``data``.

    ``data`` is an RDF file, opened through the on-disk store built from it once
    under the memq cache and checked against the file's hash
    (:meth:`~memq.kg.oxigraph.OxigraphStore.cached`), or an Oxigraph store directory.
    """
    if endpoint:
        from .kg.endpoint import SparqlEndpoint

        return SparqlEndpoint(endpoint)
    from .kg.oxigraph import OxigraphStore

    path = Path(data)
    if path.is_dir():
        return OxigraphStore(path, read_only=True)
    if not path.exists():
        raise MemQError(f"knowledge graph file {data} does not exist; build it with `memq kg build-benchmark`")
    return OxigraphStore.cached(path)


def validate(question: object, entities: object) -> tuple[str, dict[str, str]]:
    """Check the API inputs; raise ValueError naming the bad value."""
    from .sparql.safety import check_entity_id

    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"question must be a non-empty string, got {question!r}")
    if len(question) > 2000:
        raise ValueError(f"question is {len(question)} characters long; at most 2000 are accepted")
    if isinstance(entities, dict):
        pairs = list(entities.items())
    elif isinstance(entities, (list, tuple)):
        pairs = []
        for e in entities:
            if not (isinstance(e, (list, tuple)) and len(e) == 2):
                raise ValueError(f"entities must be (id, name) pairs, got {e!r}")
            pairs.append((e[0], e[1]))
    else:
        raise ValueError(f"entities must be a dict of id -> name or a list of (id, name), got {entities!r}")
    if not pairs:
        raise ValueError("at least one topic entity (id -> name) is needed")
    out: dict[str, str] = {}
    for mid, name in pairs:
        check_entity_id(mid)
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"entity {mid!r} needs a non-empty name, got {name!r}")
        if any(ch in name for ch in "\n\r\t\x00{}<>\"\\") or len(name) > 200:
            raise ValueError(f"entity name {name!r} of {mid!r} contains characters a name cannot have")
        out[mid] = name.strip()
    return question.strip(), out
