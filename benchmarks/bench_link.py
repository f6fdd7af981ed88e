"""Entity linking: index build and load time, and linking precision/recall/time on a dataset split.

    .venv/bin/python benchmarks/bench_link.py [--dataset webqsp] [--split test] [--build] [--set KEY=VALUE ...]
                                               [--recount] [--no-fit] [--memory DIR] [--json FILE] [--records FILE]
                                               [--turns N]

``--build`` builds the index of the default KG afresh (into a temporary folder) and times it; otherwise the cached
index (``memq.link.resolve.cached_index``) is loaded, and that load is timed. ``--set`` changes a
:class:`memq.link.settings.LinkConfig` field (e.g. ``--set same_span_margin=0.2 --set max_entities=3``) for a
second row beside the defaults; both rows read the mention prior the defaults count, unless ``--recount`` counts it
again for the second row with its settings (those the spans are read with, ``alias_match``, ``alias_floor``, ...:
memq.link.mentions.mention_counts). ``--turns N`` times the rows again on the first N questions, taking turns question
by question (which goes first alternates), each row with a fit of its own whose caches start cold, so that neither
links on the other's warm caches (the rows above run one after the other: the first is the cold one). Recall is of
the gold topic entities the question names; precision of the linked entities among all gold topic entities
(memq.link.evaluate).

The fit through the memory (memq.link.fit) reads the default KG and ``--memory`` (default: the committed bank of
``--dataset``, memory_bank/DATASET, with the banks it includes); its load is timed apart. ``--no-fit`` links
without it. ``--split dev`` (carved from train, memq.plan.data.split_of) holds dev out of both priors learnt from
train: the mention prior is counted on the rest of train (of each ``--mentions`` dataset), and the memory loses
every statement that only dev questions gave it (as benchmarks/memory_heldout.py does). ``--carve SEED`` carves
another dev split from train (memq.plan.data.split_of with that seed, the same tenth of the questions in size), for
everything the linker holds dev out of: linking alone can then be read on more of train than the one dev split the
planner was trained without (its records are no end-to-end figures: the planner was trained on those questions).
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="webqsp", choices=("webqsp", "cwq"))
    parser.add_argument("--split", default="test", choices=("dev", "test"))
    parser.add_argument("--build", action="store_true", help="build the index afresh and time it")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--no-fit", action="store_true", help="link without the fit through the memory")
    parser.add_argument("--memory", help="memory bank of the fit (default: memory_bank/DATASET)")
    parser.add_argument("--mentions", default=None, metavar="DATASET,...",
                        help="count the mention prior on these datasets' training questions (default: "
                             "memq.link.mentions.MENTION_DATASETS)")
    parser.add_argument("--recount", action="store_true",
                        help="count the mention prior again for the --set row, with its settings (those the "
                             "spans are read with, alias_match, alias_floor, ...)")
    parser.add_argument("--carve", metavar="SEED", help="with --split dev: carve dev from train with this seed "
                        "(memq.plan.data.split_of) instead of the planner's")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--records", help="write each question's links here, a line for each row's (JSON lines)")
    parser.add_argument("--turns", type=int, default=0, metavar="N",
                        help="then time the rows again on the first N questions, taking turns question by question "
                             "(which goes first alternates), each with a fit of its own that starts cold")
    args = parser.parse_args()
    if args.carve is not None and args.split != "dev":
        parser.error("--carve needs --split dev")

    from memq.evaluate.run import questions_for
    from memq.link.evaluate import link_record, summarise_links
    from memq.link.fit import MemoryFit
    from memq.link.index import EntityIndex, build_index, kg_source
    from memq.link.linker import Linker
    from memq.link.mentions import MENTION_DATASETS, add_training_mentions, training_mentions
    from memq.link.resolve import cached_index
    from memq.link.settings import LinkConfig, with_settings
    from memq.memory.bank import MemoryBank
    from memq.pipeline import Config, open_kg
    from memq.plan import data as plan_data
    from memq.plan.data import without_dev

    if args.carve is not None:  # split_of reads it at each call: the linker's priors, the memory, the questions
        plan_data.SEED = args.carve
    kg_file = Config().kg_file
    out: dict = {"dataset": args.dataset, "split": args.split, "carve_seed": plan_data.SEED}
    if args.build:
        t0 = time.perf_counter()
        index = build_index(open_kg(kg_file), source=kg_source(kg_file, None))
        add_training_mentions(index)
        with tempfile.TemporaryDirectory() as tmp:
            index.save(tmp)
            out["build_s"] = round(time.perf_counter() - t0, 1)
            t0 = time.perf_counter()
            index = EntityIndex.load(tmp)
            out["load_s"] = round(time.perf_counter() - t0, 2)
    else:
        cached_index(kg_file)  # built if missing, so that the load below is a load
        t0 = time.perf_counter()
        index = cached_index(kg_file)
        out["load_s"] = round(time.perf_counter() - t0, 2)
    out["entities"] = len(index)
    out["mentions_from"] = index.info.get("mentions_from")
    mention_sets = tuple(args.mentions.split(",")) if args.mentions else MENTION_DATASETS
    if args.split == "dev" or mention_sets != MENTION_DATASETS:  # the mention prior without the dev questions
        index.mentions, out["mentions_from"] = training_mentions(index, mention_sets, hold_out_dev=args.split == "dev")
    fit = None
    if not args.no_fit:
        t0 = time.perf_counter()
        memory = args.memory or str(ROOT / "memory_bank" / args.dataset)
        bank = MemoryBank.load(memory)
        if args.split == "dev":
            bank = without_dev(bank, args.dataset)
        fit = MemoryFit(open_kg(kg_file), bank)
        out["fit_load_s"] = round(time.perf_counter() - t0, 2)
        out["memory"] = {"bank": Path(memory).name, "statements": len(bank),
                         "held_out": "statements only dev questions gave" if args.split == "dev" else None}
    questions = questions_for(args.dataset, args.split)
    configs = {"default": LinkConfig()}
    if args.set:
        configs[" ".join(args.set)] = with_settings(LinkConfig(), args.set)
    out["linking"] = {}
    linkers = {}
    if args.records:
        Path(args.records).write_text("", encoding="utf-8")
    for label, config in configs.items():
        linker = Linker(index, config, fit)
        if args.recount and label != "default":  # the counts of this row's settings, on the same questions
            linker.index = copy.copy(index)
            linker.index.mentions, _ = training_mentions(index, mention_sets, hold_out_dev=args.split == "dev",
                                                         config=config)
        linkers[label] = linker
        linker.link(questions[0].question)  # rapidfuzz and the embedder loaded before timing
        records = [{"id": q.id, "question": q.question, **link_record(linker, q)} for q in questions]
        if args.records:
            with open(args.records, "a", encoding="utf-8") as f:
                f.writelines(json.dumps({"setting": label, **r}) + "\n" for r in records)
        block = summarise_links(records)
        block.pop("note")
        if linker.uses_fit:
            block["fit_kg_queries"] = fit.queries
        out["linking"][label] = block
    if args.turns:
        out["turns"] = turns(configs, linkers, fit, questions[:args.turns])
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    return 0


def turns(configs: dict, linkers: dict, fit, questions: list) -> dict:
    """Each row's linking time on ``questions``, the rows taking turns question by question (which goes first
    alternates), each with a fresh fit on the same KG and bank (its caches cold): p50 and mean in ms."""
    from memq.link.fit import MemoryFit
    from memq.link.linker import Linker

    fresh = {label: Linker(linkers[label].index, config, MemoryFit(fit.kg, fit.bank) if fit is not None else None)
             for label, config in configs.items()}
    times: dict[str, list[float]] = {label: [] for label in fresh}
    for k, q in enumerate(questions):
        for label in (list(fresh) if k % 2 == 0 else list(fresh)[::-1]):
            t0 = time.perf_counter()
            fresh[label].link(q.question)
            times[label].append((time.perf_counter() - t0) * 1000)
    return {label: {"questions": len(ms), "p50_ms": round(statistics.median(ms), 2),
                    "mean_ms": round(statistics.fmean(ms), 2)} for label, ms in times.items()}


if __name__ == "__main__":
    raise SystemExit(main())
