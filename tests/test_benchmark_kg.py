"""The benchmark KG builder (memq.benchmark): built from the 40 fixture questions, checked on Oxigraph."""

from __future__ import annotations

import gzip
import json

import pytest

from memq.benchmark import GRAPH_REAL, GRAPH_SYNTHETIC, MARKER, build_graph
from memq.benchmark.eval import XSD_DATETIME, Env, holds
from memq.benchmark.values import TEMPORAL, literal_for_answer
from memq.datasets import GoldParse, GoldQuestion, data_path, load
from memq.kg import OxigraphStore
from memq.kg.check import answer_key, check_gold, result_keys, same_answers
from memq.sparql import parse_query, to_standard
from memq.sparql.model import Iri, Literal

SYN = "http://memq.dev/synthetic/"
NAME = "<http://rdf.freebase.com/ns/type.object.name>"
PREFIX = "PREFIX ns: <http://rdf.freebase.com/ns/>\n"


def fixture_questions() -> list[GoldQuestion]:
    """The 40 questions of data/fixtures (16 WebQSP train, 16 WebQSP test, 8 CWQ test)."""
    ids: set[str] = set()
    for name in ("webqsp_train_fixture.json", "webqsp_test_fixture.json"):
        ids |= {q["QuestionId"] for q in json.loads(data_path("fixtures", name).read_text())["Questions"]}
    ids |= {r["ID"] for r in json.loads(data_path("fixtures", "cwq_test_fixture.json").read_text())}
    return [q for q in load("webqsp", "all") + load("cwq", "test") if q.id in ids]


@pytest.fixture(scope="module")
def questions():
    qs = fixture_questions()
    assert len(qs) == 40
    return qs


@pytest.fixture(scope="module")
def fb15k237(questions, tmp_path_factory):
    """data/fb15k237 cut down to the triples at the fixture questions' entities (the whole set takes minutes)."""
    mids = {f"/{m.replace('.', '/')}" for q in questions for p in q.parses
            for m, _ in list(p.topic_entities) + list(p.answers or ())}
    folder = tmp_path_factory.mktemp("fb15k237")

    def rows(name):
        with gzip.open(data_path("fb15k237", name), "rt", encoding="utf-8") as fh:
            return fh.read().splitlines()[1:]

    def write(name, lines):
        with gzip.open(folder / name, "wt", encoding="utf-8") as fh:
            fh.write(f"{len(lines)}\n" + "".join(line + "\n" for line in lines))

    entities = rows("entity2id.txt.gz")
    keep = {line.split("\t")[1] for line in entities if line.split("\t")[0] in mids}
    write("entity2id.txt.gz", entities)
    write("relation2id.txt.gz", rows("relation2id.txt.gz"))
    for name in ("train2id.txt.gz", "valid2id.txt.gz", "test2id.txt.gz"):
        write(name, [line for line in rows(name) if keep & set(line.split()[:2])])
    return folder


@pytest.fixture(scope="module")
def built(questions, fb15k237, tmp_path_factory):
    build = build_graph(questions, fb15k237=fb15k237)
    path = tmp_path_factory.mktemp("kg") / "benchmark.nq.gz"
    build.write(path)
    return build, path


@pytest.fixture(scope="module")
def store(built):
    return OxigraphStore.from_file(built[1])


def test_materialised_gold_queries_return_exactly_gold_on_the_written_graph(built, store):
    build, _ = built
    ok = [it for it in build.items if it.status == "ok"]
    assert len(ok) >= 40, [(it.key, it.reason) for it in build.items if it.status != "ok"]
    for it in ok:
        query = parse_query(it.parse.sparql)
        got = result_keys(store.select(to_standard(query)), query.answer_var.name)
        assert same_answers(got, [answer_key(a) for a, _ in it.parse.answers]), it.key


def test_check_gold_agrees_and_constraints_matter(questions, built, store):
    summary = check_gold(store, questions, drop_constraint=True, timeout=None)
    assert summary["exact"] >= built[0].report_data["materialised"]
    assert summary["constraint_pairs"] >= 40
    assert summary["changed"] / summary["constraint_pairs"] >= 0.9
    report = built[0].report_data
    assert report["constraint_pairs"] == summary["constraint_pairs"]


def test_unmaterialisable_queries_are_listed_with_a_reason(built):
    report = built[0].report_data
    failed = [it for it in built[0].items if it.status != "ok"]
    assert len(report["failures"]) == len(failed)
    assert all(f["reason"] for f in report["failures"])
    assert sum(report["failure_reasons"].values()) == len(failed)


def test_fb15k237_triples_at_the_fixture_entities_are_in_the_real_graph(built):
    build, _ = built
    assert build.stats["fb15k237_triples"] > 100
    fb15k = [k for k, info in build.graph.info.items() if info.source.startswith("fb15k237:")]
    assert len(fb15k) + sum(build.dropped_real.values()) >= build.stats["fb15k237_triples"] * 0.9
    assert all(build.graph.info[k].real for k in fb15k)


