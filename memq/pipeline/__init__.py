"""The answering pipeline: one question, from :meth:`Pipeline.answer` to the KG and back.

:meth:`Pipeline.answer` (:mod:`memq.pipeline.pipeline`; its settings: :mod:`memq.pipeline.config`) reads top to
bottom, one stage a module:

1. validate the question and topic entities (:func:`validate`; linked when none are given, :mod:`memq.link`);
2. plan: question -> steps (:mod:`memq.plan`), unless a plan is given;
3. step choice and grounding: recall each step's statements and keep those that bind in the KG
   (:mod:`memq.reconstruct.ground`, on :mod:`memq.recall`);
4. answer assembly: the chosen statements -> one query (:mod:`memq.reconstruct.assemble`), executed on the KG;
5. self-repair when it finds nothing (:mod:`memq.reconstruct.repair`), then, for the hybrid planner, the grounded
   planner's plans (:mod:`memq.plan.hybrid`);
6. the answer terms named and ordered (:func:`memq.reconstruct.assemble.named_answers`).

Every fallback that fires is appended to ``Answer.trace.fallbacks`` and every self-repair attempt to
``Answer.trace.attempts``; nothing happens silently.
"""

from ..files import ROOT, shown_path
from ..kg import open_kg
from ..link.resolve import check_question, validate
from .config import (
    BANK_ALONE,
    BENCHMARK_KG,
    FREE_PLANNERS,
    GRAILQA_KG,
    GROUNDED_BY_DEFAULT,
    HYBRID_BY_DEFAULT,
    PLANNERS,
    Config,
)
from .pipeline import Pipeline

__all__ = ["BANK_ALONE", "BENCHMARK_KG", "FREE_PLANNERS", "GRAILQA_KG", "GROUNDED_BY_DEFAULT", "HYBRID_BY_DEFAULT",
           "PLANNERS", "ROOT", "Config", "Pipeline", "check_question", "open_kg", "shown_path", "validate"]
