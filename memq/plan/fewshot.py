"""FewShotPlanner: no training; the k most similar training questions and their plans as examples.

Similar questions are found with an embedder (MiniLM by default, cosine on
normalised vectors) over the derived training plans of a dataset's *train*
split (never dev or test). The prompt is Table 9's instructions, the
examples (least similar first, so the closest sits next to the question),
then the question and its topic entities, ending in ``Plan:``. Works with
any :class:`memq.llm.LLM` (a LocalLLM or an OpenAIChat endpoint).

By default the prompt is continued as plain text (``chat=False``): on 6 WebQSP
dev questions Qwen2.5-Coder-0.5B-Instruct wrote the final ``Finally the
answer is`` line 6/6 times this way and 1/6 times inside its chat template
(exact plan match 2/6 vs 0/6). Pass ``chat=True`` for chat-only endpoints.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from memq.errors import MemQError

from .base import BatchPlanner, Entities
from .derive import DerivedPlan
from .prompt import INSTRUCTIONS, query_block

logger = logging.getLogger(__name__)

STOP = ["\n\nQuestion:", "\nQuestion:"]


class FewShotPlanner(BatchPlanner):
    """In-context planning with retrieved examples. ``examples`` default to ``dataset``'s train plans."""

    def __init__(self, llm, examples: Sequence[DerivedPlan] | None = None, *, dataset: str = "webqsp",
                 k: int = 4, embedder=None, max_new_tokens: int = 160, chat: bool = False) -> None:
        if k < 0:
            raise MemQError(f"k must be >= 0, got {k}")
        self._llm = llm
        self._examples = list(examples) if examples is not None else None
        self.dataset = dataset
        self.k = k
        self._embedder = embedder
        self._matrix: np.ndarray | None = None
        self.max_new_tokens = max_new_tokens
        self.chat = chat
        self.name = f"fewshot:{getattr(llm, 'name', type(llm).__name__)}:k={k}"

    @property
    def llm(self):
        return self._llm

    @property
    def examples(self) -> list[DerivedPlan]:
        if self._examples is None:
            from .data import load_split

            self._examples = load_split(self.dataset, "train")
        return self._examples

    @property
    def embedder(self):
        if self._embedder is None:
            from memq.memory.embed import MiniLMEmbedder

            self._embedder = MiniLMEmbedder()
        return self._embedder

    def _index(self) -> np.ndarray:
        if self._matrix is None:
            if not self.examples:
                raise MemQError("few-shot planner has no examples")
            self._matrix = np.asarray(self.embedder.encode([e.question for e in self.examples]), dtype=np.float32)
        return self._matrix

    def warm_up(self) -> None:
        """Embed the example questions and load the embedder (``memq serve`` calls it before the first question)."""
        self.nearest("warm-up")

    def nearest(self, question: str) -> list[DerivedPlan]:
        """The k most similar example questions, most similar first (an identical question is skipped)."""
        if self.k == 0:
            return []
        sims = self._index() @ np.asarray(self.embedder.encode([question]), dtype=np.float32)[0]
        order = np.argsort(-sims, kind="stable")
        key = question.strip().lower()
        out = []
        for i in order:
            if self.examples[i].question.strip().lower() == key:
                continue
            out.append(self.examples[i])
            if len(out) == self.k:
                break
        return out

    def prompt(self, question: str, entities: Entities) -> str:
        shots = self.nearest(question)[::-1]
        parts = [INSTRUCTIONS, ""]
        if shots:
            parts.append("Here are some examples.\n")
        for ex in shots:
            parts += [query_block(ex.question, ex.entities), "Plan:", ex.text, ""]
        parts += [query_block(question, entities), "Plan:"]
        return "\n".join(parts)

    def generate(self, prompts: list[str]) -> list[str]:
        return self.llm.generate(prompts, max_new_tokens=self.max_new_tokens, stop=STOP, chat=self.chat)
