"""The statement ranker's data (:mod:`memq.plan.ranker`): each training question's gold plan replayed step by step
on the KG, one *group* of candidates per Find step.

:func:`step_groups` replays a gold plan (:mod:`memq.plan.data`) as the grounded planner would have built it
(GrailQA's class steps narrow the draft as the planner's class lines do, so a class start's members are the node the
next Find starts from): at each Find step the candidates are exactly the ones the planner ranks
(:meth:`memq.plan.grounded.GroundedPlanner.options`: the memory's path statements whose edges exist at a known node;
with ``unseen_top`` >= 0, those a training question gave when there are any), the positive is the gold statement read
from the gold step's node, and every other candidate is a negative: a relation that binds at the same node. A group
holds the ranker's query, the positive's text and the candidates' texts with their MiniLM similarity to the question.
:func:`write_groups` writes them as JSONL, one group a line, appended and flushed, so a stopped run goes on where it
stopped; :func:`read_groups` and :func:`training_groups` read them back.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from memq.errors import MemQError
from memq.files import sha256_file

from .ranker import candidate_text, query_text

__all__ = ["groups_hash", "read_groups", "schema_index", "step_groups", "training_groups", "write_groups"]

logger = logging.getLogger(__name__)


def schema_index(bank) -> dict[str, list]:
    """The bank's path statements by the class of the node they start from (``?entity1``): the schema's domain of
    an edge out of it, the range of one into it."""
    from memq.describe.schema import schema

    from .neighbourhood import bank_edges

    edges, out = bank_edges(bank.records), {}
    for record in bank.records:
        for cls in _classes(edges.get(record.statement.id, (set(), set()))[0], schema()):
            out.setdefault(cls, []).append(record)
    return out


def _classes(edges, roles) -> set[str]:
    return {c for rel, way in edges if (c := roles.domain(rel) if way == "out" else roles.range(rel))}


def step_groups(plan, planner, neigh, schema: dict | None = None, limit: int = 160) -> list[dict]:
    """One group per Find step of a derived ``plan`` (see the module docstring); ``planner`` is a
    :class:`~memq.plan.grounded.GroundedPlanner` over the KG and the memory bank, ``neigh`` its
    :class:`~memq.plan.neighbourhood.Neighbourhood`. A step whose gold statement is not in the bank gives a
    group with ``positive`` None (it counts as a miss in recall, and is not trained on).

    ``schema`` (:func:`schema_index`): where the KG gives a step no candidate (GrailQA's synthetic programs, whose
    facts the benchmark KG lacks), its candidates are the ``limit`` statements most similar to the question among
    those that start from the class the gold statement starts from, read from the schema (``from_schema`` in the
    group). Such a set is narrower than the KG's: a node has other classes' relations too."""
    from memq.reconstruct import Draft, Reconstructor
    from memq.sparql.model import Group

    from .prior import trained_first

    bank = planner.bank
    entities = {mid: name for mid, name in plan.entities}
    sims = {rec.statement.id: float(s) for rec, _, s in bank.search(plan.question, k=len(bank))}
    rec, draft = Reconstructor(entities), Draft()
    assigned: list[str] = []
    lines: list[str] = []
    groups = []
    for i, (step, sid) in enumerate(zip(plan.steps, plan.statement_ids, strict=True)):
        if step.kind == "find":
            record = bank.get(sid) if sid else None
            texts: dict[str, float] = {}
            trained, unseen = trained_first(planner.options(entities, assigned, draft, neigh), planner.splits_unseen)
            for opt, mentions in trained or unseen:  # the ones the planner ranks first
                try:
                    text = candidate_text(opt, mentions)
                except MemQError:
                    continue
                texts[text] = max(texts.get(text, -1.0), sims.get(opt.statement.id, -1.0))
            positive, gold = None, {"?entity1": step.source}
            if record is not None:
                if record.statement.structure == "3" and step.value:
                    gold["?entity2"] = step.value
                try:
                    positive = candidate_text(record, gold)
                except MemQError:
                    positive = None
            from_schema = not texts and schema is not None and positive is not None
            if from_schema:
                _schema_texts(texts, record, gold, schema, sims, limit)
            groups.append({"id": plan.question_id, "step": i, "query": query_text(plan.question, lines),
                           "statement": sid, "positive": positive, "in_candidates": positive in texts,
                           "positive_sim": sims.get(sid, -1.0) if sid else None,
                           "candidates": sorted(texts.items(), key=lambda kv: -kv[1]),
                           **({"from_schema": True} if from_schema else {})})
            if record is None:
                break  # the rest of the plan cannot be replayed without this step's statement
            try:
                group = rec.find(step, record.statement)
            except MemQError:
                break
            draft.add_alternatives([group])
            assigned.append(step.target)
        elif step.kind == "class":  # GrailQA: a class start or check narrows the draft as the planner's does
            record = bank.get(sid) if sid else None
            if record is None:
                break
            try:
                triple = rec.class_triple(step, record.statement)
            except MemQError:
                break
            draft.add_alternatives([Group(triples=(triple,))])
            if step.op == "find":  # a class start: its members are the node the next Find starts from
                assigned.append(step.target)
        lines.append(step.text)
    return groups


def _schema_texts(texts: dict, record, mentions: dict, schema: dict, sims: dict, limit: int) -> None:
    """``texts`` filled with the ``limit`` statements of ``schema`` most similar to the question that start from a
    class ``record`` starts from, the gold statement among them, each rendered with ``mentions``."""
    from memq.describe.schema import schema as roles

    from .neighbourhood import statement_edges

    found = {r.statement.id: r for c in _classes(statement_edges(record.statement), roles()) for r in schema.get(c, ())}
    found[record.statement.id] = record
    keep = sorted(found, key=lambda k: -sims.get(k, -1.0))[:limit]
    if record.statement.id not in keep:  # the gold statement binds wherever the KG holds the plan's facts
        keep[-1] = record.statement.id
    for sid in keep:
        try:
            text = candidate_text(found[sid], mentions)
        except MemQError:
            continue
        texts[text] = max(texts.get(text, -1.0), sims.get(sid, -1.0))


def write_groups(plans: Sequence, planner, out: str | Path, *, timeout: float | None = 20.0,
                 progress: Callable[[Iterable], Iterable] | None = None, schema: dict | None = None) -> Path:
    """Append the groups of every plan not yet in ``out`` (JSONL, flushed per question: a stopped run resumes);
    ``schema``: as :func:`step_groups` reads it."""
    from .neighbourhood import Neighbourhood

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = {g["id"] for g in read_groups(out)} if out.exists() else set()
    todo = [p for p in plans if p.question_id not in done]
    with open(out, "a", encoding="utf-8") as fh:
        for plan in (progress(todo) if progress else todo):
            try:
                groups = step_groups(plan, planner, Neighbourhood(planner.kg, timeout), schema)
            except (MemQError, ValueError) as exc:  # ValueError: a topic "entity" that is not an entity id
                logger.warning("%s: no groups (%s)", plan.question_id, exc)
                groups = []
            if not groups:  # marks the question done
                groups = [{"id": plan.question_id, "step": None, "positive": None, "candidates": []}]
            for g in groups:
                fh.write(json.dumps(g, ensure_ascii=False) + "\n")
            fh.flush()
    return out


def read_groups(path: str | Path, *, usable: bool = False) -> list[dict]:
    """The groups of a data file (JSONL, or JSONL gzipped when the name ends in .gz); ``usable``: only those with a
    positive among two or more candidates."""
    out = []
    if not Path(path).is_file():
        raise MemQError(f"ranker data file not found: {path} (write one with `memq planner ranker data`)")
    with _open_text(path) as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                g = json.loads(line)
            except ValueError as exc:
                raise MemQError(f"{path}:{n}: not JSON ({exc})") from exc
            if usable and (g.get("step") is None or not g.get("positive")):
                continue
            out.append(g)
    return out


def _open_text(path: str | Path):
    return gzip.open(path, "rt", encoding="utf-8") if str(path).endswith(".gz") else open(path, encoding="utf-8")


def groups_hash(paths: Sequence[str | Path]) -> str:
    """The data's hash: the sha256 of each file's text (a gzipped file hashes as the file it was made from)."""
    h = hashlib.sha256()
    for p in paths:
        if str(p).endswith(".gz"):
            inner = hashlib.sha256()
            with gzip.open(p, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    inner.update(block)
            h.update(inner.hexdigest().encode())
        else:
            h.update(sha256_file(Path(p)).encode())
    return h.hexdigest()[:16]


def training_groups(data: Sequence, bound_only: bool = False) -> list[dict]:
    """The usable groups of ``data``: each item a path, or ``(path, n)`` for its first ``n`` questions (of those with
    a usable group). ``bound_only``: only steps whose gold statement is among the KG's candidates."""
    out = []
    for item in data:
        path, limit = (item, None) if isinstance(item, (str, Path)) else item
        groups = [g for g in read_groups(path, usable=True) if not bound_only or g.get("in_candidates")]
        if limit is not None:
            keep = set(list(dict.fromkeys(g["id"] for g in groups))[:limit])
            groups = [g for g in groups if g["id"] in keep]
        out.extend(groups)
    return out
