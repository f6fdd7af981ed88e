"""Recall: each plan step -> the memory statements that may express it (MemQ section 4.3, Eq. 4).

* :mod:`memq.recall.rule`: the recall rules (the paper's adaptive rule and the public MemQ code's) and the
  text a step is searched with;
* :mod:`memq.recall.ties`: the order that breaks ties between statements with one score.

Which of the recalled statements a step keeps is decided by grounded choice, in
:mod:`memq.reconstruct.ground`.
"""

from __future__ import annotations

from .rule import RULES, TIE, RecallConfig, query_text, recall_step, select
from .ties import NON_COMMONS_DATA, TIE_ORDER, break_tie, is_tie, preferred

__all__ = ["NON_COMMONS_DATA", "RULES", "TIE", "TIE_ORDER", "RecallConfig", "break_tie", "is_tie", "preferred",
           "query_text", "recall_step", "select"]
