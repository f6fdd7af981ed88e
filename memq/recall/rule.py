"""Recall memory statements for plan steps (MemQ section 4.3, Eq. 4).

Two rules:

* ``adaptive`` (the paper's Eq. 4): the top-1 statement when its similarity
  is >= ``gamma1``; otherwise every candidate with similarity >= ``gamma2``.
  Statements tied with the top-1 (same score within ``TIE``: usually the same
  description, e.g. a relation and its reverse property) are all "the top-1";
  grounded choice then keeps those that bind in the KG.
  When not even the top-1 reaches ``gamma2`` the top-1 is kept and the
  fallback ``below-gamma2`` is recorded.
* ``memq-code`` (the public MemQ code, for comparison): the top-1 when it is
  > 0.99, else the top 8 whose word overlap with the step is > 0.9 x the best
  overlap.

A find step is searched in the memory's description space: its mentions are
turned back into the placeholders the descriptions use, so ``Find the
siblings of Justin Bieber, assign it to ?x.`` is searched as ``?entity2 is the
siblings of ?entity1``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..types import PlanStep, Recalled

RULES = ("adaptive", "memq-code")
TIE = 1e-4
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class RecallConfig:
    """``gamma1``/``gamma2`` defaults were tuned on the WebQSP-train dev split (benchmarks/tune_recall.py)."""

    rule: str = "adaptive"
    gamma1: float = 0.90
    gamma2: float = 0.80
    k: int = 8
    # a statement no training query gave (the schema's) ranks this far below its similarity, so that a plan's
    # wording, learnt on the train statements, does not drift to a schema statement worded a little closer
    unseen_penalty: float = 0.0

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ValueError(f"unknown recall rule {self.rule!r}; expected one of {', '.join(RULES)}")
        if not (0.0 <= self.gamma2 <= self.gamma1 <= 1.0):
            raise ValueError(f"need 0 <= gamma2 <= gamma1 <= 1, got gamma1={self.gamma1}, gamma2={self.gamma2}")
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")
        if not 0.0 <= self.unseen_penalty < 1.0:
            raise ValueError(f"unseen_penalty must be in [0, 1), got {self.unseen_penalty}")


def _replace_mention(text: str, mention: str | None, placeholder: str) -> str:
    if not mention:
        return text
    if mention.startswith("?"):
        return re.sub(re.escape(mention) + r"(?![A-Za-z0-9_])", placeholder, text)
    pattern = re.compile(re.escape(mention), re.I)
    return pattern.sub(placeholder, text, count=1)


def query_text(step: PlanStep) -> str:
    """What a step is searched with, in the descriptions' form."""
    if step.kind == "find":
        phrase = step.relation or step.text
        phrase = _replace_mention(phrase, step.source, "?entity1")
        if step.value:
            phrase = _replace_mention(phrase, step.value, "?entity2")
            return f"?entity3 is {phrase}"
        return f"?entity2 is {phrase}"
    if step.kind == "check":
        subject = step.relation or step.target or ""
        subject = _replace_mention(subject, step.target, "?entity1")
        return f"{subject} {step.op or '='} ?value"
    if step.kind == "class" and step.value:
        return f"?entity1 is {'an' if step.value[:1].lower() in 'aeiou' else 'a'} {step.value}"
    return step.text


def select(hits: list[tuple], step_text: str, config: RecallConfig) -> tuple[list[tuple], str | None]:
    """Apply the recall rule to ``hits`` (``(record, description, score)``, best first).

    Returns the kept hits and the fallback that fired (or None).
    """
    if not hits:
        return [], "no-candidates"
    if config.rule == "adaptive":
        if hits[0][2] >= config.gamma1:
            return [h for h in hits if h[2] >= hits[0][2] - TIE], None
        kept = [h for h in hits if h[2] >= config.gamma2]
        if kept:
            return kept, None
        return hits[:1], "below-gamma2"
    # memq-code
    if hits[0][2] > 0.99:
        return [h for h in hits if h[2] >= hits[0][2] - TIE], None
    words = set(_WORD.findall(step_text.lower()))

    def overlap(desc: str) -> float:
        d = set(_WORD.findall(desc.lower()))
        return len(words & d) / max(1, len(words | d))

    top = hits[:8]
    scores = [overlap(h[1]) for h in top]
    best = max(scores)
    return [h for h, s in zip(top, scores, strict=True) if s > 0.9 * best] or top[:1], None


def recall_step(bank, step: PlanStep, index: int, config: RecallConfig,
                structures: tuple[str, ...] = ("1", "2", "3")) -> tuple[list[Recalled], list[Recalled], str | None]:
    """(kept, all candidates of the right structures, fallback) for one step."""
    text = query_text(step)
    raw = bank.search(text, k=config.k * 3)

    def penalty(record) -> float:  # the rule reads the similarity less this; a statement no training query gave
        return 0.0 if record.statement.question_ids else config.unseen_penalty

    # the search gives hits best first and the sort is stable, so without a penalty the order is the search's
    hits = sorted((h for h in raw if h[0].statement.structure in structures),
                  key=lambda h: penalty(h[0]) - h[2])[: config.k]
    kept, fallback = select([(r, d, s - penalty(r)) for r, d, s in hits], text, config)
    as_recalled = [Recalled(index, h[0].statement, h[1], h[2]) for h in hits]
    kept_ids = {h[0].statement.id for h in kept}
    return [r for r in as_recalled if r.statement.id in kept_ids], as_recalled, fallback
