"""memq.files: atomic writes (bytes, or a file or a directory written by someone else) and the sha256 of a file."""

import hashlib

import pytest

from memq.files import atomic_path, sha256_file, write_atomic


def test_write_atomic_replaces_the_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "state.json"
    path.write_bytes(b"old")
    write_atomic(path, b"new")
    assert path.read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]
    assert sha256_file(path) == hashlib.sha256(b"new").hexdigest()


def test_atomic_path_renames_a_written_directory_onto_the_old_one(tmp_path):
    target = tmp_path / "tokenizer"
    target.mkdir()
    (target / "stale.json").write_text("{}")
    with atomic_path(target) as tmp:
        assert tmp.parent == tmp_path and not target.joinpath("new.json").exists()
        tmp.mkdir()
        (tmp / "new.json").write_text("{}")
    assert sorted(p.name for p in target.iterdir()) == ["new.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["tokenizer"]


def test_atomic_path_keeps_the_old_file_when_the_writer_fails(tmp_path):
    path = tmp_path / "plans.jsonl"
    path.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_path(path) as tmp:
        tmp.write_text("half a fi")
        raise RuntimeError("writer died")
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["plans.jsonl"]
