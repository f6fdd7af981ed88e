"""How often the gold plan is the planner's plan, or at least in its beam, for a saved run.

The gold plan is the one derived from the gold query (`memq planner data`), the same template wording the grounded
planner renders its lines in. Plans are compared line by line after naming their variables in order of first
appearance (``?x``, ``?y`` and ``?gender`` are the same plan if used alike), so only the statements, their order and
the checks count.

    .venv/bin/python benchmarks/plan_in_beam.py --dataset webqsp --split dev \\
        benchmarks/results/webqsp_dev_grounded.planned.jsonl.gz benchmarks/results/webqsp_dev_ranked.planned.jsonl.gz

Prints one JSON object per file: questions, gold plan first, gold plan in the beam, and the questions the
first file's beam holds the gold plan and the other's does not (and back). With ``--f1``, each file's object also
has ``f1_by_column``: the questions whose gold plan is first, in the beam but not first, not in the beam, or missing
(no gold plan derived), with their mean F1 and what they lose to F1 1.0 over all of the file's questions; those
without it in the beam again by where the first plan leaves it (its first Find line, a later one, or the checks).
"""

from __future__ import annotations

import argparse
import ast
import gzip
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

VAR = re.compile(r"\?[A-Za-z_][A-Za-z0-9_]*")


def canonical(plan: str) -> str:
    names: dict[str, str] = {}

    def repl(m: re.Match) -> str:
        return names.setdefault(m.group(0), f"?v{len(names)}")

    return "\n".join(VAR.sub(repl, " ".join(line.split())) for line in plan.strip().splitlines() if line.strip())


def beam_texts(record: dict) -> list[str]:
    beam = record.get("plan_beam")
    if isinstance(beam, str):
        beam = ast.literal_eval(beam)
    texts = [b[0] if isinstance(b, (list, tuple)) else b.get("text", "") for b in beam or []]
    return texts or [record.get("plan_raw", "")]


def read(path: Path) -> dict[str, dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return {r["id"]: r for r in map(json.loads, fh) if r.get("id")}


def by_column(run: dict, gold: dict, first: set, beam: set) -> dict:
    """The run's questions by where the gold plan stands, each column's count, mean F1 and loss to F1 1.0 over all
    of the run's questions (a question with no gold plan is ``no_gold_plan``). The questions whose beam lacks the gold
    plan are split again by where the first plan leaves it: its first Find line (relation or entity), a later Find
    line, or only its checks and sorts."""
    names = ("first", "in_beam_not_first", "not_in_beam", "no_gold_plan",
             "not_in_beam.first_find", "not_in_beam.later_find", "not_in_beam.checks")
    columns: dict[str, list[float]] = {name: [] for name in names}
    for q, record in run.items():
        f1 = float(record.get("f1") or 0.0)
        column = ("no_gold_plan" if q not in gold else "first" if q in first
                  else "in_beam_not_first" if q in beam else "not_in_beam")
        columns[column].append(f1)
        if column == "not_in_beam":
            columns["not_in_beam." + where_it_leaves(canonical(record.get("plan_raw", "")), gold[q])].append(f1)
    n = max(1, len(run))
    return {name: {"questions": len(f1s), "f1": round(sum(f1s) / len(f1s), 4) if f1s else None,
                   "loss": round(sum(1 - x for x in f1s) / n, 4)} for name, f1s in columns.items()}


def where_it_leaves(plan: str, gold: str) -> str:
    """``first_find``, ``later_find`` or ``checks``: where a plan (canonical) first differs from the gold one, read by
    their Find lines up to the variable each assigns."""
    def finds(text: str) -> list[str]:
        return [line.split(", assign")[0] for line in text.splitlines() if line.startswith("Find")]

    ours, theirs = finds(plan), finds(gold)
    if ours[:1] != theirs[:1]:
        return "first_find"
    return "checks" if ours == theirs else "later_find"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="saved runs (.planned.jsonl.gz or .jsonl.gz)")
    ap.add_argument("--dataset", default="webqsp")
    ap.add_argument("--split", default="dev", choices=("dev", "test"))
    ap.add_argument("--f1", action="store_true", help="also each column's questions, mean F1 and loss")
    args = ap.parse_args(argv)

    from memq.plan.data import derive_split, load_split

    golds = load_split(args.dataset, "dev") if args.split == "dev" else derive_split(args.dataset, "test").plans
    gold = {p.question_id: canonical(p.text) for p in golds}
    runs = [read(p) for p in args.runs]
    common = set(gold).intersection(*[set(r) for r in runs])
    found = []
    for path, run in zip(args.runs, runs, strict=True):
        first = {q for q in common if canonical(run[q].get("plan_raw", "")) == gold[q]}
        beam = {q for q in common if gold[q] in {canonical(t) for t in beam_texts(run[q])}}
        found.append(beam)
        n = max(1, len(common))
        out = {"run": path.name, "questions": len(common), "gold_plan_first": round(len(first) / n, 4),
               "gold_plan_in_beam": round(len(beam) / n, 4)}
        if args.f1:
            out["f1_by_column"] = by_column(run, gold, first, beam)
        print(json.dumps(out))
    if len(found) == 2:
        print(json.dumps({"in_first_beam_only": len(found[0] - found[1]),
                          "in_second_beam_only": len(found[1] - found[0])}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
