"""MemoryBank: search semantics, persistence, verification on load, and the embedders."""

from __future__ import annotations

import json

import numpy as np
import pytest

from memq.errors import MemoryBankError
from memq.memory import HashingEmbedder, MemoryBank, embedder_for
from memq.memory.embed import MINILM_NAME, minilm_dir
from memq.types import MemoryRecord, Statement


def rec(i: int, structure: str, *descriptions: str) -> MemoryRecord:
    s = Statement(f"id{i}", structure, f"?entity1 ns:a.b.r{i} ?entity2 .", (f"a.b.r{i}",), (f"WebQTrn-{i}",))
    return MemoryRecord(s, tuple(descriptions), "template")


RECORDS = [
    rec(0, "1", "?entity2 is the spouse of the person ?entity1", "the spouse of ?entity1"),
    rec(1, "2", "?entity2 is the sibling of the siblings of the person ?entity1", "the sibling of ?entity1"),
    rec(2, "1", "?entity2 is the currency used of the country ?entity1"),
    rec(3, "filter", "?entity1 is the same as ?value", "make sure ?entity1 is ?value"),
]


@pytest.fixture()
def bank() -> MemoryBank:
    return MemoryBank.build(RECORDS, HashingEmbedder(), sources=[("webqsp-train",)] * 4,
                            info={"describer": {"name": "template", "prompt_hash": "x"}})


@pytest.mark.parametrize("kind", ["flat", "sq8"])
def test_similarities_are_the_whole_bank_search_s_scores(bank, kind):
    b = bank if kind == "flat" else MemoryBank.build(RECORDS, HashingEmbedder(), index_type="sq8")
    for text in ("the spouse of", "currency used", "make sure"):
        want = {rec.statement.id: score for rec, _, score in b.search(text, k=len(b))}
        got = b.similarities(text)
        assert got.keys() == want.keys() and max(abs(got[k] - want[k]) for k in want) < 1e-5


def test_hashing_embedder_is_normalised_and_deterministic():
    e = HashingEmbedder(64)
    a = e.encode(["the spouse of ?entity1", "currency"])
    assert a.dtype == np.float32 and a.shape == (2, 64)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0)
    assert np.array_equal(a, HashingEmbedder(64).encode(["the spouse of ?entity1", "currency"]))
    assert e.encode([]).shape == (0, 64)
    with pytest.raises(TypeError):
        e.encode("not a list")


def test_search_returns_one_hit_per_statement_best_first(bank):
    hits = bank.search("the spouse of ?entity1", k=4)
    assert [r.statement.id for r, _, _ in hits][0] == "id0"
    assert hits[0][1] == "the spouse of ?entity1" and hits[0][2] == pytest.approx(1.0, abs=1e-5)
    ids = [r.statement.id for r, _, _ in hits]
    assert len(ids) == len(set(ids)) == 4
    scores = [s for _, _, s in hits]
    assert scores == sorted(scores, reverse=True)


def test_search_many_matches_search(bank):
    texts = ["currency of a country", "make sure ?entity1 is ?value"]
    many = bank.search_many(texts, k=2)
    assert [[(r.statement.id, d) for r, d, _ in hs] for hs in many] == \
        [[(r.statement.id, d) for r, d, _ in bank.search(t, k=2)] for t in texts]
    assert bank.search_many([], k=3) == []
    with pytest.raises(ValueError):
        bank.search("x", k=0)


def test_counts(bank):
    c = bank.counts()
    assert c["statements"] == 4 and c["descriptions"] == 7
    assert c["by_structure"] == {"1": 2, "2": 1, "3": 0, "filter": 1, "order": 0, "class": 0, "superlative": 0,
                                 "count": 0}
    assert c["by_source"] == {"webqsp-train": 4}


def test_duplicate_ids_are_refused():
    with pytest.raises(MemoryBankError, match="id0"):
        MemoryBank.build([RECORDS[0], RECORDS[0]], HashingEmbedder())


def test_save_load_round_trip(bank, tmp_path):
    bank.save(tmp_path / "m")
    files = sorted(p.name for p in (tmp_path / "m").iterdir())
    assert files == ["index.faiss", "manifest.json", "statements.jsonl"]
    manifest = json.loads((tmp_path / "m" / "manifest.json").read_text())
    assert manifest["format_version"] == 1 and manifest["embedder"] == {"name": "hashing-256", "dim": 256}
    assert manifest["describer"]["name"] == "template" and manifest["counts"]["statements"] == 4
    assert set(manifest["files"]) == {"statements.jsonl", "index.faiss"}
    lines = (tmp_path / "m" / "statements.jsonl").read_text().splitlines()
    assert json.loads(lines[1])["descriptions"] == list(RECORDS[1].descriptions)
    loaded = MemoryBank.load(tmp_path / "m")
    assert [r for r in loaded.records] == RECORDS
    assert loaded.sources == [("webqsp-train",)] * 4
    q = "the sibling of ?entity1"
    assert [(r.statement.id, d) for r, d, _ in loaded.search(q, 3)] == \
        [(r.statement.id, d) for r, d, _ in bank.search(q, 3)]


