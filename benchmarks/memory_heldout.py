"""A memory bank without the statements that only WebQSP dev questions gave it, to measure memories on dev.

    .venv/bin/python benchmarks/memory_heldout.py BANK OUT [--dataset webqsp] [--alone]

memq's WebQSP bank is built from all of WebQSP train, and dev is carved from train (memq.plan.data.split_of), so
every dev question's statements are in it by construction: on dev, a train memory and a train + schema memory
recall the same gold statements, and a comparison says nothing about coverage. This writes BANK less every
statement whose questions are all dev questions, unless another source (the schema) also gave it; vectors are
copied, not re-embedded. A statement kept because another source gave it too loses the dev questions' ids (and the
dev source, when no training question is left), so it counts as unseen in training where no training question gave
it. ``--alone``: BANK without the banks it includes. Run a dev evaluation on OUT for each memory compared
(docs/memory.md).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from memq.memory.bank import MemoryBank
from memq.plan.data import split_of, without_dev


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bank")
    ap.add_argument("out")
    ap.add_argument("--dataset", default="webqsp", help="the source whose dev questions are held out")
    ap.add_argument("--alone", action="store_true", help="BANK without the banks it includes")
    args = ap.parse_args()
    started = time.perf_counter()
    bank = MemoryBank.load(args.bank, include=not args.alone)
    source = f"{args.dataset}-train"
    held = without_dev(bank, args.dataset)
    stripped = 0
    for i, (record, sources) in enumerate(zip(held.records, held.sources, strict=True)):
        train = tuple(q for q in record.statement.question_ids if split_of(q) == "train")
        if train != record.statement.question_ids:
            stripped += 1
            held.records[i] = replace(record, statement=replace(record.statement, question_ids=train))
            held.sources[i] = sources if train else tuple(s for s in sources if s != source)
    held.save(args.out)
    print(f"{args.out}: {len(held)} of {len(bank)} statements kept ({len(bank) - len(held)} came from dev questions "
          f"only; {stripped} kept from another source lost their dev question ids), {held.index.ntotal} rows, in "
          f"{time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
