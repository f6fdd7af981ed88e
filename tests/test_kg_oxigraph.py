"""OxigraphStore: loading, term conventions, dialect, names, timeouts, errors."""

from __future__ import annotations

import gzip
import logging
import time

import pyoxigraph as ox
import pytest
from kg_sample import sample_questions, write_sample

from memq.errors import KnowledgeGraphError
from memq.kg import KnowledgeGraph, OxigraphConfig, OxigraphStore
from memq.kg.dialect import _shim_to_standard
from memq.sparql.model import FB, XSD, Iri, Literal

EX = "http://example.org/"
PREFIX_NS = "PREFIX ns: <http://rdf.freebase.com/ns/>\n"


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    path = tmp_path_factory.mktemp("kg") / "sample.nq.gz"
    ids = write_sample(path, 40)
    return path, ids


@pytest.fixture(scope="module")
def sample_store(sample):
    return OxigraphStore.from_file(sample[0])


def _big_store(n: int = 3000) -> OxigraphStore:
    store = OxigraphStore()
    store._store.extend(ox.Quad(ox.NamedNode(f"{EX}s{i}"), ox.NamedNode(f"{EX}p"), ox.Literal(str(i)),
                                ox.DefaultGraph()) for i in range(n))
    return store


CROSS = (f"SELECT (COUNT(*) AS ?n) WHERE {{ ?a <{EX}p> ?x . ?b <{EX}p> ?y . ?c <{EX}p> ?z . "
         f"FILTER(?x != ?y) }}")


def test_is_a_knowledge_graph(sample_store):
    assert isinstance(sample_store, KnowledgeGraph)


def test_load_formats_and_counts(tmp_path):
    nt = tmp_path / "a.nt"
    nt.write_text(f'<{EX}a> <{EX}p> "x" .\n<{EX}a> <{EX}q> <{EX}b> .\n')
    nq = tmp_path / "b.nq.gz"
    with gzip.open(nq, "wt") as fh:
        fh.write(f'<{EX}c> <{EX}p> "y"@en <{EX}g1> .\n<{EX}d> <{EX}p> "z" <{EX}g2> .\n<{EX}e> <{EX}p> "w" .\n')
    ttl = tmp_path / "c.ttl"
    ttl.write_text(f"@prefix ex: <{EX}> .\nex:f ex:p 7 .\n")
    store = OxigraphStore()
    assert store.load(nt) == 2
    assert store.load(nq) == 3
    assert store.load(ttl, graph=f"{EX}g3") == 1
    assert len(store) == 6
    # the default graph is the union of all graphs: named-graph triples answer plain patterns
    rows = store.select(f"SELECT ?s WHERE {{ ?s <{EX}p> ?o }}")
    assert {r["s"].value for r in rows} == {f"{EX}{x}" for x in "acdef"}


def test_unknown_format_and_missing_file(tmp_path):
    with pytest.raises(ValueError, match="unknown RDF file type 'x.csv'"):
        OxigraphStore().load(tmp_path / "x.csv")
    with pytest.raises(KnowledgeGraphError, match="not found"):
        OxigraphStore().load(tmp_path / "missing.nt")


def test_term_conventions(tmp_path):
    nt = tmp_path / "t.nt"
    nt.write_text(f'<{EX}a> <{EX}p> "plain" .\n<{EX}a> <{EX}p> "typed"^^<{XSD}string> .\n'
                  f'<{EX}a> <{EX}p> "Hi"@EN .\n<{EX}a> <{EX}p> "2009"^^<{XSD}gYear> .\n')
    store = OxigraphStore.from_file(nt)
    got = {r["o"] for r in store.select(f"SELECT ?o WHERE {{ <{EX}a> <{EX}p> ?o }}")}
    assert got == {Literal("plain"), Literal("typed"), Literal("Hi", None, "en"), Literal("2009", XSD + "gYear")}
    count = store.select(f"SELECT (COUNT(*) AS ?n) ?unbound WHERE {{ ?s <{EX}p> ?o }}")
    assert count == [{"n": Literal("4", XSD + "integer")}]


def test_gold_dialect_query_runs_as_written(sample_store):
    (question,) = sample_questions(["WebQTest-0"])
    parse = question.parses[0]
    assert " OR " in parse.sparql and "ns:location.country.languages_spoken" in parse.sparql
    rows = sample_store.select(parse.sparql)
    assert {r["x"].local for r in rows} == {a for a, _ in parse.answers}


