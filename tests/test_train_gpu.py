"""benchmarks/train_gpu.py's upload: files cut into fixed-size chunks, each written out on the GPU machine once all
of its chunks have come, and checked against the sha256 the index recorded."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest


@pytest.fixture
def train_gpu(monkeypatch, benchmark_module):
    module = benchmark_module("train_gpu")
    monkeypatch.setattr(module, "CHUNK_BYTES", 10)
    return module


def _work(tmp_path: Path) -> tuple[Path, Path]:
    work = tmp_path / "work"
    (work / "whl").mkdir(parents=True)
    (work / "whl" / "a-1.0-py3-none-any.whl").write_bytes(b"wheel-bytes")  # 11 bytes: chunks 0-1
    (work / "data").mkdir()
    (work / "data" / "plans.jsonl.gz").write_bytes(b"plans")  # chunk 1
    (work / "init" / "adapter").mkdir(parents=True)
    (work / "init" / "adapter" / "adapter_config.json").write_bytes(b"{}")  # chunk 1
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(bytes(range(23)))  # chunks 1-4
    return work, gguf


def _arrive(work: Path, there: Path, *chunks: int) -> None:
    (there / "up").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(work / "up" / "index.json", there / "up" / "index.json")
    for k in chunks:
        shutil.copyfile(work / "up" / f"chunk{k:02d}", there / "up" / f"chunk{k:02d}")


def test_files_are_written_out_once_all_their_chunks_have_come(train_gpu, tmp_path, capsys):
    work, gguf = _work(tmp_path)
    assert train_gpu.pack(work, gguf, minilm=False) == 5  # 11 + 5 + 2 + 23 = 41 bytes
    index = json.loads((work / "up" / "index.json").read_text())
    assert [f["name"] for f in index["files"]] == ["whl/a-1.0-py3-none-any.whl", "data/plans.jsonl.gz",
                                                  "init/adapter/adapter_config.json", "gguf/" + train_gpu.GGUF_NAME]
    there = tmp_path / "there"
    _arrive(work, there, 0)
    train_gpu.receive(there)
    assert not (there / "whl").exists()  # its last byte is in chunk 1
    _arrive(work, there, 1, 2)
    train_gpu.receive(there)
    assert (there / "whl" / "a-1.0-py3-none-any.whl").read_bytes() == b"wheel-bytes"
    assert (there / "data" / "plans.jsonl.gz").read_bytes() == b"plans"
    assert not (there / "gguf").exists()
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["files_waiting"] == 1
    _arrive(work, there, 3, 4)
    train_gpu.receive(there)
    assert (there / "gguf" / train_gpu.GGUF_NAME).read_bytes() == bytes(range(23))


def test_a_corrupt_chunk_is_refused_by_name(train_gpu, tmp_path):
    work, gguf = _work(tmp_path)
    train_gpu.pack(work, gguf, minilm=False)
    there = tmp_path / "there"
    _arrive(work, there, 0, 1)
    chunk = there / "up" / "chunk00"
    chunk.write_bytes(b"X" + chunk.read_bytes()[1:])
    with pytest.raises(SystemExit, match="whl/a-1.0-py3-none-any.whl: sha256"):
        train_gpu.receive(there)
    assert not (there / "whl" / "a-1.0-py3-none-any.whl").exists()
