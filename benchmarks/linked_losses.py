"""Where a linked run loses F1 against the gold topic entities: each question of a ``memq evaluate --entities
linked`` run whose F1 differs from its gold-entity F1, classed by what the linker gave the planner.

    .venv/bin/python benchmarks/linked_losses.py RUN.jsonl[.gz] [MORE.jsonl ...] [--list] [--json OUT.json]

The classes, checked in this order (linked: the linked entities, second readings included, and the suggested
constraint entities; gold: the question's gold topic entities, as the run's ``linking`` block records them):

* ``missed``: a gold entity the question names is not linked (missed, or another entity read for its span);
* ``constraint``: every named gold entity is linked, but a gold constraint entity is neither linked nor suggested;
* ``extra``: every gold entity is given, and other entities too;
* ``same``: the same entities as gold, and another plan.

Each class gets its questions, the F1 it loses over all the run's questions (gold-entity F1 less linked F1, summed,
over the number of questions) and how many went down and up. Several files are read as one run (the shards of
``memq evaluate --shard``; a later record of a question wins).
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

CLASSES = {
    "missed": "a named gold entity missed or misread",
    "constraint": "a constraint entity neither linked nor suggested",
    "extra": "every gold entity given, and others too",
    "same": "the same entities, another plan",
}


def records(paths: list[str]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for path in paths:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as fh:
            out.update((r["id"], r) for r in map(json.loads, filter(str.strip, fh)))
    return out


def loss_class(linking: dict) -> str:
    """The class of a question's linked input against its gold entities (:data:`CLASSES`)."""
    given = {x["id"] for x in linking.get("linked") or []} | {x["id"] for x in linking.get("suggested") or []}
    named, every = set(linking.get("gold_named") or ()), set(linking.get("gold_all") or ())
    if named - given:
        return "missed"
    if every - given:
        return "constraint"
    return "extra" if given - every else "same"


def classify(recs: dict[str, dict]) -> dict:
    """The summary: questions, F1 both ways, and each class's questions, F1 lost over all, down and up."""
    scored = [r for r in recs.values() if r.get("linking") and r.get("gold_entities")]
    if not scored:
        raise SystemExit("no record of a linked run (with 'linking' and 'gold_entities') in the files")
    n = len(scored)
    rows = {k: {"what": what, "questions": 0, "f1_lost": 0.0, "down": 0, "up": 0, "ids": []}
            for k, what in CLASSES.items()}
    for r in scored:
        linked, gold = r.get("f1") or 0.0, r["gold_entities"].get("f1") or 0.0
        if abs(linked - gold) < 1e-9:
            continue
        row = rows[loss_class(r["linking"])]
        row["questions"] += 1
        row["f1_lost"] += gold - linked
        row["down" if linked < gold else "up"] += 1
        row["ids"].append(r["id"])
    for row in rows.values():
        row["f1_lost"] = round(row["f1_lost"] / n, 4)
    f1 = sum(r.get("f1") or 0.0 for r in scored) / n
    f1_gold = sum(r["gold_entities"].get("f1") or 0.0 for r in scored) / n
    return {"questions": n, "f1": round(f1, 4), "f1_gold_entities": round(f1_gold, 4), "gap": round(f1_gold - f1, 4),
            "differ": sum(row["questions"] for row in rows.values()), "classes": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="per-question files of one `memq evaluate --entities linked` run")
    ap.add_argument("--list", action="store_true", help="print each class's questions")
    ap.add_argument("--json", help="write the summary here")
    args = ap.parse_args()
    recs = records(args.runs)
    out = classify(recs)
    print(f"{out['questions']} questions: F1 {out['f1']:.4f} linked, {out['f1_gold_entities']:.4f} gold entities, "
          f"gap {out['gap']:.4f}; {out['differ']} differ")
    print("| the linked entities | questions | F1 lost over all | down / up |\n|---|---|---|---|")
    for row in out["classes"].values():
        print(f"| {row['what']} | {row['questions']} | {row['f1_lost']:.4f} | {row['down']} / {row['up']} |")
    if args.list:
        for key, row in out["classes"].items():
            print(f"\n{key}:")
            for qid in row["ids"]:
                r = recs[qid]
                print(f"  {qid} {r['gold_entities'].get('f1') or 0:.2f} -> {r.get('f1') or 0:.2f}  {r.get('question')}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