@pytest.mark.parametrize("name", ["statements.jsonl", "index.faiss"])
def test_changing_one_byte_fails_naming_the_file(bank, tmp_path, name):
    bank.save(tmp_path / "m")
    path = tmp_path / "m" / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(MemoryBankError, match=name):
        MemoryBank.load(tmp_path / "m")


def test_missing_files_and_manifest(bank, tmp_path):
    with pytest.raises(MemoryBankError, match="manifest.json"):
        MemoryBank.load(tmp_path / "nothing")
    bank.save(tmp_path / "m")
    (tmp_path / "m" / "index.faiss").unlink()
    with pytest.raises(MemoryBankError, match="index.faiss"):
        MemoryBank.load(tmp_path / "m")


def test_other_embedder_is_refused(bank, tmp_path):
    bank.save(tmp_path / "m")
    with pytest.raises(MemoryBankError, match="hashing-256"):
        MemoryBank.load(tmp_path / "m", embedder=HashingEmbedder(128))


def test_bad_format_version(bank, tmp_path):
    bank.save(tmp_path / "m")
    mpath = tmp_path / "m" / "manifest.json"
    m = json.loads(mpath.read_text())
    m["format_version"] = 99
    mpath.write_text(json.dumps(m))
    with pytest.raises(MemoryBankError, match="format_version"):
        MemoryBank.load(tmp_path / "m")


def test_embedder_for_names():
    assert embedder_for("hashing-32").dim == 32
    assert embedder_for(MINILM_NAME).name == MINILM_NAME
    with pytest.raises(MemoryBankError, match="unknown embedder"):
        embedder_for("bert")
    assert (minilm_dir() / "config.json").exists()


@pytest.mark.parametrize("runtime", ["onnx", "torch"])
def test_minilm_embeds_as_sentence_transformers_does(runtime):
    """memq runs all-MiniLM-L6-v2 (Transformer -> mean pooling -> Normalize) on onnxruntime or on transformers
    to skip sentence-transformers' import; the vectors are sentence-transformers' own, to float32 rounding."""
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from memq.memory.embed import MiniLMEmbedder

    texts = ["?entity2 is the languages spoken of the country ?entity1", "Find the spouse of the person Tom Hanks.",
             "", "a " * 400, "Make sure ?gender is Male.", "Beyoncé's birthplace in Zürich"] * 25  # 150 texts:
    # three batches, one text over 256 tokens
    want = SentenceTransformer(str(minilm_dir()), device="cpu").encode(
        texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False)
    embedder = MiniLMEmbedder(runtime=runtime)
    got = embedder.encode(texts)
    assert embedder.fallback is None
    assert got.shape == (150, 384) and got.dtype == np.float32
    assert np.abs(got - want).max() < 1e-5
    if runtime == "onnx":  # its idle threads do not spin (a spinning thread holds a core llama.cpp wants)
        from memq.memory import onnx_minilm

        graph = onnx_minilm.cached_graph(minilm_dir(), lambda: pytest.fail("the encode above cached it"))
        options = onnx_minilm.open_graph(graph, minilm_dir(), 256)[0].get_session_options()
        assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_the_onnx_cache_is_verified_and_rebuilt(tmp_path, monkeypatch, caplog):
    """A graph whose bytes differ from its manifest is exported again (and said so), never run."""
    from memq.memory import onnx_minilm
    from memq.memory.embed import _torch_minilm

    monkeypatch.setenv("MEMQ_CACHE", str(tmp_path))
    graph = onnx_minilm.cached_graph(minilm_dir(), lambda: _torch_minilm(minilm_dir(), "cpu"))
    manifest = json.loads((graph.parent / "manifest.json").read_text())
    assert manifest["source_sha256"] and manifest["max_abs_diff_vs_torch"] < 1e-5
    assert onnx_minilm.cached_graph(minilm_dir(), lambda: pytest.fail("rebuilt")) == graph  # verified
    with graph.open("r+b") as fh:
        fh.seek(-64, 2)
        fh.write(b"\0" * 64)
    with caplog.at_level("WARNING"):
        assert onnx_minilm.cached_graph(minilm_dir(), lambda: _torch_minilm(minilm_dir(), "cpu")) == graph
    assert "does not match its manifest's sha256" in caplog.text
    assert json.loads((graph.parent / "manifest.json").read_text())["onnx_sha256"] == manifest["onnx_sha256"]


