"""Which way a GrailQA question compares: the comparison checks its words allow.

"which building has less than 9 floors?" compares downwards (``<``, ``<=``), "at least 40" upwards (``>``,
``>=``); "no less than 5.0" upwards again. Of the 41 GrailQA train plans that compare a number or date, 40 say so
with a word of :data:`memq.plan.lines.COMPARES`; in 39 of them the words point one way and the plan compares that
way (a "no" or "not" before a word turns it round: "no less than 50 schools" is ``>=``), one points the other way
("which film producer is heavier than 54.5?" compares with ``<``), one has words both ways. Which of the two checks
of a way (``<`` or ``<=``) GrailQA's annotation takes does not follow the words ("shorter than 34.0" is ``<=``), so
the model still chooses between them.
"""

from __future__ import annotations

import re

__all__ = ["COMPARE", "compare_ops"]

DOWN = (r"less|fewer|smaller|lower|under|below|before|earlier|sooner|shorter|younger|lighter|at most|up to|until"
        r"|prior to")
UP = r"more|greater|larger|bigger|higher|over|above|after|later|longer|older|heavier|at least|exceed\w*|since|beyond"
_WORD = re.compile(rf"\b(?:(no|not)\s+)?(?:({DOWN})|({UP}))\b", re.I)
COMPARE = ("<", "<=", ">", ">=")


def compare_ops(question: str) -> tuple[str, ...]:
    """The comparisons ``question``'s words allow: ``<`` and ``<=`` when they all point down, ``>`` and ``>=`` when
    they all point up (a "no" or "not" before one turns it round), else all four."""
    ways = set()
    for match in _WORD.finditer(question):
        down = match.group(2) is not None
        ways.add(down != (match.group(1) is not None))
    if ways == {True}:
        return ("<", "<=")
    if ways == {False}:
        return (">", ">=")
    return COMPARE
