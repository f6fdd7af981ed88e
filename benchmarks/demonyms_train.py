"""Where a demonym names its country in WebQSP's train questions: the counts behind `memq.link.demonyms.countries`.

    .venv/bin/python benchmarks/demonyms_train.py [--json OUT.json] [--list]

Each one-word demonym of ``data/demonyms/demonyms.tsv`` (or its plural) that a train question writes is classed by
where it stands (``memq.link.demonyms.where``: a plural after a stop word or at the start; a plural after another
word; a singular before "people"; a singular otherwise), and counted by whether the question's annotated topic entity
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

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the counts here")
    parser.add_argument("--list", action="store_true", help="print each question with its class")
    args = parser.parse_args()

    from memq.datasets import DATA_DIR
    from memq.link.demonyms import PLACES, demonyms, where
    from memq.link.index import normalize
    from memq.link.linker import STOP_WORDS

    table = demonyms()
    with gzip.open(DATA_DIR / "webqsp" / "WebQSP.train.json.gz", "rt", encoding="utf-8") as fh:
        questions = json.load(fh)["Questions"]
    counts: Counter = Counter()
    for q in questions:
        tokens = normalize(q["ProcessedQuestion"]).split()
        topic = normalize(q["Parses"][0].get("TopicEntityName") or "")
        for i, token in enumerate(tokens):
            if token in table:
                k, country = where(tokens, i, i + 1, STOP_WORDS), topic in table[token]
                counts[k, country] += 1
                if args.list:
                    print(f"{k} | {'country' if country else 'other'} | {q['ProcessedQuestion']}")
    out = {"questions": len(questions), "source": "WebQSP train (all 3,098), first parse's TopicEntityName",
           "counts": {k: {"country": counts[k, True], "other": counts[k, False]} for k in PLACES}}
    print(json.dumps(out, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
