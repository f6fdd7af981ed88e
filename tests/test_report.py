"""`memq report`: one HTML page from evaluation summaries and their (possibly gzipped) per-question files."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from memq.errors import MemQError
from memq.evaluate.report import write_report


def _summary(tmp_path, name: str, memory: str, gz: bool | None, ablation: bool = False) -> str:
    """A summary of three real WebQSP test ids; its per-question file plain, gzipped, or (``gz=None``) missing."""
    per = tmp_path / f"{name}.jsonl"
    records = [{"id": f"WebQTest-{i}", "recalled": [[0, "s1", 0.9 + i / 100]], "ehr": 1.0,
                "sparql": "SELECT ?x WHERE { ?x <http://rdf.freebase.com/ns/a.b.c> ?y }"} for i in range(3)]
    if ablation:
        for r in records:
            r["ablation"] = {"ehr": 0.25, "f1": 0.0}
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
    if ablation:
        summary["ablation"] = {"name": "direct-sparql", "questions": 3, "hits@1": 0.0, "f1": 0.125, "ehr": 0.25,
                               "ged": 2.0, "p50_s": 3.0, "llm_calls_per_question": 1.0,
                               "errors": {"direct-sparql-parse": 2}}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(summary))
    return str(path)


def test_report_tells_runs_apart_by_memory_and_reads_gzipped_records(tmp_path):
    paths = [_summary(tmp_path, "a", "webqsp", gz=None), _summary(tmp_path, "b", "webqsp+schema", gz=True)]
    page = write_report(paths, tmp_path / "r.html").read_text()
    assert "webqsp/test/oracle (webqsp)" in page and "webqsp/test/oracle (webqsp+schema)" in page
    assert page.count("<img") == 2  # the plots come from the gzipped run's records alone
    assert "{&quot;filtering&quot;: 1}" in page


def test_report_tells_planner_adapters_apart(tmp_path):
    paths = [_summary(tmp_path, name, "cwq", gz=None) for name in ("a", "b")]
    for path, adapter in zip(paths, ("memory_bank/cwq/planner", "memory_bank/webqsp/planner"), strict=True):
        summary = json.loads(Path(path).read_text())
        Path(path).write_text(json.dumps({**summary, "planner": "finetuned", "adapter": adapter}))
    page = write_report(paths, tmp_path / "r.html").read_text()
    assert "<td>memory_bank/cwq/planner</td>" in page and "<td>memory_bank/webqsp/planner</td>" in page
    assert "webqsp/test/finetuned (cwq), adapter memory_bank/cwq/planner" in page


def test_an_ablation_in_the_run_gets_its_own_table_and_error_rows(tmp_path):
    page = write_report([_summary(tmp_path, "a", "webqsp", gz=False, ablation=True)], tmp_path / "r.html").read_text()
    assert "<td>direct-sparql (ablation, same run as the row above)</td>" in page
    assert "<td>0.125</td>" in page and "direct-sparql-parse" in page
    assert page.count("<img") == 2


def test_ehr_is_plotted_by_the_gold_query_size():
    from memq.evaluate.report import _gold_sizes

    sizes = _gold_sizes("webqsp", "test")
    assert len(sizes) >= 1600 and min(sizes.values()) >= 1
    assert _gold_sizes("webqsp", "nonsense") == {}


def test_a_file_that_is_not_a_summary_is_named_in_the_error(tmp_path):
    other = tmp_path / "bench.json"
    other.write_text(json.dumps({"rows": []}))
    with pytest.raises(MemQError, match="bench.json is not a summary"):
        write_report([str(other)], tmp_path / "r.html")