def test_names_prefers_english(tmp_path, sample_store):
    nt = tmp_path / "n.nt"
    nt.write_text(f'<{FB}m.1> <{FB}type.object.name> "Bonjour"@fr .\n'
                  f'<{FB}m.1> <{FB}type.object.name> "Hello"@en .\n'
                  f'<{FB}m.2> <{FB}type.object.name> "Plain" .\n'
                  f'<{FB}m.2> <{FB}type.object.name> "Hallo"@de .\n')
    store = OxigraphStore.from_file(nt)
    assert store.names(["m.1", "m.2", "m.3", Iri(FB + "m.1")]) == {"m.1": "Hello", "m.2": "Plain"}
    assert sample_store.names(["m.03_r3"]) == {"m.03_r3": "Jamaica"}
    with pytest.raises(ValueError, match="not a Freebase id"):
        store.names(["m.1> . ?s ?p ?o"])


def test_malformed_query_names_the_query(sample_store):
    bad = "SELECT ?x WHERE { ?x ns:people.person.gender "
    for timeout in (None, 5.0):
        with pytest.raises(KnowledgeGraphError, match="query: SELECT \\?x WHERE"):
            sample_store.select(bad, timeout=timeout)


def test_ask_is_not_a_select(sample_store):
    with pytest.raises(KnowledgeGraphError, match="not a SELECT"):
        sample_store.select("ASK { ?s ?p ?o }")


def test_slow_query_is_stopped_in_process_mode():
    store = _big_store()
    started = time.perf_counter()
    with pytest.raises(KnowledgeGraphError, match="timed out after 0.5 s .*query: SELECT \\(COUNT"):
        store.select(CROSS, timeout=0.5)
    assert time.perf_counter() - started < 5
    worker = store._worker
    assert worker is None  # killed, not left running
    # the next timed query gets a fresh worker and works
    assert store.select(f"SELECT ?o WHERE {{ <{EX}s7> <{EX}p> ?o }}", timeout=5) == [{"o": Literal("7")}]
    assert store._worker is not None and store._worker.is_alive()
    store.close()
    assert store._worker is None


def test_slow_query_times_out_in_thread_mode():
    store = _big_store(2000)
    store.config = OxigraphConfig(timeout_mode="thread")
    store._mode = "thread"
    streaming = f"SELECT ?x ?y WHERE {{ ?a <{EX}p> ?x . ?b <{EX}p> ?y . FILTER(?x != ?y) }}"
    with pytest.raises(KnowledgeGraphError, match="timed out after 0.2 s"):
        store.select(streaming, timeout=0.2)


def test_default_timeout_from_config():
    store = _big_store()
    store.config = OxigraphConfig(timeout=0.3)
    with pytest.raises(KnowledgeGraphError, match="timed out after 0.3 s"):
        store.select(CROSS)
    store.close()
    with pytest.raises(ValueError, match="timeout_mode"):
        OxigraphConfig(timeout_mode="signal")


def test_on_disk_store_and_cache(tmp_path, sample):
    data, _ = sample
    disk = OxigraphStore(tmp_path / "db")
    n = disk.load(data)
    assert n == len(disk) > 200
    del disk
    reopened = OxigraphStore(tmp_path / "db", read_only=True)
    assert len(reopened) == n
    with pytest.raises(KnowledgeGraphError, match="read-only"):
        reopened.load(data)
    cached = OxigraphStore.cached(data, tmp_path / "cache")
    again = OxigraphStore.cached(data, tmp_path / "cache")
    assert cached.path == again.path and len(again) == n
    assert (cached.path / "memq-store.json").is_file()
    query = f"SELECT ?x WHERE {{ <{FB}m.03_r3> <{FB}location.country.languages_spoken> ?x }}"
    assert len(again.select(query, timeout=10)) == 2  # read-only worker process
    again.close()


def test_virtuoso_style_datetime_cast(tmp_path):
    nt = tmp_path / "d.nt"
    nt.write_text(f'<{EX}y> <{EX}from> "2009"^^<{XSD}gYear> .\n'
                  f'<{EX}m> <{EX}from> "2009-05"^^<{XSD}gYearMonth> .\n'
                  f'<{EX}d> <{EX}from> "2009-05-03"^^<{XSD}date> .\n'
                  f'<{EX}t> <{EX}from> "2010-02-01T10:00:00"^^<{XSD}dateTime> .\n'
                  f'<{EX}x> <{EX}from> "soon" .\n')
    query = (f"PREFIX xsd: <{XSD}> SELECT ?s WHERE {{ ?s <{EX}from> ?v . "
             f'FILTER(xsd:datetime(?v) <= "2009-06-30"^^xsd:dateTime) }}')
    lenient = OxigraphStore.from_file(nt)
    assert {r["s"].value for r in lenient.select(query)} == {f"{EX}y", f"{EX}m", f"{EX}d"}
    strict = OxigraphStore.from_file(nt, config=OxigraphConfig(virtuoso_dates=False))
    assert {r["s"].value for r in strict.select(query)} == {f"{EX}d"}
    newest = (f"PREFIX xsd: <{XSD}> SELECT ?s WHERE {{ ?s <{EX}from> ?v . }} "
              f"ORDER BY DESC(xsd:datetime(?v)) LIMIT 2")
    assert [r["s"].value for r in lenient.select(newest, timeout=5)] == [f"{EX}t", f"{EX}d"]


