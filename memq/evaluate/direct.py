"""The MemQ ablation "w/o PE, QRM": the planner's base model fine-tuned to write SPARQL directly.

Same questions, split, topic entities, base model, LoRA hyper-parameters and
step budget as the planner it is compared with; only the prompt and the
target change. The target is the gold query of the parse the plan was derived
from, in the readable ``ns:`` form without its PREFIX header and without the
boilerplate every gold query carries (the language filter on the answer and
``?x != topic``); both are added back before execution
(:func:`add_boilerplate`). The prompt is Table 9 asking for a SPARQL query,
with the topic entities as ``Name (m.xxx)`` so the model can copy ids.

At answer time the output is cut to its first query (code fences and trailing
text dropped), parsed with :func:`memq.sparql.parse_query`, executed on the
pipeline's KG and its answers named and ordered as memq's own are
(:func:`memq.reconstruct.assemble.named_answers`: KG order with ORDER BY, else sorted by
name). An output that does not parse scores 0 with error stage
``direct-sparql-parse``.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import MemQError, SparqlParseError
from ..reconstruct import language_filter
from ..reconstruct.assemble import named_answers
from ..sparql import parse_query, to_readable, to_standard
from ..sparql.model import FB, Call, Iri, Query, Var
from .scoring import error_stage, score

log = logging.getLogger(__name__)

ABLATIONS = ("direct-sparql",)
PARSE_STAGE = "direct-sparql-parse"
PREFIXES = {"ns": FB, "xsd": "http://www.w3.org/2001/XMLSchema#"}
INSTRUCTIONS = (
    "You are given a question to answer over the Freebase knowledge graph. Write one SPARQL query\n"
    "over Freebase that answers it; the first selected variable is the answer.\n"
    "Write Freebase ids with the prefix ns: (ns:m.0abc for an entity, ns:people.person.gender for a relation).\n"
    "Some topic entities you can use in the query are provided below, with their Freebase ids."
)
QUERY = "Question:\n{question}\nTopic Entities:\n{topic_entities}"

Entities = Sequence[tuple[str, str]] | Mapping[str, str]


# --------------------------------------------------------------------------- prompt and target

def _pairs(entities: Entities) -> list[tuple[str, str]]:
    pairs = list(entities.items()) if isinstance(entities, Mapping) else [tuple(e) for e in entities]
    return list(dict.fromkeys((m, n) for m, n in pairs if m))


def direct_prompt(question: str, entities: Entities) -> str:
    """Table 9 asking for SPARQL; entities as ``Name (m.xxx)``, one per line."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"question must be a non-empty str, got {question!r}")
    lines = [f"{n or m} ({m})" for m, n in _pairs(entities)]
    return INSTRUCTIONS + "\n" + QUERY.format(question=question.strip(),
                                              topic_entities="\n".join(lines) if lines else "(none)")


def prompt_hash() -> str:
    return hashlib.sha256((INSTRUCTIONS + "\n" + QUERY).encode()).hexdigest()[:16]


def _is_exclusion(expr, answer: Var | None, topics: set[str]) -> bool:
    return (isinstance(expr, Call) and expr.op == "!=" and len(expr.args) == 2 and expr.args[0] == answer
            and isinstance(expr.args[1], Iri) and expr.args[1].local in topics)


def strip_boilerplate(query: Query, topic_ids: Sequence[str]) -> Query:
    """The query without the language filter on its answer and ``?answer != topic`` (top-level filters)."""
    from ..decompose.split import is_language_filter
    from ..sparql.model import expr_vars

    answer, topics = query.answer_var, set(topic_ids)
    kept = tuple(f for f in query.where.filters
                 if not (is_language_filter(f) and expr_vars(f) == {answer}) and not _is_exclusion(f, answer, topics))
    return replace(query, where=replace(query.where, filters=kept))


def add_boilerplate(query: Query, topic_ids: Sequence[str]) -> Query:
    """The boilerplate the ablation's targets were stripped of: the language filter on a plain answer variable,
    and ``?answer != topic`` for each topic entity the query mentions. That was memq's reconstruction rule when
    the ablations were trained; reconstruction now says the answer is not the node its own step starts from
    (:meth:`memq.reconstruct.Reconstructor.answer_starts`). The ablation keeps the rule its model learned with."""
    answer = query.answer_var
    if answer is None or query.projection[0].expr is not None:
        return query
    terms = {x for t in query.where.all_triples() for x in (t.s, t.o)}
    if answer not in terms:
        return query
    extra = [] if any(f == language_filter(answer) for f in query.where.filters) else [language_filter(answer)]
    for mid in dict.fromkeys(topic_ids):
        iri = Iri(FB + mid)
        if iri in terms and Call("!=", (answer, iri)) not in query.where.filters:
            extra.append(Call("!=", (answer, iri)))
    return replace(query, where=replace(query.where, filters=query.where.filters + tuple(extra)))


