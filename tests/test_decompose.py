"""Decomposition into statements, on real gold queries."""

from __future__ import annotations

from memq import datasets
from memq.decompose import decompose, decompose_dataset, decompose_query, roundtrip_diff
from memq.decompose.check import check_queries
from memq.sparql import parse_query
from memq.sparql.model import Iri, Var


def _question(dataset, split, qid):
    return next(q for q in datasets.load(dataset, split) if q.id == qid)


def test_justin_bieber_brother_splits_into_a_cvt_statement_and_a_check():
    q = _question("webqsp", "train", "WebQTrn-0")
    p = q.parses[0]
    d = decompose_query(parse_query(p.sparql), q.id, ["m.06w2sn5"])
    s1, s2 = (b.statement for b in d.bounds)
    assert s1.structure == "2"
    assert s1.sparql == ("?entity1 ns:people.person.sibling_s ?cvt .\n"
                         "?cvt ns:people.sibling_relationship.sibling ?entity2 .")
    assert d.bounds[0].binding == {"?entity1": Iri("http://rdf.freebase.com/ns/m.06w2sn5"),
                                   "?entity2": Var("x"), "?cvt": Var("y")}
    assert s2.structure == "1" and d.bounds[1].check
    assert s2.sparql == "?entity1 ns:people.person.gender ?entity2 ."
    assert len(d.boilerplate) == 2  # language filter and ?x != topic
    assert roundtrip_diff(d) is None


def test_cvt_with_a_third_edge_is_structure_3():
    q = _question("webqsp", "train", "WebQTrn-26")  # lebron james came to the nba
    [b] = decompose_query(parse_query(q.parses[0].sparql), q.id, ["m.01jz6d"]).bounds
    assert b.statement.structure == "3"
    assert b.binding["?entity3"] == Var("x") and b.binding["?entity2"].local == "m.02yqnh"


def test_time_filter_and_order_become_constraint_statements():
    q = _question("webqsp", "test", "WebQTest-994")  # last time the Dallas Cowboys won the superbowl
    d = decompose_query(parse_query(q.parses[0].sparql), q.id, [m for m, _ in q.parses[0].topic_entities])
    kinds = [b.statement.structure for b in d.bounds]
    assert kinds[-1] == "order"
    assert d.bounds[-1].statement.sparql.startswith("ORDER BY DESC(")
    assert roundtrip_diff(d) is None


def test_statements_are_deduplicated_across_queries_with_their_question_ids():
    questions = [q for q in datasets.load("webqsp", "train")[:300]]
    statements = decompose_dataset(questions)
    ids = [s.id for s in statements]
    assert len(ids) == len(set(ids))
    nationality = next(s for s in statements if s.sparql == "?entity1 ns:people.person.nationality ?entity2 .")
    assert len(nationality.question_ids) > 1
    assert all(qid.startswith("WebQTrn-") for s in statements for qid in s.question_ids)


def test_decompose_returns_statements_tagged_with_the_question():
    q = _question("webqsp", "train", "WebQTrn-0")
    statements = decompose(parse_query(q.parses[0].sparql), q.id)
    assert [s.question_ids for s in statements] == [("WebQTrn-0",), ("WebQTrn-0",)]


def test_webqsp_all_round_trips_except_aggregate_queries():
    report = check_queries("webqsp", "all")
    assert report["queries"] == report["parsed"] == 5268
    assert report["roundtrip"] + len(report["failures"]) == 5268
    assert all("aggregate" in f["reason"] for f in report["failures"])
    assert len(report["failures"]) == 11
    assert sum(report["distinct_statements"].values()) > 700


def test_cwq_test_round_trips():
    report = check_queries("cwq", "test")
    assert report["queries"] == report["parsed"] == report["roundtrip"] == 3531
