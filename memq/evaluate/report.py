"""``memq report``: one self-contained HTML page from evaluation summaries.

A results table (a run's direct-SPARQL ablation gets its own row), the error
breakdown, and two plots drawn from the per-question files: the distribution of
recall similarities, and mean EHR by the number of edges in the gold query (the
first parse that parses, counted as EHR counts them), for memq and any ablation.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections import defaultdict
from functools import cache
from pathlib import Path

COLUMNS = ("dataset", "split", "planner", "memory", "adapter", "questions", "hits@1", "f1", "ehr", "ged", "p50_s",
           "llm_calls_per_question")


def _load(paths) -> list[dict]:
    """Summaries written by ``memq evaluate --json``, each with the records of its per-question file
    (``.jsonl``, or the ``.jsonl.gz`` it was compressed to) when that file is there."""
    from ..errors import MemQError
    from .run import load_records

    out = []
    for p in paths:
        with open(p, encoding="utf-8") as fh:
            summary = json.load(fh)
        if not isinstance(summary, dict) or not {"dataset", "split", "planner", "f1"} <= set(summary):
            raise MemQError(f"{p} is not a summary written by `memq evaluate --json` "
                            "(it lacks dataset/split/planner/f1)")
        summary["_records"] = []
        per = summary.get("per_question")
        for candidate in ([per, per + ".gz"] if per else []):
            if Path(candidate).exists():
                summary["_records"] = list(load_records(candidate).values())
                break
        out.append(summary)
    return out


def _shown(value) -> str:
    """A table cell: ``None`` (no answer metric on a split without gold answers) shows as a dash."""
    return "-" if value is None else str(value)


def _label(s: dict) -> str:
    memory = f" ({s['memory']})" if s.get("memory") else ""
    adapter = f", adapter {s['adapter']}" if s.get("adapter") else ""
    return f"{s['dataset']}/{s['split']}/{s['planner']}{memory}{adapter}"


def _rows(summaries: list[dict]) -> list[dict]:
    """One row per run, then one per ablation answered in that run (same questions)."""
    rows = []
    for s in summaries:
        rows.append(s)
        if s.get("ablation"):
            ab = s["ablation"]
            rows.append({**ab, "dataset": s["dataset"], "split": s["split"], "memory": "",
                         "planner": f"{ab.get('name', 'ablation')} (ablation, same run as the row above)"})
    return rows


@cache
def _gold_sizes(dataset: str, split: str) -> dict[str, int]:
    """Question id -> number of edges in its gold query (the first parse that parses)."""
    from ..errors import MemQError
    from ..sparql import parse_query
    from .metrics import edge_set
    from .run import questions_for

    try:
        questions = questions_for(dataset, split)
    except (MemQError, ValueError, OSError):
        return {}
    sizes = {}
    for q in questions:
        for parse in q.parses:
            try:
                sizes[q.id] = len(edge_set(parse_query(parse.sparql)))
                break
            except MemQError:
                continue
    return sizes


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _plots(summaries: list[dict]) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots = []
    fig, ax = plt.subplots(figsize=(6, 3))
    drawn = False
    for s in summaries:
        scores = [r[2] for rec in s["_records"] for r in rec.get("recalled", [])]
        if scores:
            ax.hist(scores, bins=40, alpha=0.5, label=_label(s))
            drawn = True
    if drawn:
        ax.set_xlabel("similarity of recalled statements")
        ax.set_ylabel("count")
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
        plots.append(("Recall similarity", _png(fig)))
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 3))
    drawn = False
    for s in summaries:
        sizes = _gold_sizes(s["dataset"], s["split"]) if s["_records"] else {}
        series = {_label(s): defaultdict(list)}
        for rec in s["_records"]:
            size = sizes.get(rec.get("id"))
            if not size:
                continue
            series[_label(s)][min(size, 6)].append(rec["ehr"])
            if rec.get("ablation"):
                name = f"{_label(s)}: {s.get('ablation', {}).get('name', 'ablation')}"
                series.setdefault(name, defaultdict(list))[min(size, 6)].append(rec["ablation"]["ehr"])
        for name, by_hops in series.items():
            if by_hops:
                xs = sorted(by_hops)
                ax.plot(xs, [sum(by_hops[x]) / len(by_hops[x]) for x in xs], marker="o", label=name)
                drawn = True
    if drawn:
        ax.set_xlabel("edges in the gold query (6 = 6 or more)")
        ax.set_ylabel("mean EHR")
        ax.set_ylim(0, 1.05)
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
        plots.append(("EHR by gold query size", _png(fig)))
    plt.close(fig)
    return plots


def write_report(paths, out: str | Path) -> Path:
    summaries = _load(paths)
    table = _rows(summaries)
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_shown(s.get(c, '')))}</td>" for c in COLUMNS) + "</tr>" for s in table)
    errors = "".join(
        f"<tr><td>{html.escape(_label(s))}</td>"
        f"<td>{html.escape(json.dumps(s.get('errors', {})))}</td>"
        f"<td>{html.escape(json.dumps(s.get('fallbacks', {})))}</td></tr>" for s in table)
    figures = "".join(f"<h2>{html.escape(t)}</h2><img src='{src}'>" for t, src in _plots(summaries))
    note = html.escape(summaries[0].get("source", "")) if summaries else ""
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>memq results</title>
<style>body{{font-family:sans-serif;margin:2em}}td,th{{border:1px solid #ccc;padding:4px 8px}}
table{{border-collapse:collapse}}</style></head><body>
<h1>memq results</h1><p>{note}</p>
<table><tr>{''.join(f'<th>{c}</th>' for c in COLUMNS)}</tr>{rows}</table>
<h2>Errors and fallbacks</h2><table><tr><th>run</th><th>errors by stage</th><th>fallbacks</th></tr>{errors}</table>
{figures}</body></html>"""
    out = Path(out)
    out.write_text(page, encoding="utf-8")
    return out
