"""Whether the region beside a place is a gold topic entity: the counts behind ``LinkConfig.regions_apart`` and
``LinkConfig.regions_beside``.

    .venv/bin/python benchmarks/regions_train.py [--dataset webqsp] [--split train] [--limit N]

Links each question of the split with a pipeline's default linker (``memq.link.resolve.open_linker``: the cached
entity index, the dataset's memory as the fit), with ``regions_apart`` off so that every region stays a link, and
prints:

- each link the linker read inside the region named right after it ("fresno texas": ``Link.within``), whether that
  region is among the question's gold topic entities and whether it was linked too;
- each two links whose spans meet, one of which the KG puts inside the other (``memq.link.context.regions_inside``;
  "texas houston", "newark california", the first kind too where both were linked), whether the place and the region
  are gold topic entities;

then the totals.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="webqsp")
    parser.add_argument("--split", default="train")
    parser.add_argument("--limit", type=int, default=0, help="the first N questions only (0: all)")
    args = parser.parse_args()

    from memq.datasets import load
    from memq.link.context import regions_inside
    from memq.link.evaluate import gold_entities
    from memq.link.resolve import open_linker
    from memq.pipeline import Config

    config = Config(memory=str(ROOT / "memory_bank" / args.dataset))
    linker = open_linker(replace(config, link=replace(config.link, regions_apart=False)))
    placed = in_gold = 0
    beside: Counter = Counter()
    questions = load(args.dataset, args.split)
    for q in questions[:args.limit or None]:
        links = linker.link(q.question)
        gold = set(gold_entities(q)[1])
        linked = {x.id for x in links}
        for link in links:
            if link.within:
                placed += 1
                in_gold += link.within in gold
                print(f"{q.id}\t{q.question}\t{link.name} in {link.within_name}\tregion in gold: "
                      f"{link.within in gold}\tregion linked: {link.within in linked}")
        names = {x.id: x.name for x in links}
        for a, b in sorted(regions_inside(linker, [x for x in links if not x.alternative])):
            beside[a in gold, b in gold] += 1
            print(f"{q.id}\t{q.question}\tbeside: {names[a]} in {names[b]}\tplace in gold: {a in gold}\t"
                  f"region in gold: {b in gold}")
    print(f"{placed} places read inside the region named after them; the region a gold topic entity in {in_gold}")
    place, region = beside[True, True] + beside[True, False], beside[True, True] + beside[False, True]
    print(f"{sum(beside.values())} linked places beside a linked region the KG puts them in; the place a gold topic "
          f"entity in {place}, the region in {region}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
