"""What a per-question record keeps of a plan, and how ``memq evaluate --plans`` reads it back.

A record keeps the planner's raw text (``plan_raw``), a grounded planner's beam with its own steps
(``plan_beam``), the planner's cost and time; a hybrid planner's record keeps its grounded rescue as a record
of its own (``rescue``). :func:`saved_plan` turns a record back into the plan the run made, so re-scoring needs no
model call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import MemQError, PlanParseError
from ..plan.base import RESCUED
from ..types import BeamPlan, Plan, PlanStep

__all__ = ["hybrid_records", "load_records", "plan_of", "plan_record", "rescue_record", "saved_plan"]


def plan_record(plan: Plan) -> dict:
    """What a record keeps of a plan so that ``--plans`` re-scores it (:func:`saved_plan` reads it back): the raw
    text, a grounded planner's beam (so the execution-guided choice runs again), its cost and own time."""
    out: dict = {"plan_raw": plan.raw}
    if plan.beam:
        out["plan_beam"] = [[b.text, b.score] + ([[st.to_json() for st in b.steps]] if b.steps else [])
                            for b in plan.beam]
    if plan.cost:
        out["plan_cost"] = dict(plan.cost)
        if "seconds" in plan.cost and "plan_from" not in plan.cost:  # this question's own time
            out["plan_s"] = round(plan.cost["seconds"], 4)
    return out


def plan_of(record: dict) -> tuple:
    """What :func:`saved_plan` reads of a record's plan (its text, beam and rescue), to tell two records' plans
    apart."""
    rescue = record.get("rescue")
    return (record.get("plan_raw") or "\n".join(record.get("plan") or []), json.dumps(record.get("plan_beam")),
            plan_of(rescue) if isinstance(rescue, dict) else None)


@contextmanager
def record_log(path: Path | None, total: int, desc: str, progress: bool) -> Iterator[Callable[..., None]]:
    """Where a run's per-question records go as they are made: appended to ``path`` (JSONL, flushed one by one,
    so a stopped run resumes from it with :func:`load_records`) when given, with a tqdm bar of ``total`` when
    ``progress``. Yields ``write(record=None)``: writes the record, if one is given, and advances the bar."""
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=total, desc=desc, unit="q")
    out = open(path, "a", encoding="utf-8") if path else None

    def write(record: dict | None = None) -> None:
        if record is not None and out:
            out.write(json.dumps(record) + "\n")
            out.flush()
        if bar is not None:
            bar.update(1)

    try:
        yield write
    finally:
        if out:
            out.close()
        if bar is not None:
            bar.close()


def load_records(path: str | Path) -> dict[str, dict]:
    """The records of a per-question file (``.jsonl`` or ``.jsonl.gz``), by question id (a later line wins)."""
    import gzip

    done: dict[str, dict] = {}
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if line:
                rec = json.loads(line)
                done[rec["id"]] = rec
    return done


def saved_plan(record: dict, entities: dict[str, str]) -> tuple[Plan | MemQError, float]:
    """The plan an earlier run's planner wrote for a question, as ``(Plan or error, planning seconds)``.

    The raw model text is parsed again (``plan_raw``; files from before it was recorded give their step
    lines), so re-scoring with another memory or recall setting sees what the planner produced. A grounded
    planner's beam keeps its own steps (with the statements it chose), and those are used as they are; the
    plan is the beam's first (``plan_raw`` is the one the execution-guided choice kept), so the choice runs again.
    A hybrid planner's record keeps the free plan as ``plan_raw`` and the grounded rescue, if one was planned,
    as a record of its own under ``rescue`` (read back into ``Plan.rescue``).
    """
    from ..plan.format import parse_plan
    from ..plan.prompt import entity_names

    # batched runs record ``plan_s`` (the question's share of its batch); older runs timed planning in the trace
    seconds = float(record.get("plan_s") or (record.get("timings") or {}).get("plan") or 0.0)
    text = record.get("plan_raw") or "\n".join(record.get("plan") or [])
    if not text and not isinstance(record.get("rescue"), dict):  # (with a rescue: no readable free step)
        why = record.get("exception", "no plan recorded")
        return PlanParseError(f"the saved run has no plan for {record['id']}: {why}"), seconds
    try:
        beam = [BeamPlan(str(t), float(sc), tuple(PlanStep.from_json(o) for o in (rest[0] if rest else ())))
                for t, sc, *rest in record.get("plan_beam") or []]
    except (TypeError, ValueError) as exc:
        return PlanParseError(f"the saved beam of {record['id']} cannot be read: {exc}"), seconds
    if beam:  # ``plan_raw`` is the plan the choice kept; the choice starts again from the planner's best
        text = beam[0].text
    try:
        plan = parse_plan(text, entity_names(entities)) if text else Plan(steps=[])
    except MemQError as exc:
        return exc, seconds
    plan.beam = beam
    if beam and beam[0].steps:
        plan.steps = list(beam[0].steps)  # the planner's own steps, with the statements it chose
    # what the planner noted (a fallback to free generation, a generated constant) stays in the trace; a hybrid
    # record's notes after RESCUED are its rescue's, so a record whose rescue is taken out to be planned again
    # does not hand the old rescue's notes to the free plan
    fallbacks = list(record.get("fallbacks") or ())
    cut = fallbacks.index(RESCUED) if RESCUED in fallbacks else len(fallbacks)
    plan.notes = _planner_notes(fallbacks[:cut])
    if record.get("plan_cost"):
        plan.cost = {**record["plan_cost"], "plan_from": "saved"}
    if record.get("rescue"):
        if not isinstance(record["rescue"], dict):
            return PlanParseError(f"the saved rescue of {record['id']} is not a record: {record['rescue']!r:.80}"), \
                seconds
        rescue, _ = saved_plan({"fallbacks": fallbacks[cut + 1:], **record["rescue"], "id": record["id"]}, entities)
        if isinstance(rescue, Exception):
            return rescue, seconds
        plan.rescue = rescue
        plan.notes = [n for n in plan.notes if n not in rescue.notes]
    return plan, seconds


def _planner_notes(fallbacks: list[str]) -> list[str]:
    return [f.removeprefix("planner: ") for f in fallbacks if f.startswith("planner: ")]


def rescue_record(grounded: dict) -> dict:
    """A grounded planner's record of a question, as the ``rescue`` of a hybrid record: the grounded planner is
    deterministic, so its saved plans for a question are the rescue the hybrid planner would plan."""
    keep = ("plan_raw", "plan_beam", "plan_cost", "plan_s")
    return {**{k: grounded[k] for k in keep if k in grounded},
            "fallbacks": [f for f in grounded.get("fallbacks") or () if f.startswith("planner: ")]}


def hybrid_records(records: list[dict]) -> dict[str, dict]:
    """Saved records for a hybrid run, by question id: hybrid records as they are; a free-generation
    (``finetuned``) record gives the free plan, and a grounded record of the same question its ``rescue``."""
    free = {r["id"]: r for r in records if r.get("planner") in ("hybrid", "finetuned")}
    grounded = {r["id"]: r for r in records if r.get("planner") == "grounded"}
    out = {}
    for qid, rec in free.items():
        if not rec.get("rescue") and qid in grounded and grounded[qid].get("plan_raw"):
            rec = {**rec, "rescue": rescue_record(grounded[qid])}
        out[qid] = rec
    return out
