"""The linked run's losses (memq.link.evaluate.summarise_losses) and benchmarks/linked_losses.py, which reads them
off per-question files: the questions whose F1 differs from the gold entities', classed by what the linker gave the
planner."""

from __future__ import annotations

import gzip
import json

import pytest


@pytest.fixture(scope="module")
def losses(benchmark_module):
    return benchmark_module("linked_losses")


def linking(linked=(), suggested=(), named=(), every=()) -> dict:
    return {"linked": [{"id": m} for m in linked],
            "suggested": [{"id": m, "suggested": "constraint"} for m in suggested],
            "gold_named": list(named), "gold_all": list(every)}


def test_classes_in_order():
    from memq.link.evaluate import loss_class

    # a named entity missing decides, whatever else is given
    assert loss_class(linking(["m.b", "m.x"], [], ["m.a"], ["m.a", "m.b"])) == "missed"
    # a constraint suggested counts as given; one neither linked nor suggested does not
    assert loss_class(linking(["m.a"], ["m.c"], ["m.a"], ["m.a", "m.c"])) == "same"
    assert loss_class(linking(["m.a", "m.x"], [], ["m.a"], ["m.a", "m.c"])) == "constraint"
    assert loss_class(linking(["m.a", "m.x"], [], ["m.a"], ["m.a"])) == "extra"


def test_summary_over_all_questions(losses, tmp_path):
    rows = [
        {"id": "q1", "f1": 0.0, "gold_entities": {"f1": 1.0}, "linking": linking(["m.x"], [], ["m.a"], ["m.a"])},
        {"id": "q2", "f1": 1.0, "gold_entities": {"f1": 0.5}, "linking": linking(["m.a", "m.x"], [], ["m.a"], ["m.a"])},
        {"id": "q3", "f1": 1.0, "gold_entities": {"f1": 1.0}, "linking": linking(["m.a"], [], ["m.a"], ["m.a"])},
        {"id": "q4", "f1": 0.5, "gold_entities": {"f1": 1.0}, "linking": linking(["m.a"], [], ["m.a"], ["m.a"])},
    ]
    first, second = tmp_path / "s1.jsonl", tmp_path / "s2.jsonl.gz"
    first.write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    with gzip.open(second, "wt") as fh:  # shards, one gzipped
        fh.write("".join(json.dumps(r) + "\n" for r in rows[2:]))
    out = losses.classify(losses.records([str(first), str(second)]))
    assert (out["questions"], out["differ"]) == (4, 3)
    assert out["f1"] == 0.625 and out["f1_gold_entities"] == 0.875 and out["gap"] == 0.25
    classes = out["classes"]
    assert (classes["missed"]["questions"], classes["missed"]["f1_lost"], classes["missed"]["down"]) == (1, 0.25, 1)
    assert (classes["extra"]["up"], classes["extra"]["f1_lost"]) == (1, -0.125)
    assert classes["same"]["ids"] == ["q4"] and classes["constraint"]["questions"] == 0


def test_no_linked_records(losses, tmp_path):
    path = tmp_path / "gold.jsonl"
    path.write_text(json.dumps({"id": "q1", "f1": 1.0}) + "\n")
    with pytest.raises(SystemExit, match="no record of a linked run"):
        losses.classify(losses.records([str(path)]))
