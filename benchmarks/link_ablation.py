"""Each linking rule turned off in turn, on dev splits carved from WebQSP train with other seeds.

    .venv/bin/python benchmarks/link_ablation.py --carves c1,c2,... [--dataset webqsp] --out DIR [--set KEY=VALUE ...]
    .venv/bin/python benchmarks/link_ablation.py --report DIR [--json FILE]

The planner's dev split (memq.plan.data.split_of, its seed) is 321 WebQSP questions, and most linking settings were
chosen on it: its figures flatter them. A carve is another tenth of train, held out of everything the linker learns
from train as ``bench_link.py --split dev`` holds dev out (the mention prior, counted again without it; the memory
without the statements only its questions gave), with split_of's seed replaced by the carve's name. These carves are
for linking alone: the planner was trained on their questions, so no end-to-end figure comes from them.
``--dataset cwq --carves memq-plan-v1`` reads the planner's own CWQ dev split so.

For each carve the defaults and each variant (the rules of :data:`VARIANTS`, or ``--set`` rows) link every held-out
question; one JSON line a question and row goes to ``DIR/CARVE.jsonl`` (a carve already there is skipped: a stopped
run resumes). A variant that changes the spans the mention prior counts (:data:`RECOUNT`) has its prior counted again
with its settings. ``--report`` sums the carves: for each row, precision, recall of the named gold, entities a
question, whether the first link is a named gold entity, and the questions whose named gold found changed against the
defaults (up / down), over the distinct questions of all carves (a question in two carves counts once, its first).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# every rule that acts after the spans are read, turned off (0 or False), and those of the spans (RECOUNT)
VARIANTS = ("title_exact_first=false", "asked_other=0", "spoken=false", "speech_asked=false", "unread_weight=0",
            "generic_weight=0", "commonness_weight=0", "coherence_weight=0", "beside=false", "place_weight=0",
            "state_codes=false", "nested_weight=0", "nested_exact_weight=0", "neighbour_weight=0",
            "regions_apart=false", "regions_beside=false", "of_parts=false", "parts_first=false",
            "alternatives_last=false", "fit_weight=0", "content_edges=false",
            "mentions_apart=false", "spellings=false", "numerals=false", "fuzzy_words=0")
RECOUNT = ("mentions_apart", "spellings", "numerals", "fuzzy_words", "max_tokens", "partial_match", "fuzzy_cutoff",
           "alias_match", "alias_floor", "title_match", "base_match", "demonym_match", "fuzzy_match", "of_parts")


def carve(name: str, dataset: str, variants: list[str], out: Path) -> None:
    """Link the questions of carve ``name`` with the defaults and each variant; one JSON line a question and row."""
    from memq.evaluate.run import questions_for
    from memq.link.evaluate import link_record
    from memq.link.fit import MemoryFit
    from memq.link.linker import Linker
    from memq.link.mentions import MENTION_DATASETS, training_mentions
    from memq.link.resolve import cached_index
    from memq.link.settings import LinkConfig, with_settings
    from memq.memory.bank import MemoryBank
    from memq.pipeline import Config, open_kg
    from memq.plan import data as plan_data
    from memq.plan.data import without_dev

    plan_data.SEED = name  # split_of reads it at each call: the priors, the memory, the questions
    kg_file = Config().kg_file
    index = copy.copy(cached_index(kg_file))
    index.mentions, _ = training_mentions(index, MENTION_DATASETS, hold_out_dev=True)
    bank = without_dev(MemoryBank.load(str(ROOT / "memory_bank" / dataset)), dataset)
    fit = MemoryFit(open_kg(kg_file), bank)
    questions = questions_for(dataset, "dev")
    lines = []
    for label in ["default", *variants]:
        config = LinkConfig() if label == "default" else with_settings(LinkConfig(), label.split())
        linker = Linker(index, config, fit)
        if label != "default" and any(s.split("=")[0] in RECOUNT for s in label.split()):
            linker.index = copy.copy(index)
            linker.index.mentions, _ = training_mentions(index, MENTION_DATASETS, hold_out_dev=True, config=config)
        t0 = time.perf_counter()
        for q in questions:
            lines.append(json.dumps({"carve": name, "setting": label, "id": q.id, "question": q.question,
                                     **link_record(linker, q)}))
        print(f"{name} {label}: {len(questions)} questions, {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    tmp = out.with_suffix(".part")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(out)


def stats(rows: dict, base: dict | None) -> dict:
    """A row's figures (memq.link.evaluate.summarise_links: precision, recall of the named gold, entities a question),
    how often its first link is a named gold entity, and, against ``base``, the questions that find more or fewer of
    their named gold entities and those whose links changed."""
    from memq.link.evaluate import summarise_links

    summary = summarise_links(list(rows.values()))
    block = {key: summary[key] for key in ("questions", "precision", "recall", "entities_per_question")}
    first = sum(1 for r in rows.values() if r["linked"] and r["linked"][0]["id"] in r["gold_named"])
    block["first_link_named_gold"] = round(first / len(rows), 4)
    if base is not None:
        block["named_found_up"] = sum(1 for q, r in rows.items() if r["hits_named"] > base[q]["hits_named"])
        block["named_found_down"] = sum(1 for q, r in rows.items() if r["hits_named"] < base[q]["hits_named"])
        block["links_changed"] = sum(1 for q, r in rows.items()
                                     if [x["id"] for x in r["linked"]] != [x["id"] for x in base[q]["linked"]])
    return block


def report(folder: Path) -> dict:
    rows: dict[str, dict[str, dict]] = {}
    carves = sorted(p.stem for p in folder.glob("*.jsonl"))
    for stem in carves:
        with open(folder / f"{stem}.jsonl", encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                seen = rows.setdefault(r["setting"], {})
                if r["id"] not in seen:  # a question in two carves counts once, its first carve's
                    seen[r["id"]] = r
    base = rows.pop("default")
    return {"carves": carves, "default": stats(base, None),
            "off": {label: stats({q: r for q, r in got.items() if q in base}, base) for label, got in rows.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--carves", help="comma-separated seeds of the carves (e.g. c1,c2,c3)")
    parser.add_argument("--dataset", default="webqsp", choices=("webqsp", "cwq"))
    parser.add_argument("--out", help="folder for each carve's records")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a row of its own instead of VARIANTS (repeat for more rows; spaces join settings)")
    parser.add_argument("--report", help="sum a folder of carves' records")
    parser.add_argument("--json", help="with --report: write the figures here too")
    args = parser.parse_args()
    if args.report:
        text = json.dumps(report(Path(args.report)), indent=2)
        print(text)
        if args.json:
            Path(args.json).write_text(text + "\n", encoding="utf-8")
        return 0
    if not args.carves or not args.out:
        parser.error("--carves and --out are needed (or --report)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in args.carves.split(","):
        target = out / f"{name}.jsonl"
        if target.is_file():
            print(f"{name}: done already ({target.name})", file=sys.stderr)
            continue
        carve(name, args.dataset, args.set or list(VARIANTS), target)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