def target_sparql(gold_sparql: str, topic_ids: Sequence[str]) -> str:
    """The training target: readable ``ns:`` form, boilerplate and PREFIX header removed."""
    text = to_readable(strip_boilerplate(parse_query(gold_sparql), topic_ids))
    return "\n".join(line for line in text.splitlines() if not line.startswith("PREFIX ")).strip()


@dataclass(frozen=True)
class DirectExample:
    """One training pair; quacks like a DerivedPlan for memq.plan.finetune (``.text`` is the target)."""

    question_id: str
    question: str
    dataset: str
    parse_id: str
    entities: tuple[tuple[str, str], ...]
    text: str

    @property
    def prompt(self) -> str:
        return direct_prompt(self.question, self.entities)


def examples_from_plans(plans, questions=None) -> tuple[list[DirectExample], list[tuple[str, str]]]:
    """One example per derived plan (same id, parse and topic entities); ``(examples, skipped (id, reason))``."""
    from .. import datasets

    if questions is None:
        questions = {}
        for ds in sorted({p.dataset for p in plans}):
            questions.update({q.id: q for q in datasets.load(ds, "train")})
    out, skipped = [], []
    for p in plans:
        q = questions.get(p.question_id)
        parse = next((x for x in q.parses if x.parse_id == p.parse_id), None) if q else None
        if parse is None:
            skipped.append((p.question_id, f"no gold parse {p.parse_id}"))
            continue
        try:
            target = target_sparql(parse.sparql, [m for m, _ in p.entities])
        except MemQError as exc:
            skipped.append((p.question_id, f"gold query: {exc}"))
            continue
        out.append(DirectExample(p.question_id, p.question, p.dataset, p.parse_id, tuple(p.entities), target))
    return out, skipped


# --------------------------------------------------------------------------- training (the planner's trainer)

_TRAIN_LOCK = threading.Lock()


def train_direct(examples: Sequence[DirectExample], out_dir: str | Path, cfg=None, *, data_info: dict | None = None,
                 resume: bool = False, progress=None, stop_at: float | None = None):
    """memq.plan.finetune.train, unchanged, with the direct-SPARQL prompt in place of Table 9.

    finetune.train builds each example as ``planner_prompt(p.question, p.entities)`` -> ``p.text``; the
    prompt function is swapped for :func:`direct_prompt` for the duration of the call, so the loop,
    loss, schedule, checkpoints and manifest are the planner's own. The manifest is then marked
    ``kind: lora-direct-sparql`` with this prompt's hash.
    """
    from ..plan import finetune

    cfg = cfg or finetune.TrainConfig()
    with _TRAIN_LOCK:
        original = finetune.planner_prompt
        finetune.planner_prompt = direct_prompt  # type: ignore[assignment]  # entities are (mid, name) pairs here
        try:
            result = finetune.train(examples, out_dir,  # type: ignore[arg-type]  # duck-typed DerivedPlan
                                    cfg, data_info=data_info, resume=resume, progress=progress, stop_at=stop_at)
        finally:
            finetune.planner_prompt = original
    if not result.finished:  # stopped early: a checkpoint, no adapter or manifest yet
        return result
    finetune.update_manifest(result.out_dir, kind="lora-direct-sparql",
                             prompt={"name": "memq-direct-sparql", "sha256": prompt_hash()},
                             target="gold SPARQL, readable ns: form, no PREFIX header, no language/topic filters")
    return result


# --------------------------------------------------------------------------- reading model output

_FENCE = re.compile(r"```[A-Za-z]*\s*\n?(.*?)(?:```|\Z)", re.S)
_START = re.compile(r"\b(PREFIX|SELECT)\b", re.I)
_MODIFIER = re.compile(r"^\s*(ORDER\s+BY|LIMIT|OFFSET|GROUP\s+BY|HAVING)\b", re.I)