def test_minilm_without_onnxruntime_runs_on_torch_and_says_so(monkeypatch):
    from memq.memory import embed, onnx_minilm

    monkeypatch.setattr(onnx_minilm, "unavailable", lambda: "onnxruntime is not importable (test)")
    embedder = embed.MiniLMEmbedder()
    assert embedder.encode(["Jamaica"]).shape == (1, 384)
    assert embedder.fallback == "MiniLM runs on torch: onnxruntime is not importable (test)"
    with pytest.raises(ValueError, match="'tensorrt'"):
        embed.MiniLMEmbedder(runtime="tensorrt")


@pytest.mark.parametrize("kind, tolerance", [("fp16", 2e-3), ("sq8", 2e-2)])
def test_a_compact_index_recalls_as_the_flat_one_does_and_says_so_in_the_manifest(tmp_path, kind, tolerance):
    records = [MemoryRecord(Statement(f"{i:012d}", "1", f"?entity1 ns:x.r{i} ?entity2 .", (f"x.r{i}",)),
                            (f"the relation number {i} of ?entity1", f"relation {i} words {i * 7}"), "template")
               for i in range(60)]
    flat = MemoryBank.build(records, HashingEmbedder())
    small = MemoryBank.build(records, HashingEmbedder(), index_type=kind)
    for text in ("the relation number 7 of", "relation 31 words 217", "number 59"):
        want, got = flat.search(text, 3), small.search(text, 3)
        assert got[0][0].statement.id == want[0][0].statement.id
        assert abs(got[0][2] - want[0][2]) <= tolerance
    small.save(tmp_path / "bank")
    loaded = MemoryBank.load(tmp_path / "bank", HashingEmbedder())
    assert loaded.manifest["index"]["type"] == kind
    assert (tmp_path / "bank" / "index.faiss").stat().st_size < flat.index.ntotal * flat.index.d * 4 / 1.9
    with pytest.raises(MemoryBankError, match="unknown index type 'pq'"):
        flat.compacted("pq")


def test_a_subset_keeps_the_chosen_statements_with_their_own_vectors(tmp_path):
    records = [MemoryRecord(Statement(f"{i:012d}", "1", f"?entity1 ns:x.r{i} ?entity2 .", (f"x.r{i}",),
                                      (f"q{i % 3}",)), (f"the relation number {i} of ?entity1", f"words {i}"),
                            "template") for i in range(30)]
    for kind in ("flat", "sq8"):
        bank = MemoryBank.build(records, HashingEmbedder(), index_type=kind)
        held = bank.subset(lambda r, _sources: r.statement.question_ids != ("q0",))
        assert len(held) == 20 and held.get("000000000003") is None and held.get("000000000004") is not None
        assert held.index.ntotal == 40 and held.manifest == {} and type(held.index) is type(bank.index)
        want = bank.search("the relation number 4 of", 1)[0]
        got = held.search("the relation number 4 of", 1)[0]
        assert got[0].statement.id == want[0].statement.id == "000000000004"
        assert abs(got[2] - want[2]) < 2e-2


def test_merging_adds_the_other_banks_statements_it_lacks_and_unites_sources():
    def record(i: int) -> MemoryRecord:
        return MemoryRecord(Statement(f"{i:012d}", "1", f"?entity1 ns:x.r{i} ?entity2 .", (f"x.r{i}",)),
                            (f"the relation number {i} of ?entity1",), "template")

    ours = MemoryBank.build([record(i) for i in range(10)], HashingEmbedder(), sources=[("a",)] * 10)
    theirs = MemoryBank.build([record(i) for i in range(5, 20)], HashingEmbedder(), sources=[("b",)] * 15)
    both = ours.merged(theirs)
    assert len(both) == 20 and both.index.ntotal == 20
    assert both.sources[7] == ("a", "b") and both.sources[2] == ("a",) and both.sources[-1] == ("b",)
    hit = both.search("the relation number 17 of", 1)[0]
    assert hit[0].statement.id == "000000000017"
    assert abs(hit[2] - theirs.search("the relation number 17 of", 1)[0][2]) < 1e-5
    with pytest.raises(MemoryBankError, match="cannot merge"):
        ours.merged(MemoryBank(theirs.records, theirs.index, type("E", (), {"name": "other", "dim": 64})()))


