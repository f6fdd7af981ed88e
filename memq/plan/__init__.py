"""The planning expert (MemQ sections 3.2 and 4.2): question + topic entities -> natural-language steps.

* :mod:`.format`: the plan language (render / tolerant parse of :class:`~memq.types.PlanStep`);
* :mod:`.derive`, :mod:`.data`: target plans derived from gold queries, train/dev split, JSONL;
* :mod:`.prompt`: the Table 9 prompt;
* :mod:`.finetune`: LoRA training; :mod:`.planner`: the Planner protocol and FineTunedPlanner;
* :mod:`.fewshot`: FewShotPlanner (retrieved in-context examples, no training);
* :mod:`.evaluate`: plan-only metrics; :mod:`.cli`: ``memq planner ...``.

Heavy modules (torch, transformers, peft) load only when a planner or training runs.
"""

from __future__ import annotations

from .format import parse_plan, parse_step, render_plan, render_step
from .planner import FineTunedPlanner, Planner, ScriptedPlanner, default_adapter, make_planner

__all__ = ["FewShotPlanner", "FineTunedPlanner", "Planner", "ScriptedPlanner", "default_adapter", "make_planner",
           "parse_plan", "parse_step", "render_plan", "render_step"]


def __getattr__(name: str):
    if name == "FewShotPlanner":  # imports numpy; keep `import memq.plan` light
        from .fewshot import FewShotPlanner

        return FewShotPlanner
    raise AttributeError(name)
