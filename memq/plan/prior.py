"""The question prior: the statements that the nearest training questions used.

The grounded planner's model chooses each Find line among lines that bind in
the KG, but where it is unsure it picks a real relation that is not the one
the question means ("places lived" for "place of birth"). The memory knows,
for every statement, the training questions whose gold query it came from
(``Statement.question_ids``). Questions that are worded alike usually ask for
the same relation, so the ``neighbours`` training questions nearest to the
question (cosine of their MiniLM vectors, the bank's own embedder) vote for
the statements they used, each with its similarity:

    support(s) = sum of sim(q, n) over neighbours n that used s / sum of sim(q, n) over all neighbours

and each Find line of a step gets the bonus

    weight * (log(floor + support(s)) - max over the step's Find lines of log(floor + support))

which is 0 for the best-supported line and negative for the others, so the line
search stays exact (:func:`memq.plan.linesearch.best_lines`). *Finally*, *Make
sure* and *Sort* lines get no bonus.

**Dev questions are held out.** Only training questions on the train side of
:func:`memq.plan.data.split_of` vote, the same questions the planner adapter
was trained on, so that dev figures are not flattered by a dev question voting
for itself. GrailQA's dev questions are a file of their own
(:func:`memq.plan.data.grailqa_part`), so all its train questions and synthetic
programs vote (``WHOLE_TRAIN``), those the adapter never saw (a mid without a
name) too: none is a dev question.

The training questions' vectors are computed once per memory bank and cached
under ``$MEMQ_CACHE/prior/`` (WebQSP: 2,500 questions, about 8 s on the 2-core
CPU), keyed by the embedder and the questions' ids and texts.
"""

from __future__ import annotations

import hashlib
import io
import logging
import math
from collections.abc import Sequence

import numpy as np

from memq.errors import MemQError

__all__ = ["FORMAT", "QuestionPrior", "WHOLE_TRAIN", "bonuses", "source_questions", "trained_first", "unseen_steps"]

logger = logging.getLogger(__name__)

FORMAT = 1
# gold sources whose dev questions are not carved from their train questions: every question of them votes
WHOLE_TRAIN = ("grailqa-train", "grailqa-synthetic")


def source_questions(bank) -> tuple[list[str], list[str], dict[str, tuple[str, ...]]]:
    """(ids, texts, statement ids used by each id) of the bank's training questions on the train side.

    The texts come from the gold sources the bank names (:func:`memq.memory.build.gold_questions`); a bank built
    from the schema alone has none.
    """
    from memq.memory.build import GOLD_SOURCES, gold_questions

    from .data import split_of

    named = sorted({s for sources in bank.sources for s in sources if s in GOLD_SOURCES})
    questions = {source: gold_questions(source) for source in named}
    whole = {q.id for source in named if source in WHOLE_TRAIN for q in questions[source]}
    uses: dict[str, list[str]] = {}
    for record in bank.records:
        for qid in record.statement.question_ids:
            if qid in whole or split_of(qid) == "train":
                uses.setdefault(qid, []).append(record.statement.id)
    texts: dict[str, str] = {}
    for source in named:
        texts.update((q.id, q.question) for q in questions[source] if q.id in uses)
    ids = sorted(i for i in uses if i in texts)
    return ids, [texts[i] for i in ids], {i: tuple(uses[i]) for i in ids}


