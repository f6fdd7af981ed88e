"""The Describer role: statement -> English descriptions.

A describer turns each :class:`~memq.types.Statement` into one or more
descriptions in the paper's form (``?entity2 is the currency used of the
country ?entity1``). Descriptions are what the memory bank embeds and what a
planner step is matched against.

``describe`` is the protocol's one required method. Describers that can
report how each description came about (which describer, which fallback fired)
also implement ``describe_with_info``; :func:`describe_with_info` gives every
describer that richer form.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from memq.errors import MemQError
from memq.types import Statement


@runtime_checkable
class Describer(Protocol):
    """Anything that describes statements in English."""

    name: str

    @property
    def prompt_hash(self) -> str:
        """A hash of everything that shapes the output (prompts, templates, options)."""
        ...

    def describe(self, statements: list[Statement]) -> list[list[str]]:
        """One list of descriptions (at least one) per statement, in order."""
        ...


@dataclass(frozen=True)
class Described:
    """What a describer made of one statement.

    ``describer`` names who wrote the descriptions (``template``,
    ``llm:qwen2.5-coder-0.5b``); ``fallback`` names the fallback that fired
    (``"llm-invalid->template"``) or is ``None``. ``attempts`` counts the LLM
    answers asked for (1: valid at once, 2: valid after the retry; an LLM
    fallback counts every attempt made); 0 when no LLM was asked.
    """

    descriptions: tuple[str, ...]
    describer: str
    fallback: str | None = None
    attempts: int = 0

    def __post_init__(self) -> None:
        if not self.descriptions or not all(isinstance(d, str) and d.strip() for d in self.descriptions):
            raise MemQError(f"a statement needs at least one non-empty description, got {self.descriptions!r}")


def config_hash(config: object) -> str:
    """sha256 (16 hex) of a JSON-able configuration, keys sorted."""
    text = json.dumps(config, sort_keys=True, ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def describe_with_info(describer: Describer, statements: list[Statement]) -> list[Described]:
    """``describer.describe_with_info`` when it has one, else ``describe`` wrapped."""
    rich = getattr(describer, "describe_with_info", None)
    if callable(rich):
        out = list(rich(statements))
    else:
        out = [Described(tuple(d), describer.name) for d in describer.describe(statements)]
    if len(out) != len(statements):
        raise MemQError(f"describer {describer.name!r} returned {len(out)} results for {len(statements)} statements")
    return out


def shared_descriptions(firsts: Iterable[str]) -> int:
    """How many statements share their first description (``firsts``, one per statement) with another.

    A relation and its reverse property read the same way (``?entity2 is the
    campaigns of the election ?entity1`` for ``government.election.campaigns``
    forwards and ``government.election_campaign.election`` backwards). The
    texts are kept as they are: recall returns every statement tied with the
    top-1, and grounded choice keeps those that bind in the KG. (An earlier
    build suffixed later duplicates with ``(via relation)``, which made recall
    pick one of two equivalent statements by id, often the one a KG lacks.)
    """
    counts = Counter(first.strip().lower() for first in firsts)
    return sum(n for n in counts.values() if n > 1)
