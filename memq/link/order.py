"""The order the planner's prompt lists the linked entities in: an entity training questions list after another
goes after the others.

WebQSP lists a question's topic entity before the constraint entities its query compares with, and CWQ lists the
entity of the WebQSP question it was made from before the constants it added ("What year did the Dodgers beat the
Chicago White Sox in the World Series?": the Los Angeles Dodgers, then the Chicago White Sox). The planner was
trained on prompts in that order and starts its plan from the first entity; the linker lists its entities by score,
best first, and on CWQ dev (carved from train) its first is the gold first in 183 of the 363 questions where two
gold entities or more were linked.

Some entities are mostly a constant added to a question: a time zone, a currency, *New York City* as a film's
location. :class:`ListedFirst` counts, over the training questions of the memory's gold sources (the train side of
:func:`memq.plan.data.split_of`) that list two entities or more, how often each entity is listed first (``first``)
and listed at all (``listed``), and moves an entity whose smoothed share

    share(e) = (first(e) + prior / 2) / (listed(e) + prior)

is below one half behind those whose share is not (lower shares further back); otherwise the linker's order stands.
Chosen on CWQ dev (carved from train) and held-out WebQSP dev, over the questions where the gold first entity and
another entity were linked: it comes first in 642 of 793 CWQ questions (502 by score; 626 ordering by the share
alone, which lifts an entity too, 638 at best with the KG popularity added) and in 33 of 38 WebQSP questions, as by
score (28-30 with the share alone: WebQSP's training questions seldom list the linker's other entities at all).
Only the datasets whose annotation lists the question's own entity first (:data:`ORDERED`) count; GrailQA's lists
the nodes of its query graph.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

__all__ = ["ORDERED", "ListedFirst"]

# the gold sources whose questions list the entity a question is about first (memq.memory.build.GOLD_SOURCES)
ORDERED = ("webqsp-train", "cwq-train")


class ListedFirst:
    """How often each entity is listed first among the topic entities of a training question that lists two or
    more, and the order of linked entities that follows from it."""

    def __init__(self, first: Counter, listed: Counter, *, prior: float = 1.0) -> None:
        if prior <= 0:
            raise ValueError(f"prior must be > 0, got {prior!r}")
        self.first, self.listed, self.prior = first, listed, prior

    @classmethod
    def from_questions(cls, questions: Iterable, **kwargs) -> ListedFirst:
        """Counted on ``questions`` (:class:`~memq.datasets.GoldQuestion`): the train side of
        :func:`~memq.plan.data.split_of`, not those CWQ made from WebQSP test questions, each with its first
        parse's topic entities in the annotation's order."""
        from memq.plan.data import WEBQSP_TEST_PREFIX, split_of

        first: Counter = Counter()
        listed: Counter = Counter()
        for q in questions:
            if not q.parses or q.id.startswith(WEBQSP_TEST_PREFIX) or split_of(q.id) != "train":
                continue
            ids = list(dict.fromkeys(m for m, _ in q.parses[0].topic_entities))
            if len(ids) > 1:
                first[ids[0]] += 1
                listed.update(ids)
        return cls(first, listed, **kwargs)

    @classmethod
    def from_bank(cls, bank, **kwargs) -> ListedFirst | None:
        """Counted on the training questions of ``bank``'s gold sources that list their own entity first
        (:data:`ORDERED`); None when it has none (GrailQA, a schema-only bank)."""
        from memq.memory.build import gold_questions

        sources = sorted(set().union(*bank.sources) & set(ORDERED))
        if not sources:
            return None
        return cls.from_questions([q for source in sources for q in gold_questions(source)], **kwargs)

    def share(self, mid: str) -> float:
        """The smoothed share of the training questions listing ``mid`` that list it first (1/2 for one never
        listed)."""
        return (self.first[mid] + self.prior / 2) / (self.listed[mid] + self.prior)

    def order(self, entities: dict[str, str]) -> dict[str, str]:
        """``entities`` (id -> name, best first) with those whose share is below 1/2 behind the others, lower
        shares further back; the others, and ties, keep their order."""
        ranked = sorted(enumerate(entities), key=lambda p: (-min(self.share(p[1]), 0.5), p[0]))
        return {mid: entities[mid] for _, mid in ranked}

    def why(self, mid: str) -> str:
        return f"first in {self.first[mid]} of {self.listed[mid]}"
