"""Checks on an LLM's description before it enters the memory.

A valid description of a structure 1/2 statement is ONE sentence that starts
with ``?entity2 is`` and mentions ``?entity1``; of a structure 3 statement it
starts with ``?entity3 is`` and mentions ``?entity1`` and ``?entity2``. It
mentions no other variable (no ``?cvt``), no raw relation id (``ns:...``) and is
between 4 and 60 words long.

:func:`clean` first strips what small models add around an answer: an
``Answer:`` prefix, quotes, backticks, a trailing period, further lines.
"""

from __future__ import annotations

import re

_VAR = re.compile(r"\?[A-Za-z_][A-Za-z0-9_]*")
_SENTENCE_BREAK = re.compile(r"[.!?;]\s+[A-Z?]")
_PREFIX = re.compile(r"^\s*(?:answer\s*:\s*)+", re.IGNORECASE)
MIN_WORDS, MAX_WORDS = 4, 60


def required_vars(structure: str) -> tuple[str, tuple[str, ...]]:
    """``(target, mentioned)``: the variable the sentence is about and the ones it must mention."""
    if structure == "3":
        return "?entity3", ("?entity1", "?entity2")
    if structure in ("1", "2"):
        return "?entity2", ("?entity1",)
    raise ValueError(f"no description rule for structure {structure!r}; expected 1, 2 or 3")


def clean(text: str) -> str:
    """The first non-empty line, without ``Answer:``, quotes, backticks or trailing period."""
    lines = [ln.strip() for ln in (text or "").strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    line = _PREFIX.sub("", lines[0]).strip().strip("`\"'").strip()
    line = re.sub(r"\s+", " ", line)
    return line.rstrip(" .")


def problem(text: str, structure: str) -> str | None:
    """Why ``text`` (already cleaned) is not a valid description, or None when it is."""
    target, needed = required_vars(structure)
    if not text:
        return "empty"
    if "\n" in text:
        return "more than one line"
    if not text.lower().startswith(f"{target} is "):
        return f"does not start with '{target} is'"
    found = set(_VAR.findall(text))
    missing = [v for v in needed if v not in found]
    if missing:
        return f"does not mention {', '.join(missing)}"
    extra = sorted(found - {target, *needed})
    if extra:
        return f"mentions other variables {', '.join(extra)}"
    if "ns:" in text or re.search(r"\b[a-z_]+\.[a-z_]+\.[a-z_]+\b", text):
        return "contains a relation id"
    if _SENTENCE_BREAK.search(text):
        return "more than one sentence"
    words = len(text.split())
    if words < MIN_WORDS or words > MAX_WORDS:
        return f"{words} words (expected {MIN_WORDS}-{MAX_WORDS})"
    return None
