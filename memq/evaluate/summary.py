"""The summary of an evaluation run: answer metrics, planning time and cost, fallbacks, and GrailQA's breakdown
by level and function. :func:`memq.evaluate.run.run` writes it beside the per-question records."""

from __future__ import annotations

import os
import statistics
import sys
from collections import Counter

from .metrics import mean, p95

SOURCE_NOTE = ("answers: benchmark KG synthesised from gold annotations (not comparable to full Freebase); "
               "EHR/GED: against the gold queries")


def fallback_kind(text: str) -> str:
    """``"step 2: recall below-gamma2"`` -> ``"recall below-gamma2"`` (for counting)."""
    if text.startswith("step ") and ":" in text:
        text = text.split(":", 1)[1]
    return " ".join(text.strip().split()[:3]).rstrip(":;,")


def device_note() -> str:
    """Where the run computed: the CPU's cores, and a CUDA device if torch (already loaded) used one."""
    note = f"CPU, {os.cpu_count()} cores"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return f"{note}; GPU {torch.cuda.get_device_name(0)}"
    return note + "; no GPU"


def summarise(records: list[dict], *, dataset: str, split: str, planner: str, kg: str) -> dict:
    scored = [r for r in records if r.get("f1") is not None]
    latencies = sorted(r["latency_s"] for r in records)
    return {
        "dataset": dataset,
        "split": split,
        "planner": planner,
        "kg": kg,
        "source": SOURCE_NOTE,
        "questions": len(records),
        "answered_questions": len(scored),
        # a split without gold answers (CWQ dev) has no answer metrics, not a zero
        "hits@1": round(mean(r["hits@1"] for r in scored), 4) if scored else None,
        "f1": round(mean(r["f1"] for r in scored), 4) if scored else None,
        "ehr": round(mean(r["ehr"] for r in records), 4),
        "ged": round(mean(r["ged"] for r in records), 4),
        "p50_s": round(statistics.median(latencies), 4) if latencies else 0.0,
        "p95_s": round(p95(latencies), 4),
        "llm_calls_per_question": round(mean(r.get("llm_calls", 0) for r in records), 3),
        **planning_cost(records),
        "errors": dict(Counter(r["error"] for r in records if r["error"])),
        "fallbacks": dict(Counter(fallback_kind(f) for r in records for f in r.get("fallbacks", []))),
    }


FUNCTIONS = {"none": "none", "count": "count", "argmax": "superlative", "argmin": "superlative",
             "<": "comparative", "<=": "comparative", ">": "comparative", ">=": "comparative"}
"""GrailQA's ``function`` field, grouped as its paper reports it."""


def breakdown(records: list[dict], questions: list) -> dict:
    """``by_level`` and ``by_function``: questions, F1, Hits@1, EHR and GED of each GrailQA level (i.i.d.,
    compositional, zero-shot) and function group (none, count, comparative, superlative)."""
    groups: dict[str, dict[str, list[dict]]] = {"by_level": {}, "by_function": {}}
    by_id = {q.id: q for q in questions}
    for r in records:
        q = by_id[r["id"]]
        if q.level:
            groups["by_level"].setdefault(q.level, []).append(r)
        if q.function:
            groups["by_function"].setdefault(FUNCTIONS.get(q.function, q.function), []).append(r)
    out: dict = {}
    for name, by in groups.items():
        if by:
            out[name] = {k: {"questions": len(rs),
                             "f1": round(mean(r["f1"] or 0.0 for r in rs), 4),
                             "hits@1": round(mean(r["hits@1"] or 0.0 for r in rs), 4),
                             "ehr": round(mean(r["ehr"] for r in rs), 4),
                             "ged": round(mean(r["ged"] for r in rs), 4)} for k, rs in sorted(by.items())}
    return out


def planning_cost(records: list[dict]) -> dict:
    """Planning time (p50, p95, mean of ``plan_s``) and, for a grounded planner, the mean cost per question:
    forward passes, tokens scored, candidate lines offered, KG queries; {} when nothing was planned."""
    def rescue(r: dict) -> dict:
        return r.get("rescue") or {}

    times = sorted(r["plan_s"] + (rescue(r).get("plan_s") or 0.0) for r in records if r.get("plan_s") is not None)
    if not times:
        return {}
    out = {"plan_p50_s": round(statistics.median(times), 4),
           "plan_p95_s": round(p95(times), 4),
           "plan_mean_s": round(mean(times), 4)}
    costs = [r["plan_cost"] for r in records if r.get("plan_cost")]
    if costs:
        out["planning_cost_per_question"] = mean_costs(costs)
        out["planning_cost_per_question"]["free_generation_fallbacks"] = sum(
            1 for c in costs if c.get("free_generation"))
    rescued = [r for r in records if r.get("rescue")]
    if rescued:  # the hybrid planner: what its grounded rescues cost, per rescue, and how many answered
        per_rescue = mean_costs([rescue(r).get("plan_cost") or {} for r in rescued])
        out["rescues"] = {"planned": len(rescued),
                          "answered": sum(1 for r in rescued if r.get("answers")),  # the free plan found none
                          **{f"{k}_per_rescue": v for k, v in per_rescue.items()},
                          "plan_p50_s": round(statistics.median(rescue(r).get("plan_s") or 0.0 for r in rescued), 4)}
    return out


def mean_costs(costs: list[dict]) -> dict:
    """The mean of each grounded-search cost (forward passes, tokens scored, candidate lines, KG queries, pairs the
    statement ranker scored and its seconds)."""
    return {k: round(mean(c.get(k, 0) for c in costs), 2 if k != "ranker_seconds" else 4)
            for k in ("forward_passes", "tokens_scored", "candidates", "kg_queries", "ranked_pairs", "ranker_seconds")}


ABLATION_KEYS = ("questions", "answered_questions", "hits@1", "f1", "ehr", "ged", "p50_s", "p95_s",
                 "llm_calls_per_question", "errors")


def summarise_ablation(records: list[dict], name: str, model=None) -> dict:
    """The ``ablation`` block of a summary: the main metrics over the records' ``ablation`` fields."""
    sub = [r["ablation"] for r in records if r.get("ablation")]
    full = summarise(sub, dataset="", split="", planner=name, kg="")
    block = {"name": name, **{k: full[k] for k in ABLATION_KEYS}}
    if model is not None and getattr(model, "adapter", None):
        block["adapter"] = str(model.adapter)
    block["latency_note"] = "generation batched; per-question latency = its share of the batch + execution"
    return block
