"""Where a demonym names its country in WebQSP's train questions: the counts behind `memq.link.demonyms.countries`.

    .venv/bin/python benchmarks/demonyms_train.py [--json OUT.json] [--list]

Each one-word demonym of ``data/demonyms/demonyms.tsv`` (or its plural) that a train question writes is classed by
where it stands (a plural after a stop word or at the start; a plural after another word; a singular before
"people"; a singular otherwise), and counted by whether the question's annotated topic entity
(``TopicEntityName`` of its first parse) is one of the countries it is formed from. Only train questions are read.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

KINDS = ("plural after a stop word or at the start", "plural after another word", "singular before \"people\"",
         "singular otherwise")


def kind(tokens: list[str], i: int, plurals: frozenset[str], stop_words: frozenset[str]) -> str:
    if tokens[i] in plurals:
        return KINDS[0] if i == 0 or tokens[i - 1] in stop_words else KINDS[1]
    return KINDS[2] if tokens[i + 1:i + 2] == ["people"] else KINDS[3]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the counts here")
    parser.add_argument("--list", action="store_true", help="print each question with its class")
    args = parser.parse_args()

    from memq.datasets import DATA_DIR
    from memq.link.demonyms import demonyms, plurals
    from memq.link.index import normalize
    from memq.link.linker import STOP_WORDS

    table, plural_forms = demonyms(), plurals()
    with gzip.open(DATA_DIR / "webqsp" / "WebQSP.train.json.gz", "rt", encoding="utf-8") as fh:
        questions = json.load(fh)["Questions"]
    counts: Counter = Counter()
    for q in questions:
        tokens = normalize(q["ProcessedQuestion"]).split()
        topic = normalize(q["Parses"][0].get("TopicEntityName") or "")
        for i, token in enumerate(tokens):
            if token in table:
                k, country = kind(tokens, i, plural_forms, STOP_WORDS), topic in table[token]
                counts[k, country] += 1
                if args.list:
                    print(f"{k} | {'country' if country else 'other'} | {q['ProcessedQuestion']}")
    out = {"questions": len(questions), "source": "WebQSP train (all 3,098), first parse's TopicEntityName",
           "counts": {k: {"country": counts[k, True], "other": counts[k, False]} for k in KINDS}}
    print(json.dumps(out, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
