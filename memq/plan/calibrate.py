"""The first step's Find lines calibrated against the question-less prompt (GrailQA's ``calibrate``).

A line's log-probability after the question says both how well it answers the question and how usual its wording
is whatever is asked. :func:`calibrated` takes off ``weight`` times the second, measured after a prompt with "?"
for the question and the same topic entities (a pointwise-mutual-information calibration; the planner's
``null_prefix``), so that the line the question makes likely wins over the line the model likes anyway. Chosen on
GrailQA's tuning part (``benchmarks/first_line_calibration.py``; docs/results.md); WebQSP and CWQ keep 0.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .lines import Line

__all__ = ["calibrated", "statement_tokens"]


def statement_tokens(line: Line, lm) -> tuple[int, ...]:
    """A Find line's tokens up to the ``?`` of its target ("Find the X of the Y Z, assign it to ?"), which the
    lines of one statement share; all of them when the tokenizer does not split the line there."""
    cut = line.text.rfind("?")
    head = list(lm.token_ids(line.text[:cut + 1])) if cut >= 0 else []
    return tuple(head) if head and list(line.ids[:len(head)]) == head else tuple(line.ids)


def calibrated(lines: list[Line], prefix: list[int], lm, weight: float, cost=None) -> list[Line]:
    """The first step's Find lines ``lines`` with ``weight`` times the log-probability of each one's statement
    (its tokens up to the ``?`` of its target) after the question-less prompt ``prefix`` (with the plan so far)
    taken off, measured from the least likely one's so that each bonus stays <= 0 (the line search's bound needs
    it): a line's score then weighs what the question adds to it more than how usual its wording is, and the model
    alone still names the target. Only the first step's: there Find lines compete with each other alone (no plan
    ends before a step), where later a shift of every Find line would weigh against the Finally lines. One forward
    pass a statement (their shared start is kept in the KV cache), counted in ``cost`` (a ``SearchCost``)."""
    heads = [statement_tokens(line, lm) for line in lines]
    null: dict[tuple[int, ...], float] = {}
    for head in heads:
        if head not in null:
            null[head] = float(np.sum(lm.expand(prefix + list(head), len(prefix), ())[0]))
            if cost is not None:
                cost.passes += 1
                cost.tokens += len(head)
    low = min(null.values())
    return [replace(line, rank=line.rank - weight * (null[head] - low)) for line, head in zip(lines, heads, strict=True)]
