"""Whether the region that placed a place is a gold topic entity: the count behind ``LinkConfig.regions_apart``.

    .venv/bin/python benchmarks/regions_train.py [--dataset webqsp] [--split train]

Links each question of the split with a pipeline's default linker (``memq.link.resolve.open_linker``: the cached
entity index, the dataset's memory as the fit)
and, for each link the linker read inside the region named right after it ("fresno texas": ``Link.within``),
prints whether that region is among the question's gold topic entities and whether it was linked too; then the
totals.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="webqsp")
    parser.add_argument("--split", default="train")
    args = parser.parse_args()

    from memq.datasets import load
    from memq.link.evaluate import link_record
    from memq.link.resolve import open_linker
    from memq.pipeline import Config

    linker = open_linker(Config(memory=str(ROOT / "memory_bank" / args.dataset)))
    placed = in_gold = 0
    for q in load(args.dataset, args.split):
        record = link_record(linker, q)
        linked = [x["id"] for x in record["linked"]]
        for link in record["linked"]:
            if link.get("within"):
                placed += 1
                gold = link["within"] in record["gold_all"]
                in_gold += gold
                print(f"{q.id}\t{q.question}\t{link['name']} in {link['within_name']}\tregion in gold: {gold}\t"
                      f"region linked: {link['within'] in linked}")
    print(f"{placed} places read inside the region named after them; the region a gold topic entity in {in_gold}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
