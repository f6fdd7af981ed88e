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
from collections.abc import Sequence
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
    (``"llm-invalid->template"``) or is ``None``.
    """

    descriptions: tuple[str, ...]
    describer: str
    fallback: str | None = None

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


def make_distinct(statements: Sequence[Statement], described: Sequence[Described]) -> list[Described]:
    """Make every statement's FIRST description unique across the memory.

    Two statements can get the same description (a relation and its reverse
    read the same way). Searching that description could then not tell them
    apart, so each later duplicate (statements ordered by id) gets a suffix
    naming its relations: ``... (via people.person.sibling_s)``. The first
    keeps the plain text. Descriptions after the first are left as they are.
    """
    order = sorted(range(len(statements)), key=lambda i: statements[i].id)
    seen: set[str] = set()
    out = list(described)
    for i in order:
        first = out[i].descriptions[0]
        key = first.strip().lower()
        if key in seen:
            rels = ", ".join(dict.fromkeys(statements[i].relations)) or statements[i].structure
            first = f"{first.rstrip('. ')} (via {rels})"
            n = 2
            while first.strip().lower() in seen:
                first = f"{out[i].descriptions[0].rstrip('. ')} (via {rels}, variant {n})"
                n += 1
            out[i] = Described((first,) + tuple(out[i].descriptions[1:]), out[i].describer, out[i].fallback)
        seen.add(first.strip().lower())
    return out
