"""Recall: each plan step -> the memory statements that may express it (MemQ section 4.3, Eq. 4).

:mod:`memq.recall.rule` holds the recall rules (the paper's adaptive rule and the public MemQ code's),
the text a step is searched with, and the order that breaks ties between statements with one score.
Which of the recalled statements a step keeps is decided above the planner, in
:mod:`memq.reconstruct.ground`.
"""

from __future__ import annotations

from .rule import (
    NON_COMMONS_DATA,
    RULES,
    TIE,
    TIE_ORDER,
    RecallConfig,
    break_tie,
    is_tie,
    preferred,
    query_text,
    recall_step,
    select,
)

__all__ = ["NON_COMMONS_DATA", "RULES", "TIE", "TIE_ORDER", "RecallConfig", "break_tie", "is_tie", "preferred",
           "query_text", "recall_step", "select"]
