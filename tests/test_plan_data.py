"""memq.plan.data: train/dev split, JSONL, CWQ exclusion, and the ``memq planner data`` command."""

from __future__ import annotations

import json

import pytest

from memq.datasets import load
from memq.errors import MemQError
from memq.plan.cli import main
from memq.plan.data import data_hash, derive_split, from_json, read_jsonl, split_of, to_json, write_jsonl


def test_split_is_deterministic_about_ten_percent_and_groups_cwq_by_base_id():
    ids = [q.id for q in load("webqsp", "train")]
    dev = [i for i in ids if split_of(i) == "dev"]
    assert 0.08 < len(dev) / len(ids) < 0.12
    assert dev == [i for i in ids if split_of(i) == "dev"]
    assert split_of("WebQTrn-12_aaaa") == split_of("WebQTrn-12_bbbb") == split_of("WebQTrn-12")
    assert split_of("WebQTrn-12", seed="other") in ("train", "dev")


def test_jsonl_round_trip_and_hash(tmp_path):
    report = derive_split("webqsp", "dev", limit=20)
    assert report.questions == 20 and len(report.plans) >= 18
    path = write_jsonl(report.plans, tmp_path / "dev.jsonl")
    back = read_jsonl(path)
    assert [to_json(p) for p in back] == [to_json(p) for p in report.plans]
    assert data_hash(back) == data_hash(report.plans)
    assert data_hash(back[1:]) != data_hash(back)
    assert from_json(json.loads(path.read_text().splitlines()[0])).text == report.plans[0].text
    with pytest.raises(MemQError, match="not JSON"):
        (tmp_path / "bad.jsonl").write_text("{nope\n")
        read_jsonl(tmp_path / "bad.jsonl")


def test_cwq_can_exclude_webqsp_test_questions():
    report = derive_split("cwq", "train", exclude_webqsp_test=True, limit=200)
    assert report.excluded > 0
    assert not any(p.question_id.startswith("WebQTest-") for p in report.plans)
    assert len(report.plans) >= 190
    assert all(name for p in report.plans for _, name in p.entities)


def test_unknown_split_is_named():
    with pytest.raises(MemQError, match="'validation'"):
        derive_split("webqsp", "validation")


def test_cli_data_json_and_out(tmp_path, capsys):
    out = tmp_path / "d.jsonl"
    assert main(["data", "--dataset", "webqsp", "--split", "dev", "--limit", "25", "--json", "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["questions"] == 25
    assert summary["plans"] + summary["skipped"] == 25
    assert isinstance(summary["skipped_reasons"], dict)
    assert len(out.read_text().splitlines()) == summary["plans"]


def test_grailqa_splits_train_on_train_and_tune_on_part_of_dev():
    from memq.plan.data import grailqa_part

    train = derive_split("grailqa", "train")
    tune, report = derive_split("grailqa", "dev"), derive_split("grailqa", "test")
    assert (train.questions, tune.questions, report.questions) == (1000, 208, 141)
    assert not train.skipped and not tune.skipped and not report.skipped
    assert {p.question_id for p in tune.plans}.isdisjoint(p.question_id for p in report.plans)
    # paraphrases of one logical form (same qid but its last 6 digits) stay in one part
    assert all(grailqa_part(p.question_id) == grailqa_part(p.question_id[:-6] + "999999") for p in tune.plans)
    assert any(p.text.startswith("Find every ") for p in train.plans)
    with pytest.raises(MemQError, match="training data only"):
        derive_split("grailqa-synthetic", "dev")


def test_evaluation_parts_of_grailqa_dev_are_the_planner_splits():
    from memq.evaluate.run import questions_for

    tune, report = questions_for("grailqa", "dev", "tune"), questions_for("grailqa", "dev", "report")
    assert [q.id for q in tune] == [p.question_id for p in derive_split("grailqa", "dev").plans]
    assert len(tune) + len(report) == len(questions_for("grailqa", "dev")) == 349
    with pytest.raises(ValueError, match="'tune': GrailQA dev has the parts"):
        questions_for("webqsp", "dev", "tune")
    with pytest.raises(ValueError, match="'half'"):
        questions_for("grailqa", "dev", "half")


def test_evaluate_takes_a_question_file_of_the_datasets_format(tmp_path):
    import gzip

    from memq.evaluate.run import run
    from memq.pipeline import ROOT, Config

    raw = json.loads(gzip.open(ROOT / "data" / "grailqa" / "grailqa_dev_subset.json.gz").read())
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(raw[3:5]), encoding="utf-8")
    config = Config(kg=str(ROOT / "data" / "kg" / "grailqa.nq.gz"), memory=str(ROOT / "memory_bank" / "grailqa"))
    summary = run("grailqa", "dev", "oracle", config=config, questions_file=path, progress=False)
    assert summary["questions"] == 2 and summary["questions_file"].endswith("mine.json")
    assert summary["by_level"]  # the file's own levels
    with pytest.raises(ValueError, match="a questions file has none"):
        run("grailqa", "dev", "oracle", config=config, questions_file=path, part="tune", progress=False)


def test_without_dev_keeps_what_a_training_question_or_another_source_gave():
    from types import SimpleNamespace

    from memq.plan.data import without_dev

    train = next(f"WebQTrn-{i}" for i in range(100) if split_of(f"WebQTrn-{i}") == "train")
    dev = next(f"WebQTrn-{i}" for i in range(100) if split_of(f"WebQTrn-{i}") == "dev")

    def record(*qids):
        return SimpleNamespace(statement=SimpleNamespace(question_ids=qids))

    entries = [("train only", record(train), ("webqsp-train",)),
               ("dev only", record(dev), ("webqsp-train",)),
               ("dev and train", record(dev, train), ("webqsp-train",)),
               ("dev and the schema", record(dev), ("webqsp-train", "schema")),
               ("another dataset's", record(dev), ("cwq-train",))]

    class Bank:
        def subset(self, keep):
            return [name for name, rec, sources in entries if keep(rec, sources)]

    assert without_dev(Bank(), "webqsp") == ["train only", "dev and train", "dev and the schema", "another dataset's"]


def test_split_of_reads_the_module_seed_at_each_call(monkeypatch):
    from memq.plan import data

    ids = [f"WebQTrn-{i}" for i in range(200)]
    planner = [split_of(q) for q in ids]
    assert planner == [split_of(q, seed="memq-plan-v1") for q in ids]
    monkeypatch.setattr(data, "SEED", "c1")
    carved = [split_of(q) for q in ids]
    assert carved == [split_of(q, seed="c1") for q in ids] and carved != planner
    assert [split_of(q, seed="memq-plan-v1") for q in ids] == planner  # a seed given wins