def test_a_mixed_bank_keeps_both_describers_sentences_as_separate_rows(tmp_path):
    def statement(i: int) -> Statement:
        return Statement(f"{i:012d}", "1", f"?entity1 ns:x.r{i} ?entity2 .", (f"x.r{i}",))

    template = MemoryBank.build([MemoryRecord(statement(i), (f"the relation number {i} of ?entity1", f"words {i}"),
                                              "template") for i in range(6)], HashingEmbedder())
    llm = MemoryBank.build([MemoryRecord(statement(i), (f"?entity2 is what {i} links to ?entity1",), "llm:m")
                            for i in range(4)]
                           + [MemoryRecord(statement(4), (f"the relation number {4} of ?entity1", "words 4"),
                                           "template", "llm-invalid->template")], HashingEmbedder())
    mixed = llm.merged(template, descriptions=True)
    assert len(mixed) == 6 and mixed.index.ntotal == 4 * 3 + 2 + 2  # 4 with both, the fallback as it was, one new
    first = mixed.get("000000000001")
    assert first.descriptions == ("?entity2 is what 1 links to ?entity1", "the relation number 1 of ?entity1",
                                  "words 1") and first.describer == "llm:m+template"
    assert mixed.get("000000000004").describer == "template" and mixed.get("000000000004").fallback
    for text, bank in (("?entity2 is what 2 links to ?entity1", llm), ("the relation number 3 of", template)):
        hit, want = mixed.search(text, 1)[0], bank.search(text, 1)[0]
        assert hit[0].statement.id == want[0].statement.id and hit[1] == want[1] and abs(hit[2] - want[2]) < 1e-5
    assert mixed.info["describer"]["merged"] == [{}, {}]
    mixed.save(tmp_path / "mixed")
    again = MemoryBank.load(tmp_path / "mixed", HashingEmbedder())
    assert again.counts()["by_describer"] == {"llm:m+template": 4, "template": 2}
    assert llm.merged(template).index.ntotal == 4 + 2 + 2  # without descriptions=True: records as they were


def _numbered(i: int) -> MemoryRecord:
    return MemoryRecord(Statement(f"{i:012d}", "1", f"?entity1 ns:x.r{i} ?entity2 .", (f"x.r{i}",)),
                        (f"the relation number {i} of ?entity1", f"words {i} and {i * 3}"), "template")


def test_a_trimmed_bank_keeps_the_first_descriptions_with_their_own_vectors():
    for kind in ("flat", "sq8"):
        bank = MemoryBank.build([_numbered(i) for i in range(12)], HashingEmbedder(), index_type=kind)
        one = bank.trimmed(1)
        assert len(one) == 12 and one.index.ntotal == 12 and type(one.index) is type(bank.index)
        assert one.get("000000000005").descriptions == ("the relation number 5 of ?entity1",)
        got, want = one.search("the relation number 5 of", 1)[0], bank.search("the relation number 5 of", 1)[0]
        assert got[0].statement.id == want[0].statement.id == "000000000005" and abs(got[2] - want[2]) < 2e-2
        assert one.search("words 5 and 15", 1)[0][1] != "words 5 and 15"  # that row is gone
    with pytest.raises(ValueError, match="descriptions must be >= 1, got 0"):
        bank.trimmed(0)


def test_a_bank_includes_another_named_in_its_manifest(tmp_path):
    schema = MemoryBank.build([_numbered(i) for i in range(5, 30)], HashingEmbedder(), sources=[("schema",)] * 25,
                              index_type="sq8").trimmed(1)
    schema.save(tmp_path / "schema", compress=True)
    assert (tmp_path / "schema" / "statements.jsonl.gz").is_file()
    assert not (tmp_path / "schema" / "statements.jsonl").exists()
    train = MemoryBank.build([_numbered(i) for i in range(10)], HashingEmbedder(), sources=[("train",)] * 10)
    train.save(tmp_path / "train", include=["../schema"])
    assert json.loads((tmp_path / "train" / "manifest.json").read_text())["include"] == ["../schema"]

    alone = MemoryBank.load(tmp_path / "train", HashingEmbedder(), include=False)
    assert len(alone) == 10 and "included" not in alone.info
    both = MemoryBank.load(tmp_path / "train", HashingEmbedder())
    assert len(both) == 30 and both.info["included"] == [str(tmp_path / "train" / "../schema")]
    assert both.manifest["include"] == ["../schema"]  # the bank's own manifest, not the schema's
    assert both.get("000000000007").descriptions == train.get("000000000007").descriptions  # the bank's record wins
    assert both.sources[7] == ("train", "schema") and both.sources[-1] == ("schema",)
    hit = both.search("the relation number 21 of ?entity1", 1)[0]
    assert hit[0].statement.id == "000000000021" and hit[2] == pytest.approx(1.0, abs=2e-2)

    # the included bank is verified as any bank is, and a loop is refused by name
    gz = tmp_path / "schema" / "statements.jsonl.gz"
    data = gz.read_bytes()
    gz.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(MemoryBankError, match="statements.jsonl.gz: sha256 does not match"):
        MemoryBank.load(tmp_path / "train", HashingEmbedder())
    gz.write_bytes(data)
    manifest = tmp_path / "schema" / "manifest.json"
    m = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**m, "include": ["../train"]}))
    with pytest.raises(MemoryBankError, match="include '../train' includes itself"):
        MemoryBank.load(tmp_path / "train", HashingEmbedder())
    manifest.write_text(json.dumps({**m, "include": "../train"}))
    with pytest.raises(MemoryBankError, match="include must be a list of bank paths"):
        MemoryBank.load(tmp_path / "train", HashingEmbedder())
    with pytest.raises(MemoryBankError, match="holds no memory bank"):
        train.save(tmp_path / "other", include=["../nowhere"])
    with pytest.raises(MemoryBankError, match="relative to the bank"):
        train.save(tmp_path / "other", include=[str(tmp_path / "schema")])


