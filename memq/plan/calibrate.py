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

from memq.llm.base import shared_prefix

from .lines import Line

__all__ = ["calibrated", "null_logprobs", "statement_tokens"]


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
    pass a statement, counted in ``cost`` (a ``SearchCost``): :func:`null_logprobs`."""
    heads = [statement_tokens(line, lm) for line in lines]
    null = null_logprobs(heads, prefix, lm, cost)
    low = min(null.values())
    return [replace(line, rank=line.rank - weight * (null[head] - low))
            for line, head in zip(lines, heads, strict=True)]


def null_logprobs(heads, prefix: list[int], lm, cost=None) -> dict[tuple[int, ...], float]:
    """Each of the token tuples ``heads`` -> the sum of its tokens' log-probabilities after ``prefix``, one forward
    pass a distinct head (counted in ``cost``). The heads go in sorted order, so that each one shares the most with
    the one before it ("Find the", more where two statements share a relation): the shared tokens stay in the KV cache
    and their log-probabilities are the earlier head's, and the pass evaluates only the rest (and the shared part's
    last token again, for the row after it). llama.cpp gives the same logits for a token whether a pass starts at it
    or before it (in a pass of two tokens or more, which this always is), so the sums are bit for bit those of a
    pass over each whole head after ``prefix`` (``tests/test_llamacpp.py``, ``tests/test_kv_snapshots.py``). GrailQA's
    heads share little ("Find the"): on its first 30 report questions the planner evaluated 161.0 tokens a
    question against 163.5, with the same plans (docs/planner.md)."""
    null: dict[tuple[int, ...], float] = {}
    before: tuple[int, ...] = ()
    chain = np.zeros(0)
    for head in sorted(set(heads)):
        shared = min(shared_prefix(before, head), len(head) - 1)  # a later head in sorted order is never a prefix
        chain = np.concatenate([chain[:shared], lm.expand(prefix + list(head), len(prefix) + shared, ())[0]])
        null[head] = float(np.sum(chain))
        before = head
        if cost is not None:
            cost.passes += 1
            cost.tokens += len(head) - shared
    return null
