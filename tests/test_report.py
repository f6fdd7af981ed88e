"""`memq report`: one HTML page from evaluation summaries and their (possibly gzipped) per-question files."""

from __future__ import annotations

import gzip
import json

import pytest

from memq.errors import MemQError
from memq.evaluate.report import write_report


def _summary(tmp_path, name: str, memory: str, gz: bool | None) -> str:
    """A summary; its per-question file plain, gzipped, or (``gz=None``) missing."""
    per = tmp_path / f"{name}.jsonl"
    records = [{"id": f"q{i}", "recalled": [[0, "s1", 0.9 + i / 100]], "ehr": 1.0,
                "sparql": "SELECT ?x WHERE { ?x <http://rdf.freebase.com/ns/a.b.c> ?y }"} for i in range(3)]
    text = "".join(json.dumps(r) + "\n" for r in records)
    if gz is None:
        pass
    elif gz:
        with gzip.open(str(per) + ".gz", "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        per.write_text(text)
    summary = {"dataset": "webqsp", "split": "test", "planner": "oracle", "memory": memory, "questions": 3,
               "hits@1": 1.0, "f1": 0.5, "ehr": 1.0, "ged": 0.0, "p50_s": 0.1, "llm_calls_per_question": 0,
               "errors": {"filtering": 1}, "fallbacks": {}, "per_question": str(per), "source": "benchmark KG"}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(summary))
    return str(path)


def test_report_tells_runs_apart_by_memory_and_reads_gzipped_records(tmp_path):
    paths = [_summary(tmp_path, "a", "webqsp", gz=None), _summary(tmp_path, "b", "webqsp+schema", gz=True)]
    page = write_report(paths, tmp_path / "r.html").read_text()
    assert "webqsp/test/oracle (webqsp)" in page and "webqsp/test/oracle (webqsp+schema)" in page
    assert page.count("<img") == 2  # the plots come from the gzipped run's records alone
    assert "{&quot;filtering&quot;: 1}" in page


def test_a_file_that_is_not_a_summary_is_named_in_the_error(tmp_path):
    other = tmp_path / "bench.json"
    other.write_text(json.dumps({"rows": []}))
    with pytest.raises(MemQError, match="bench.json is not a summary"):
        write_report([str(other)], tmp_path / "r.html")
