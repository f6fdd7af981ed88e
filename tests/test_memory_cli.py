"""``memq memory build|inspect|stats`` (through memq.memory.cli.register)."""

from __future__ import annotations

import argparse
import json

import pytest

from memq.errors import MemQError
from memq.memory.cli import register


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="memq")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.handler(args)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "m"
    assert run(["memory", "build", "--source", "webqsp-train", "--describer", "template", "--embedder", "hashing",
                "--out", str(out), "--no-progress"]) == 0
    return out


def test_build_prints_counts_by_structure(built, capsys):
    # the module fixture ran first; build again into the same folder (cache-less template build)
    assert run(["memory", "build", "--source", "webqsp-train", "--embedder", "hashing", "--out", str(built),
                "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "by structure: 1=" in out and "filter=" in out and "order=" in out
    assert not (built / "describe.cache.jsonl").exists()  # template builds drop the cache by default


def test_inspect_json(built, capsys):
    assert run(["memory", "inspect", str(built), "the spouse of the person ?entity1", "-k", "3", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert len(hits) == 3
    assert set(hits[0]) >= {"statement", "description", "score", "structure"}
    assert hits[0]["score"] >= hits[1]["score"] >= hits[2]["score"]
    assert "spouse" in hits[0]["description"]


def test_inspect_text(built, capsys):
    assert run(["memory", "inspect", str(built), "Find the spouse of Richard Nixon"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("1. ") and "ns:" in lines[1]


def test_stats_json(built, capsys):
    assert run(["memory", "stats", str(built), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["statements"] > 500
    assert sum(stats["by_structure"].values()) == stats["statements"]
    assert stats["embedder"] == {"name": "hashing-256", "dim": 256}


def test_errors_are_memq_errors(tmp_path):
    with pytest.raises(MemQError, match="manifest"):
        run(["memory", "stats", str(tmp_path / "none")])
    with pytest.raises(MemQError, match="openai"):
        run(["memory", "build", "--source", "schema", "--describer", "openai", "--out", str(tmp_path / "x")])


def test_build_the_grailqa_schema_form_of_some_domains(tmp_path, capsys):
    out = tmp_path / "grail-schema"
    assert run(["memory", "build", "--source", "schema", "--schema-form", "grailqa", "--schema-domains",
                "architecture,religion", "--embedder", "hashing", "--no-progress", "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    schema = manifest["source"]["config"]["schema"]
    assert schema["domains"] == ["architecture", "religion"] and schema["classes"] and not schema["filters"]
    assert manifest["counts"]["by_structure"]["class"] > 10 and "filter=0" in capsys.readouterr().out
    relations = {r for line in (out / "statements.jsonl").read_text().splitlines()
                 for r in json.loads(line)["relations"]}
    assert relations and all(r.startswith(("architecture.", "religion.", "type.object.type")) for r in relations)


def test_merge_keeps_what_the_banks_include_included(tmp_path, capsys):
    from memq.memory import HashingEmbedder, MemoryBank
    from memq.types import MemoryRecord, Statement

    def bank(prefix: str, n: int, describer: str) -> MemoryBank:
        return MemoryBank.build([MemoryRecord(Statement(f"{i:012d}", "1", f"?entity1 ns:x.r{i} ?entity2 .",
                                                        (f"x.r{i}",)), (f"{prefix} {i} of ?entity1",), describer)
                                 for i in range(n)], HashingEmbedder())

    schema = MemoryBank.build([MemoryRecord(Statement(f"s{i:011d}", "1", f"?entity1 ns:y.r{i} ?entity2 .",
                                                      (f"y.r{i}",)), (f"schema relation {i}",), "template")
                               for i in range(5)], HashingEmbedder())
    schema.save(tmp_path / "banks" / "schema")
    bank("the relation", 4, "template").save(tmp_path / "banks" / "template", include=["../schema"])
    bank("what links", 3, "llm:m").save(tmp_path / "banks" / "llm", include=["../schema"])
    out = tmp_path / "elsewhere" / "mixed"
    assert run(["memory", "merge", str(tmp_path / "banks" / "llm"), str(tmp_path / "banks" / "template"),
                "--descriptions", "--out", str(out)]) == 0
    assert "4 statements" in capsys.readouterr().out  # the schema's 5 are not copied in
    assert json.loads((out / "manifest.json").read_text())["include"] == ["../../banks/schema"]
    assert len(MemoryBank.load(out, include=False)) == 4 and len(MemoryBank.load(out)) == 9
