"""How the train gold queries write their CVT statements: which side enters the CVT, which side leaves it.

    .venv/bin/python benchmarks/cvt_forms.py [BANK ...]     # default: memory_bank/webqsp memory_bank/cwq

For every structure-2/3 statement of the banks' own (train) statements, each line is `?entity1>cvt` (the entity
reaches the CVT: a reverse property) or `cvt>entity1` (the CVT's own role), and so on; prints the count of each
form with an example. The schema source writes the forms the train queries use (docs/memory.md): this is the count
that chose them, on train statements only.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memq.memory.bank import MemoryBank  # noqa: E402

LINE = re.compile(r"(\?\w+) ns:(\S+) (\S+) \.")


def form(sparql: str) -> str:
    parts = []
    for line in sparql.splitlines():
        m = LINE.match(line.strip())
        if not m:
            parts.append("other")
            continue
        s, _, o = m.groups()
        parts.append(f"cvt>{o[1:]}" if s == "?cvt" else f"{s[1:]}>cvt" if o == "?cvt" else "no-cvt")
    return " ".join(sorted(parts))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("banks", nargs="*", default=["memory_bank/webqsp", "memory_bank/cwq"])
    args = ap.parse_args()
    counts: Counter = Counter()
    example: dict = {}
    for path in args.banks:
        for r in MemoryBank.load(path, include=False).records:
            if r.statement.structure in ("2", "3"):
                key = (r.statement.structure, form(r.statement.sparql))
                counts[key] += 1
                example.setdefault(key, r.statement.sparql.replace("\n", " "))
    total = sum(counts.values())
    print(f"{total} structure-2/3 statements in {', '.join(args.banks)}")
    for (structure, shape), n in counts.most_common():
        print(f"{n:5d}  [{structure}] {shape:45s} {example[(structure, shape)][:150]}")


if __name__ == "__main__":
    main()