def test_graphs_marker_names_and_synthetic_namespace(built):
    build, path = built
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    assert lines == sorted(lines)
    graphs = {line.rsplit(" ", 2)[-2] for line in lines}
    assert graphs == {f"<{GRAPH_REAL}>", f"<{GRAPH_SYNTHETIC}>"}
    marker = [line for line in lines if line.startswith(f"<{MARKER}>")]
    assert any("not Freebase" in line and line.endswith(f"<{GRAPH_SYNTHETIC}> .") for line in marker)
    # invented nodes live in the memq namespace, never as look-alike Freebase mids
    assert not any("ns/m.memq" in line for line in lines)
    assert any(line.startswith(f"<{SYN}cvt_") for line in lines)
    # CVT nodes have no name; synthetic entities have an English one
    assert not any(line.startswith(f"<{SYN}cvt_") and NAME in line for line in lines)
    assert any(line.startswith(f"<{SYN}ent_") and NAME in line and '"@en' in line for line in lines)
    real = [line for line in lines if line.endswith(f"<{GRAPH_REAL}> .")]
    assert len(real) == build.report_data["triples_real"]
    assert not any(SYN in line for line in real)


def test_build_is_deterministic(questions, built, fb15k237, tmp_path):
    again = build_graph(questions, fb15k237=fb15k237)
    path = tmp_path / "again.nq.gz"
    again.write(path)
    assert path.read_bytes() == built[1].read_bytes()


def test_value_answers_become_padded_datetimes_that_match_gold():
    lit = literal_for_answer("1841-03-04", TEMPORAL)
    assert lit == Literal("1841-03-04T00:00:00", XSD_DATETIME)
    assert literal_for_answer("2005", TEMPORAL).value == "2005-01-01T00:00:00"
    assert literal_for_answer("AUD", None) == Literal("AUD")
    assert same_answers([answer_key(lit)], [answer_key("1841-03-04")])


def test_time_filter_evaluates_like_oxigraph():
    query = parse_query(PREFIX + "SELECT ?x WHERE { ?y ns:people.marriage.spouse ?x . "
                        "FILTER(NOT EXISTS {?y ns:people.marriage.from ?sk0} || "
                        "EXISTS {?y ns:people.marriage.from ?sk1 . "
                        "FILTER(xsd:datetime(?sk1) <= \"2015-08-10\"^^xsd:dateTime) }) }")
    time_filter = query.where.filters[0]
    y = Iri(SYN + "cvt_1")

    def env(values):
        return Env({"y": y}, lambda s, p: values if s == y else [])

    assert holds(time_filter, env([]))  # no date: NOT EXISTS holds
    assert holds(time_filter, env([Literal("2014-08-10T00:00:00", XSD_DATETIME)]))
    assert holds(time_filter, env([Literal("2014", "http://www.w3.org/2001/XMLSchema#gYear")]))  # padded cast
    assert not holds(time_filter, env([Literal("2016-08-10T00:00:00", XSD_DATETIME)]))


def _question(qid: str, sparql: str, answers: list[tuple[str, str]]) -> GoldQuestion:
    return GoldQuestion(qid, qid, "webqsp", "test", (GoldParse(qid + ".P0", sparql, (), tuple(answers)),))



def test_contradictory_gold_answers_are_reported_not_hidden():
    same = PREFIX + "SELECT DISTINCT ?x WHERE { ns:m.0test1 ns:people.person.children ?x . }"
    questions = [_question("Q1", same, [("m.0kid1", "Kid One")]),
                 _question("Q2", same, [("m.0kid2", "Kid Two")])]
    build = build_graph(questions, real_triples=False)
    status = {it.key: it for it in build.items}
    assert sorted(it.status for it in status.values()) == ["failed", "ok"]
    failed = next(it for it in status.values() if it.status == "failed")
    assert failed.reason.startswith("conflict")


def test_constraint_triple_and_order_get_distractors():
    constrained = (PREFIX + "SELECT DISTINCT ?x WHERE { ns:m.0test1 ns:people.person.children ?x . "
                   "?x ns:people.person.gender ns:m.05zppz . }")
    ordered = (PREFIX + "SELECT DISTINCT ?x WHERE { ns:m.0test2 ns:sports.sports_team.championships ?x . "
               "?x ns:time.event.end_date ?d . } ORDER BY DESC(?d) LIMIT 1")
    timed = (PREFIX + "SELECT DISTINCT ?x WHERE { ns:m.0test3 ns:people.person.spouse_s ?y . "
             "?y ns:people.marriage.spouse ?x . "
             "FILTER(NOT EXISTS {?y ns:people.marriage.from ?sk0} || EXISTS {?y ns:people.marriage.from ?sk1 . "
             "FILTER(xsd:datetime(?sk1) <= \"2015-08-10\"^^xsd:dateTime) }) }")
    questions = [_question("C", constrained, [("m.0son", "Son")]),
                 _question("O", ordered, [("m.0ws2010", "2010 World Series")]),
                 _question("T", timed, [("m.0wife", "Wife")])]
    build = build_graph(questions, real_triples=False)
    report = build.report_data
    assert report["materialised"] == 3, report["failures"]
    assert report["constraint_pairs"] == report["constraint_pairs_changed"] == 3
    # the ordered gold answer's date falls in the year its name holds
    dates = [o.value for (s, p, o) in build.graph.info
             if s.value.endswith("m.0ws2010") and p.local.endswith("end_date")]
    assert dates and dates[0].startswith("2010-")