def extract_sparql(raw: str) -> str:
    """The first query in a model's output: inside a code fence if there is one, from PREFIX/SELECT to the
    brace closing the WHERE block plus any ORDER BY/LIMIT/OFFSET lines. Raises SparqlParseError if none."""
    text = raw or ""
    fence = _FENCE.search(text)
    if fence and _START.search(fence.group(1)):
        text = fence.group(1)
    start = _START.search(text)
    if start is None:
        raise SparqlParseError(f"no SPARQL query in the model output {raw[:80]!r}")
    text = text[start.start():]
    depth, quote, end = 0, None, None
    for i, ch in enumerate(text):
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                end = i + 1
                break
    if end is None:
        return text.strip()  # unbalanced (cut off): let the parser say why
    tail: list[str] = []
    for line in re.split(r"\n", text[end:]):
        if not line.strip() and not tail:
            continue
        if _MODIFIER.match(line):
            tail.append(line.strip())
        else:
            break
    return (text[:end] + ("\n" + "\n".join(tail) if tail else "")).strip()


def parse_output(raw: str, topic_ids: Sequence[str]) -> Query:
    """Model output -> the query memq runs (prefixes and boilerplate added); raises SparqlParseError."""
    text = extract_sparql(raw)
    header = "".join(f"PREFIX {p}: <{iri}>\n" for p, iri in PREFIXES.items()
                     if not re.search(rf"PREFIX\s+{p}:", text, re.I))
    return add_boilerplate(parse_query(header + text), topic_ids)


# --------------------------------------------------------------------------- the model and its evaluation

class DirectSparqlModel:
    """Base model + direct-SPARQL LoRA adapter, greedy and batched; ``llm`` may be any LLM (tests)."""

    name = "direct-sparql"

    def __init__(self, adapter: str | Path | None = None, *, base: str | None = None, device: str = "cpu",
                 batch_size: int = 8, max_new_tokens: int = 200, llm=None) -> None:
        self.adapter = Path(adapter) if adapter else None
        self.manifest: dict = {}
        if llm is None:
            from ..plan.planner import read_manifest

            if self.adapter is None or not (self.adapter / "adapter_config.json").exists():
                raise MemQError(f"{adapter} is not a direct-SPARQL adapter (no adapter_config.json)")
            self.manifest = read_manifest(self.adapter)
            if self.manifest.get("kind") != "lora-direct-sparql":
                raise MemQError(f"{adapter} is a {self.manifest.get('kind')!r} adapter, not 'lora-direct-sparql'")
            from ..llm import LocalLLM

            base = base or self.manifest["base_model"].get("ref") or self.manifest["base_model"]["name"]
            llm = LocalLLM(base, device=device, adapter=str(self.adapter), batch_size=batch_size)
        self.llm = llm
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens

    @property
    def calls(self) -> int:
        return self.llm.calls

    def generate(self, items: Sequence[tuple[str, Entities]]) -> list[str]:
        """Raw outputs for ``(question, entities)`` pairs, ``batch_size`` prompts per generate call."""
        prompts = [direct_prompt(q, e) for q, e in items]
        out: list[str] = []
        for i in range(0, len(prompts), self.batch_size):
            out.extend(self.llm.generate(prompts[i:i + self.batch_size], max_new_tokens=self.max_new_tokens))
        return out


def answer_direct(pipeline, raw: str, entities: Mapping[str, str]) -> tuple[list[tuple[str, str]], Query]:
    """Run a model output on ``pipeline.kg``; answers named and ordered as Pipeline.answer does."""
    from ..types import Trace

    query = parse_output(raw, list(entities))
    answer = query.answer_var
    if answer is None:
        raise SparqlParseError("the query selects no variable (SELECT *)")
    terms = pipeline.select(query, answer, Trace())
    return named_answers(pipeline.kg, terms, ordered=bool(query.order_by)), query


def evaluate_direct(pipeline, question, raw: str, generate_s: float = 0.0) -> dict:
    """One question's ablation record: the keys evaluate_question writes (hits@1, f1, ehr, ged, error, ...)."""
    entities = dict(question.parses[0].topic_entities)
    record: dict = {"raw": raw, "llm_calls": 1}
    t0 = time.perf_counter()
    sparql, error, predicted = None, None, []
    try:
        answers, query = answer_direct(pipeline, raw, entities)
        sparql = to_standard(query)
        predicted = [i for i, _ in answers]
        record.update(answers=answers, sparql=sparql)
    except SparqlParseError as exc:
        error = PARSE_STAGE
        record.update(answers=[], exception=f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # noqa: BLE001 - scored 0 with its stage, as the main run does
        error = error_stage(exc)
        record.update(answers=[], exception=f"{type(exc).__name__}: {exc}")
    record["latency_s"] = round(generate_s + time.perf_counter() - t0, 4)
    record["generate_s"] = round(generate_s, 4)
    score(record, question, predicted, sparql, error)
    return record
