"""The statement ranker on onnxruntime (memq.plan.ranker_onnx): the committed ranker's float32 graph gives torch's
logits and transformers' pair encoding, the int8 graph keeps the order of clear choices, the cached graph is
verified and rebuilt, and without onnxruntime the ranker runs on torch and says so."""

from __future__ import annotations

import json

import numpy as np
import pytest

from memq.errors import MemQError
from memq.plan import ranker as ranker_mod
from memq.plan.ranker import DEFAULT_RANKER, RUNTIMES, StatementRanker, default_ranker, default_runtime, load_ranker

QUERY = "who plays ken barlow in coronation street?"
CANDIDATES = ["the actor of the regular tv appearance with character Ken Barlow and series Coronation Street",
              "the character of the regular tv appearance with series Coronation Street",
              "the gender of the person Ken Barlow", "the country of origin of the tv program Coronation Street",
              "the languages spoken of the country Jamaica"]

pytestmark = pytest.mark.skipif(not (DEFAULT_RANKER / "manifest.json").is_file(), reason="no committed ranker")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMQ_CACHE", str(tmp_path))
    monkeypatch.setattr(ranker_mod, "_LOADED", {})
    return tmp_path


def test_the_float32_graph_gives_torch_s_logits_and_encoding(cache):
    torch_ranker = StatementRanker.load(DEFAULT_RANKER)
    onnx_ranker = load_ranker(DEFAULT_RANKER, runtime="onnx")
    assert onnx_ranker.runtime == "onnx" and onnx_ranker.name == "ranker" and RUNTIMES[0] == "onnx"
    long_query = QUERY + " | " + " ".join(["Find the actor of the performance, assign it to ?x."] * 12)
    for query in (QUERY, long_query):  # the long one is cut, the query first
        want = torch_ranker.tokenizer([query] * len(CANDIDATES), CANDIDATES, padding=True, truncation="only_first",
                                      max_length=torch_ranker.max_length, return_tensors="np")
        got = onnx_ranker.encode(query, CANDIDATES)
        for name in ("input_ids", "attention_mask", "token_type_ids"):
            assert np.array_equal(got[name], want[name]), name
        assert np.abs(onnx_ranker.score(query, CANDIDATES) - torch_ranker.score(query, CANDIDATES)).max() < 1e-4
    assert CANDIDATES[int(np.argmax(onnx_ranker.score(QUERY, CANDIDATES)))] == CANDIDATES[0]
    assert onnx_ranker.pairs_scored == 2 * len(CANDIDATES) + len(CANDIDATES)
    # more candidates than a batch: each logit back in its candidate's place, and bit for bit the same in batches of
    # any size (float32; int8 logits move with the batch they share)
    many = [f"{c} {w}" for c in CANDIDATES for w in ("", "of the film", "and the date 1999", "in Peru", "?x", "now",
                                                     "of the sports team roster with team ?y")]
    assert len(many) > 2 * onnx_ranker.batch_size
    batched = onnx_ranker.score(QUERY, many)
    assert np.abs(batched - torch_ranker.score(QUERY, many)).max() < 1e-4
    onnx_ranker.batch_size = 64
    assert np.array_equal(onnx_ranker.score(QUERY, many), batched)


def test_the_int8_graph_keeps_a_clear_first_choice(cache):
    int8 = load_ranker(DEFAULT_RANKER, runtime="onnx-int8")
    assert int8.runtime == "onnx-int8"
    assert int8.batch_size == 64  # its logits move with the pairs a run holds: the size its dev plans were made with
    scores = int8.score(QUERY, CANDIDATES)
    assert CANDIDATES[int(np.argmax(scores))] == CANDIDATES[0]
    manifest = json.loads(next(cache.glob("onnx/ranker-*-onnx-int8-f1/manifest.json")).read_text())
    assert 0 < manifest["max_abs_diff_vs_torch"] < 3  # int8 moves the logits; recorded, not refused


