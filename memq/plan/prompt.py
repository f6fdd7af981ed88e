"""The planner prompt: MemQ Table 9, filled with a question and its topic entities.

Topic entities are listed one per line by name, exactly as the derived plans
mention them. The paper's text says steps begin with "Find", "Make sure" or
"Rank"; its own examples (Appendix C) and memq's plans write "Sort", and the
parser reads both, so the text is kept as published.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

INSTRUCTIONS = (
    "You are given a problem to solve step by step. Each step should begin with either\n"
    "\"Find\", \"Make sure\" or \"Rank\". Finally, you need to output which one is the final\n"
    "answer.\n"
    "The steps should logically follow from one another, where each step builds on the\n"
    "outcome of the previous steps.\n"
    "Each step should be simple, clear, and directly related to achieving the overall goal.\n"
    "Some topic entities you can use to start the plan are provided below."
)
QUERY = "Question:\n{question}\nTopic Entities:\n{topic_entities}"
TABLE9 = INSTRUCTIONS + "\n" + QUERY


def entity_names(entities: Sequence[str] | Sequence[tuple[str, str]] | Mapping[str, str]) -> list[str]:
    """Names from plain names, ``(mid, name)`` pairs or a ``{mid: name}`` dict, without repeats."""
    if isinstance(entities, Mapping):
        entities = list(entities.values())
    names = [e[1] if isinstance(e, (tuple, list)) else e for e in entities]
    return list(dict.fromkeys(n for n in names if n))


def query_block(question: str, entities: Sequence[str] | Sequence[tuple[str, str]] | Mapping[str, str]) -> str:
    """The ``Question: ... Topic Entities: ...`` part of Table 9."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"question must be a non-empty str, got {question!r}")
    names = entity_names(entities)
    return QUERY.format(question=question.strip(), topic_entities="\n".join(names) if names else "(none)")


def planner_prompt(question: str, entities: Sequence[str] | Sequence[tuple[str, str]] | Mapping[str, str]) -> str:
    """Table 9 with ``question`` and the topic entity names filled in."""
    return INSTRUCTIONS + "\n" + query_block(question, entities)


def prompt_hash() -> str:
    return hashlib.sha256(TABLE9.encode()).hexdigest()[:16]