class QuestionPrior:
    """The training questions' vectors and the statements each used; :meth:`support` votes for statements."""

    def __init__(self, ids: Sequence[str], vectors: np.ndarray, uses: dict[str, tuple[str, ...]], embedder, *,
                 neighbours: int = 10) -> None:
        if not isinstance(neighbours, int) or neighbours < 1:
            raise ValueError(f"neighbours must be an int >= 1, got {neighbours!r}")
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(ids):
            raise MemQError(f"question prior: {len(ids)} question ids but vectors of shape {vectors.shape}")
        self.ids = list(ids)
        self.vectors = vectors
        self.uses = [uses[i] for i in self.ids]
        self._index = {qid: n for n, qid in enumerate(self.ids)}
        self.embedder = embedder
        self.neighbours = neighbours

    @classmethod
    def from_bank(cls, bank, *, neighbours: int = 10, cache: bool = True) -> QuestionPrior | None:
        """The prior of ``bank``'s training questions, or None when its sources name none (a schema-only bank)."""
        ids, texts, uses = source_questions(bank)
        if not ids:
            return None
        emb = bank.embedder
        digest = hashlib.sha256(f"{FORMAT}\0{emb.name}\0{emb.dim}\0".encode())
        for i, t in zip(ids, texts, strict=True):
            digest.update(f"{i}\0{t}\0".encode())
        path = None
        if cache:
            from memq.llm import cache_root

            path = cache_root() / "prior" / f"{digest.hexdigest()[:24]}.npy"
        vectors = None
        if path is not None and path.is_file():
            try:
                vectors = np.load(path, allow_pickle=False)
            except (OSError, ValueError) as exc:
                logger.warning("question prior cache %s unreadable (%s); recomputing", path, exc)
            if vectors is not None and vectors.shape != (len(ids), emb.dim):
                logger.warning("question prior cache %s has shape %s, not %s; recomputing", path, vectors.shape,
                               (len(ids), emb.dim))
                vectors = None
        if vectors is None:
            logger.warning("question prior: embedding %d training questions once (cached in %s)", len(ids),
                           path.parent if path is not None else "memory only")
            vectors = np.concatenate([emb.encode(texts[i:i + 256]) for i in range(0, len(texts), 256)])
            if path is not None:
                from memq.files import write_atomic

                buf = io.BytesIO()
                np.save(buf, vectors.astype(np.float32), allow_pickle=False)
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    write_atomic(path, buf.getvalue())
                except OSError as exc:  # a read-only cache costs the embedding again next time, nothing more
                    logger.warning("question prior: could not save %s (%s)", path, exc)
        return cls(ids, vectors, uses, emb, neighbours=neighbours)

    def nearest(self, question: str) -> list[tuple[str, float]]:
        """The ``neighbours`` nearest training questions, as (id, cosine similarity), nearest first."""
        q = np.asarray(self.embedder.encode([question]), dtype=np.float32)[0]
        sims = self.vectors @ q
        k = min(self.neighbours, len(self.ids))
        top = np.argpartition(-sims, k - 1)[:k]
        top = top[np.argsort(-sims[top], kind="stable")]
        return [(self.ids[i], float(sims[i])) for i in top]

    def support(self, question: str) -> dict[str, float]:
        """Statement id -> the share of the neighbours' similarity that voted for it (0 to 1)."""
        votes: dict[str, float] = {}
        total = 0.0
        for qid, sim in self.nearest(question):
            w = max(sim, 0.0)
            total += w
            for sid in self.uses[self._index[qid]]:
                votes[sid] = votes.get(sid, 0.0) + w
        return {sid: v / total for sid, v in votes.items()} if total > 0 else {}


def bonuses(support: dict[str, float], statement_ids: Sequence[str | None], weight: float,
            floor: float) -> list[float]:
    """Each line's bonus (<= 0): ``weight * (log(floor + support) - the best line's)``; 0 for a None id
    (a line that is not a Find line) and for every line when ``weight`` is 0."""
    if weight < 0 or floor <= 0:
        raise ValueError(f"weight must be >= 0 and floor > 0, got {weight!r} and {floor!r}")
    if weight == 0:
        return [0.0] * len(statement_ids)
    logs = {sid: math.log(floor + support.get(sid, 0.0)) for sid in statement_ids if sid is not None}
    if not logs:
        return [0.0] * len(statement_ids)
    top = max(logs.values())
    return [0.0 if sid is None else weight * (logs[sid] - top) for sid in statement_ids]


def unseen_steps(steps, bank) -> str:
    """The Find steps (1-based, comma-separated) whose statement no training question gave."""
    return ", ".join(str(i) for i, s in enumerate(steps, 1)
                     if s.kind == "find" and not bank.get(s.statement).statement.question_ids)


def trained_first(options: list, split: bool) -> tuple[list, list]:
    """``options`` (``(record, ...)``) as those a training question gave and the others; all and none unless
    ``split`` (the grounded planner's ``unseen_top`` >= 0)."""
    if not split:
        return options, []
    return [o for o in options if o[0].statement.question_ids], [o for o in options if not o[0].statement.question_ids]