def test_the_committed_ranker_runs_on_int8_for_webqsp_alone(cache, monkeypatch, tmp_path):
    """int8 tied float32 on WebQSP dev and plans faster; GrailQA's ranker lost on int8 and CWQ's was not tried, and a
    ranker of one's own was measured nowhere: those run on the first runtime. ``$MEMQ_RANKER_RUNTIME`` wins."""
    monkeypatch.delenv("MEMQ_RANKER_RUNTIME", raising=False)
    assert default_runtime(DEFAULT_RANKER, "webqsp") == "onnx-int8"
    assert default_runtime(DEFAULT_RANKER, "cwq") == default_runtime(DEFAULT_RANKER) == RUNTIMES[0]
    assert default_runtime(default_ranker("grailqa"), "grailqa") == RUNTIMES[0]
    assert default_runtime(tmp_path / "my-ranker", "webqsp") == RUNTIMES[0]
    assert load_ranker(DEFAULT_RANKER, dataset="webqsp").runtime == "onnx-int8"
    assert load_ranker(DEFAULT_RANKER, dataset="cwq").runtime == "onnx"
    monkeypatch.setenv("MEMQ_RANKER_RUNTIME", "torch")
    assert default_runtime(DEFAULT_RANKER, "webqsp") == "torch"


def test_a_changed_graph_is_exported_again_and_said_so(cache, caplog):
    load_ranker(DEFAULT_RANKER, runtime="onnx")
    graph = next(cache.glob("onnx/ranker-*-onnx-f1/model.onnx"))
    sha = json.loads((graph.parent / "manifest.json").read_text())["onnx_sha256"]
    with graph.open("r+b") as fh:
        fh.seek(-64, 2)
        fh.write(b"\0" * 64)
    ranker_mod._LOADED.clear()
    with caplog.at_level("WARNING"):
        again = load_ranker(DEFAULT_RANKER, runtime="onnx")
    assert "does not match its manifest's sha256" in caplog.text
    assert json.loads((graph.parent / "manifest.json").read_text())["onnx_sha256"] == sha
    assert CANDIDATES[int(np.argmax(again.score(QUERY, CANDIDATES)))] == CANDIDATES[0]


def test_without_onnxruntime_the_ranker_runs_on_torch_and_says_so(cache, monkeypatch):
    from memq.memory import onnx_minilm

    monkeypatch.setattr(onnx_minilm, "unavailable", lambda: "onnxruntime is not importable (test)")
    ranker = load_ranker(DEFAULT_RANKER, runtime="onnx")
    assert isinstance(ranker, StatementRanker) and ranker.runtime == "torch"
    assert ranker.fallback == "ranker runtime onnx -> torch: onnxruntime is not importable (test)"


def test_an_unknown_runtime_is_named(monkeypatch):
    with pytest.raises(MemQError, match="'tensorrt'"):
        load_ranker(DEFAULT_RANKER, runtime="tensorrt")
    monkeypatch.setenv("MEMQ_RANKER_RUNTIME", "cuda")
    with pytest.raises(MemQError, match="'cuda'"):
        load_ranker(DEFAULT_RANKER)


def test_a_candidate_longer_than_the_pair_is_cut_to_leave_the_query_some_tokens(cache):
    """Pairs are cut from the query first, which fails outright when a candidate alone is longer than the pair (a
    GrailQA description with many long names): such a candidate is cut to fit, the same on both runtimes, and the
    others are encoded as before."""
    from memq.plan.ranker import QUERY_KEEP

    torch_ranker = StatementRanker.load(DEFAULT_RANKER)
    onnx_ranker = load_ranker(DEFAULT_RANKER, runtime="onnx")
    long = "the rocket engine " + " and ".join(f"Engine Model Number {i} of the Saturn Program" for i in range(30))
    got = onnx_ranker.encode(QUERY, [long] + CANDIDATES)
    want = onnx_ranker.encode(QUERY, CANDIDATES)
    assert got["input_ids"].shape[1] <= torch_ranker.max_length
    first, short = list(got["input_ids"][0]), list(want["input_ids"][0])
    assert first[:first.index(102)] == short[:short.index(102)]  # [CLS] query [SEP]: this short query is whole
    long_query = QUERY + " " + " ".join(["Find the actor of the performance, assign it to ?x."] * 12)
    cut = list(onnx_ranker.encode(long_query, [long])["input_ids"][0])
    assert len(cut) == torch_ranker.max_length and cut.index(102) - 1 == QUERY_KEEP  # a long one keeps QUERY_KEEP
    for row, ids in enumerate(want["input_ids"], start=1):  # the short ones as before, but for padding
        assert list(got["input_ids"][row][:len(ids)]) == list(ids)
    torch_scores = torch_ranker.score(QUERY, [long] + CANDIDATES)
    assert np.allclose(onnx_ranker.score(QUERY, [long] + CANDIDATES), torch_scores, atol=1e-3)
    assert np.isfinite(torch_scores).all()
