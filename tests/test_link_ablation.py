"""benchmarks/link_ablation.py's report: the rows of several carves summed, a question in two carves counted once,
and the named gold entities each row finds against the defaults'."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def ablation(benchmark_module):
    return benchmark_module("link_ablation")


def row(carve, setting, qid, linked, named, every=None) -> str:
    """A record as memq.link.evaluate.link_record writes it."""
    every = every or named
    return json.dumps({"carve": carve, "setting": setting, "id": qid, "question": qid,
                       "linked": [{"id": m} for m in linked], "link_ms": 1.0, "gold_named": named, "gold_all": every,
                       "hits_named": len(set(named) & set(linked)), "hits_all": len(set(every) & set(linked))})


def test_report_counts_each_question_once_and_its_change_against_the_defaults(ablation, tmp_path):
    (tmp_path / "c1.jsonl").write_text("\n".join([
        row("c1", "default", "q1", ["m.a"], ["m.a"]),
        row("c1", "default", "q2", ["m.x"], ["m.b"]),
        row("c1", "off=1", "q1", [], ["m.a"]),
        row("c1", "off=1", "q2", ["m.b", "m.y"], ["m.b"]),
    ]) + "\n")
    # q2 again in the second carve, linked otherwise there: its first carve's record stands
    (tmp_path / "c2.jsonl").write_text("\n".join([
        row("c2", "default", "q2", ["m.b"], ["m.b"]),
        row("c2", "default", "q3", ["m.c", "m.z"], ["m.c"], ["m.c", "m.k"]),
        row("c2", "off=1", "q2", [], ["m.b"]),
        row("c2", "off=1", "q3", ["m.c", "m.z"], ["m.c"], ["m.c", "m.k"]),
    ]) + "\n")
    out = ablation.report(tmp_path)
    assert out["carves"] == ["c1", "c2"]
    base = out["default"]
    assert base["questions"] == 3
    assert base["precision"] == pytest.approx(2 / 4, abs=1e-3)  # m.a, m.c right; m.x, m.z not
    assert base["recall"] == pytest.approx(2 / 3, abs=1e-3)
    assert base["first_link_named_gold"] == pytest.approx(2 / 3, abs=1e-3)
    off = out["off"]["off=1"]
    assert (off["named_found_up"], off["named_found_down"], off["links_changed"]) == (1, 1, 2)
    assert off["recall"] == pytest.approx(2 / 3, abs=1e-3)
    assert off["entities_per_question"] == pytest.approx(4 / 3, abs=1e-3)