def test_equal_descriptions_get_one_vector_and_stay_tied_when_quantised_or_merged():
    """A relation and its reverse property share a description; their scores must tie exactly (recall's TIE is
    1e-4) after sq8 and across a flat bank and the sq8 bank it includes."""
    def pair(i: int) -> list[MemoryRecord]:
        text = f"?entity2 is the thing number {i} of ?entity1"
        return [MemoryRecord(Statement(f"{i:06d}fwd", "1", f"?entity1 ns:x.r{i} ?entity2 .", (f"x.r{i}",)),
                             (text,), "template"),
                MemoryRecord(Statement(f"{i:06d}rev", "1", f"?entity2 ns:x.r{i} ?entity1 .", (f"x.r{i}",)),
                             (text,), "template")]

    class BatchNoise(HashingEmbedder):
        """As a real encoder: the same text comes out a little different in another batch (padding)."""
        calls = 0

        def encode(self, texts):
            BatchNoise.calls += 1
            out = super().encode(texts)
            out[:, 0] += 1e-3 * BatchNoise.calls
            return out / np.linalg.norm(out, axis=1, keepdims=True)

    records = [r for i in range(40) for r in pair(i)]
    sq8 = MemoryBank.build(records, BatchNoise(), index_type="sq8", batch_size=7)  # pairs split across batches
    vecs = sq8.index.reconstruct_n(0, sq8.index.ntotal)
    assert all(np.array_equal(vecs[2 * i], vecs[2 * i + 1]) for i in range(40))
    hits = sq8.search("?entity2 is the thing number 13 of ?entity1", 2)
    assert {h[0].statement.id for h in hits} == {"000013fwd", "000013rev"} and hits[0][2] == hits[1][2]
    own = MemoryBank.build([records[26]], HashingEmbedder())  # number 13 forward, flat
    both = own.merged(sq8)
    hits = both.search("?entity2 is the thing number 13 of ?entity1", 2)
    assert {h[0].statement.id for h in hits} == {"000013fwd", "000013rev"} and hits[0][2] == hits[1][2]


def test_free_planners_read_a_bank_without_what_it_includes(tmp_path):
    """Grounded and given (oracle) plans name statements and read the schema a bank includes; free plans, whose
    wording drifts to it, read the bank alone (FREE_PLANNERS, chosen on dev: docs/results.md)."""
    from memq.pipeline import FREE_PLANNERS, Config, Pipeline

    MemoryBank.build([_numbered(i) for i in range(5, 9)], HashingEmbedder()).save(tmp_path / "schema")
    MemoryBank.build([_numbered(i) for i in range(3)], HashingEmbedder()).save(tmp_path / "train",
                                                                             include=["../schema"])
    sizes = {kind: len(Pipeline(Config(memory=str(tmp_path / "train"), planner=kind)).bank)
             for kind in ("given", "grounded", *FREE_PLANNERS)}
    assert sizes == {"given": 7, "grounded": 7, "fewshot": 3, "finetuned": 3, "hybrid": 3}
    # CWQ's grounded planner had no dev run with the schema: it reads the bank alone (BANK_ALONE); given plans do not
    cwq = {kind: len(Pipeline(Config(memory=str(tmp_path / "train"), planner=kind, planner_dataset="cwq")).bank)
           for kind in ("given", "grounded")}
    assert cwq == {"given": 7, "grounded": 3}