def test_query_outside_the_parser_is_sent_unchanged_with_a_warning(sample_store, caplog):
    query = "SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }"
    with caplog.at_level(logging.WARNING, "memq.kg.dialect"):
        rows = sample_store.select(query)
    assert rows == [{"g": Iri("http://memq.dev/graph/real")}]
    assert "sending it unchanged" in caplog.text


def test_shim_rewrite_expands_prefixed_names():
    text = (PREFIX_NS + "SELECT ?x WHERE { ns:m.0abc ns:a.b.c ?x . ?x ns:d.e ns:m.1.\n"
            "FILTER(!isLiteral(?x) OR lang(?x) = 'OR' OR xsd:datetime(?x) > \"2000\"^^xsd:dateTime) }")
    out = _shim_to_standard(text)
    assert "ns:" not in out and "PREFIX" not in out
    assert f"<{FB}a.b.c>" in out and f"<{FB}m.1>." in out
    assert out.count("||") == 2 and "'OR'" in out
    assert out.count(f"<{XSD}dateTime>") == 2
    store = OxigraphStore()
    store.config = OxigraphConfig(rewrite=False)
    assert store.select(out) == []  # Oxigraph accepts the shim's output


def test_virtuoso_dates(tmp_path):
    nt = tmp_path / "a.nt"
    nt.write_text(f'<{EX}early> <{EX}from> "2001"^^<{XSD}gYear> .\n'
                  f'<{EX}late> <{EX}from> "2015-03-01"^^<{XSD}date> .\n'
                  f'<{EX}event> <{EX}start> "2010-06-01T00:00:00"^^<{XSD}dateTime> .\n')
    query = (f"PREFIX xsd: <{XSD}> SELECT ?s WHERE {{ ?s <{EX}from> ?f . <{EX}event> <{EX}start> ?a . "
             f"FILTER(xsd:datetime(?f) - xsd:datetime(?a) <= 0) }}")
    flipped = query.replace("xsd:datetime(?f) - xsd:datetime(?a) <= 0", "0 < xsd:datetime(?f) - xsd:datetime(?a)")
    store = OxigraphStore.from_file(nt)
    assert [r["s"].value for r in store.select(query)] == [f"{EX}early"]
    assert [r["s"].value for r in store.select(flipped, timeout=5)] == [f"{EX}late"]
    standard = OxigraphStore.from_file(nt, config=OxigraphConfig(virtuoso_dates=False))
    assert standard.select(query) == []  # a duration never compares with 0


def test_partial_datetime_constants_are_padded(tmp_path):
    nt = tmp_path / "m.nt"
    nt.write_text(f'<{EX}old> <{EX}established> "1891"^^<{XSD}gYear> .\n'
                  f'<{EX}new> <{EX}established> "1985-04-02"^^<{XSD}date> .\n')
    query = (f"PREFIX xsd: <{XSD}> SELECT ?s WHERE {{ ?s <{EX}established> ?num . "
             f'FILTER(xsd:datetime(?num) < "1971"^^xsd:dateTime) }}')
    assert [r["s"].value for r in OxigraphStore.from_file(nt).select(query)] == [f"{EX}old"]


def test_partial_datetime_in_a_triple_pattern_is_padded(tmp_path):
    # Virtuoso reads "1997"^^xsd:dateTime as 1997-01-01 in the data and in a triple pattern alike
    nt = tmp_path / "t.nt"
    nt.write_text(f'<{EX}flag> <{EX}adopted> "1997-01-01T00:00:00"^^<{XSD}dateTime> .\n')
    query = f'PREFIX xsd: <{XSD}> SELECT ?s WHERE {{ ?s <{EX}adopted> "1997"^^xsd:dateTime }}'
    assert [r["s"].value for r in OxigraphStore.from_file(nt).select(query)] == [f"{EX}flag"]
    strict = OxigraphStore.from_file(nt, config=OxigraphConfig(virtuoso_dates=False))
    assert strict.select(query) == []
