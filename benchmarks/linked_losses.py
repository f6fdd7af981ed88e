"""Where a linked run loses F1 against the gold topic entities: each question of a ``memq evaluate --entities
linked`` run whose F1 differs from its gold-entity F1, classed by what the linker gave the planner.

    .venv/bin/python benchmarks/linked_losses.py RUN.jsonl[.gz] [MORE.jsonl ...] [--list] [--json OUT.json]

The classes are :data:`memq.link.evaluate.LOSS_CLASSES` (a named gold entity missed or misread; a constraint entity
neither linked nor suggested; every gold entity given, and others too; the same entities, another plan), as the
``losses`` block of the run's summary gives them (:func:`memq.link.evaluate.summarise_losses`). Each class gets its
questions, the F1 it loses over all the run's questions (gold-entity F1 less linked F1, summed, over the number of
questions) and how many went down and up; ``--list`` prints them. Several files are read as one run (the shards of
``memq evaluate --shard``; a later record of a question wins), and runs from before the summary had the block
too.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def records(paths: list[str]) -> dict[str, dict]:
    """The records of several per-question files as one run, by question id (a later one wins)."""
    from memq.evaluate.saved import load_records

    out: dict[str, dict] = {}
    for path in paths:
        out.update(load_records(path))
    return out


def classify(recs: dict[str, dict]) -> dict:
    """The summary: questions, F1 both ways, and :func:`memq.link.evaluate.summarise_losses` with the ids."""
    from memq.link.evaluate import summarise_losses

    scored = [r for r in recs.values() if r.get("linking") and r.get("gold_entities")]
    if not scored:
        raise SystemExit("no record of a linked run (with 'linking' and 'gold_entities') in the files")
    n = len(scored)
    return {"questions": n, "f1": round(sum(r.get("f1") or 0.0 for r in scored) / n, 4),
            "f1_gold_entities": round(sum(r["gold_entities"].get("f1") or 0.0 for r in scored) / n, 4),
            **summarise_losses(scored, ids=True)}


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
