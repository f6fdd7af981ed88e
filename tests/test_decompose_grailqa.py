"""GrailQA's query form: class constraints, VALUES, counts, comparisons and superlatives as statements.

The hand-written queries below are in GrailQA's own form. Besides the round trip (statements -> the same plain
query), every real GrailQA gold query is executed before and after on small random graphs (pyoxigraph): the
reassembled query must give the same answers as the gold query in its original form.
"""

from __future__ import annotations

import random

import pytest
from grail_graphs import answers, random_graph, store

from memq import datasets
from memq.decompose import decompose_query, roundtrip_diff
from memq.decompose.assemble import assemble
from memq.decompose.check import check_queries
from memq.decompose.forms import read_form
from memq.errors import DecompositionError
from memq.sparql import parse_query, to_standard
from memq.sparql.model import FB, XSD, Call, Iri, Literal, Triple, Var, walk_exprs

HEAD = "PREFIX : <http://rdf.freebase.com/ns/>\n"


def grail(body: str, select: str = "?x0 AS ?value") -> str:
    return HEAD + f"SELECT ({select}) WHERE {{\nSELECT DISTINCT ?x0 WHERE {{\n{body}\n}}\n}}"


BUILDINGS = grail("""?x0 :type.object.type :architecture.building .
FILTER (?x1 < "9"^^<http://www.w3.org/2001/XMLSchema#integer>)
?x0 :architecture.building.floors ?x1 .
FILTER ( ?x0 != ?x1 )""")

ROUTED_DRUG = grail("""?x0 :type.object.type :medicine.routed_drug .
VALUES ?x1 { :m.0hqs1x_ }
?x0 :medicine.routed_drug.marketed_formulations ?x1 .
FILTER ( ?x0 != ?x1 )""")

CURATED = grail("""?x0 :type.object.type :exhibitions.exhibition_subject .
?x1 :type.object.type :exhibitions.exhibition .
VALUES ?x2 { :m.05x9lqc }
?x0 :exhibitions.exhibition_subject.exhibitions_created_about_this_subject ?x1 .
?x2 :exhibitions.exhibition_curator.exhibitions_curated ?x1 .
FILTER ( ?x0 != ?x1 && ?x0 != ?x2 && ?x1 != ?x2 )""", "COUNT(?x0) AS ?value")

MOST_ENERGY = grail("""?x0 :type.object.type :food.food .
{
SELECT (MAX(?y1) AS ?x1) WHERE {
?y0 :type.object.type :food.food .
?y0 :food.food.energy ?y1 .
FILTER ( ?y0 != ?y1 )
}
}
?x0 :food.food.energy ?x1 .
FILTER ( ?x0 != ?x1 )""")

TV_WRITER = grail("""?x0 :type.object.type :tv.tv_writer .
?x1 :type.object.type :tv.tv_program_writer_relationship .
VALUES ?x2 { :m.04x4gj }
?x0 :tv.tv_writer.tv_programs ?x1 .
?x1 :tv.tv_program_writer_relationship.tv_program ?x2 .
FILTER ( ?x0 != ?x1 && ?x0 != ?x2 && ?x1 != ?x2 )""")


def _decompose(text: str, topics=()):
    return decompose_query(parse_query(text), "q", list(topics))


def _kinds(d) -> list[str]:
    return [b.statement.structure for b in d.bounds]


def test_the_wrapper_is_not_an_aggregate_and_values_name_the_topic_entity():
    d = _decompose(ROUTED_DRUG, ["m.0hqs1x_"])
    topic = Iri(FB + "m.0hqs1x_")
    assert d.topic == topic
    assert d.query.projection[0].var == Var("x0") and d.query.projection[0].expr is None and d.query.distinct
    assert not d.query.where.values
    assert Triple(Var("x0"), Iri(FB + "medicine.routed_drug.marketed_formulations"), topic) in d.query.where.triples
    assert _kinds(d) == ["1", "class"]
    path, cls = d.bounds
    assert path.binding == {"?entity1": topic, "?entity2": Var("x0")}
    assert roundtrip_diff(d) is None


def test_a_class_constraint_is_a_class_statement():
    d = _decompose(ROUTED_DRUG, ["m.0hqs1x_"])
    cls = d.bounds[1]
    assert cls.statement.sparql == "?entity1 ns:type.object.type ns:medicine.routed_drug ."
    assert cls.binding == {"?entity1": Var("x0")} and cls.check  # ?x0 is known by then: a check
    assert cls.statement.relations == ("type.object.type",)


def test_without_a_topic_entity_the_answers_class_starts_the_query():
    d = _decompose(BUILDINGS)
    assert d.topic is None
    assert _kinds(d) == ["class", "1", "filter"]
    first, floors, less = d.bounds
    assert first.binding == {"?entity1": Var("x0")} and not first.check  # finds the buildings
    assert floors.binding == {"?entity1": Var("x0"), "?entity2": Var("x1")}
    assert less.statement.sparql == "FILTER(?entity1 < ?value)"
    assert less.binding["?value"] == Literal("9", XSD + "integer")
    assert roundtrip_diff(d) is None


def test_the_pairwise_distinct_filter_is_boilerplate():
    d = _decompose(CURATED, ["m.05x9lqc"])
    [distinct] = d.boilerplate
    assert {c.op for c in walk_exprs(distinct) if isinstance(c, Call)} == {"&&", "!="}
    assert "filter" not in _kinds(d)


def test_count_is_a_count_statement_and_the_projection_comes_back():
    d = _decompose(CURATED, ["m.05x9lqc"])
    assert _kinds(d)[-1] == "count"
    count = d.bounds[-1]
    assert count.statement.sparql == "COUNT(DISTINCT ?entity1)" and count.binding == {"?entity1": Var("x0")}
    rebuilt = assemble(d.bounds, d.query, d.boilerplate)
    assert rebuilt.projection[0].expr == Call("COUNT", (Var("x0"),), distinct=True)
    assert roundtrip_diff(d) is None
    # without the count statement the round trip notices
    d.bounds = d.bounds[:-1]
    assert roundtrip_diff(d) is not None


def test_a_superlative_subquery_is_a_superlative_statement():
    d = _decompose(MOST_ENERGY)
    assert _kinds(d) == ["class", "1", "superlative"]
    top = d.bounds[-1]
    assert top.statement.sparql == "MAX(?entity1)" and top.binding == {"?entity1": Var("x1")}
    rebuilt = assemble(d.bounds, d.query, d.boilerplate)
    [sub] = rebuilt.where.subqueries
    assert sub.projection[0].var == Var("x1") and sub.projection[0].expr.op == "MAX"
    assert len(sub.where.triples) == 2  # the class and the energy, on variables of its own
    assert roundtrip_diff(d) is None
    d.bounds = d.bounds[:-1]
    assert "superlatives" in roundtrip_diff(d)


def test_a_superlative_over_another_pattern_is_refused():
    other = MOST_ENERGY.replace("?y0 :food.food.energy ?y1", "?y0 :food.food.calories ?y1")
    with pytest.raises(DecompositionError, match="superlative"):
        _decompose(other)


def test_a_cvt_nodes_class_stays_inside_its_structure_2_statement():
    d = _decompose(TV_WRITER, ["m.04x4gj"])
    assert _kinds(d) == ["2", "class"]
    star = d.bounds[0].statement
    assert "?cvt ns:type.object.type ns:tv.tv_program_writer_relationship ." in star.sparql.splitlines()
    assert d.bounds[0].binding["?cvt"] == Var("x1")
    assert roundtrip_diff(d) is None


def test_literal_values_become_a_checked_constant():
    text = grail("""?x0 :type.object.type :business.shopping_center .
VALUES ?x1 { "72000"^^<http://www.w3.org/2001/XMLSchema#integer> }
?x0 :business.shopping_center.retail_floor_space_m_2 ?x1 .
FILTER ( ?x0 != ?x1 )""")
    d = _decompose(text)
    assert _kinds(d) == ["class", "1"]
    assert d.bounds[1].check and d.bounds[1].binding["?entity2"] == Literal("72000", XSD + "integer")
    assert roundtrip_diff(d) is None


def test_queries_in_other_forms_are_read_as_they_are():
    webqsp = "PREFIX ns: <http://rdf.freebase.com/ns/>\nSELECT DISTINCT ?x WHERE { ?x ns:type.object.type ns:a.b . }"
    assert not read_form(parse_query(webqsp)).grail
    d = _decompose(webqsp)
    assert _kinds(d) == ["1"]  # not a class statement outside GrailQA's form: WebQSP's decomposition is kept
    count = "PREFIX ns: <http://rdf.freebase.com/ns/>\nSELECT (COUNT(DISTINCT ?x) AS ?n) WHERE { ns:m.1 ns:a.b.c ?x }"
    with pytest.raises(DecompositionError, match="aggregates"):
        _decompose(count)


# -- every real GrailQA gold query: round trip, and the same answers on random graphs ------------------------


def test_grailqa_queries_decompose_and_round_trip():
    report = check_queries("grailqa", "all")
    assert report["queries"] == report["parsed"] == 1349
    assert report["roundtrip"] >= 0.99 * 1349, report["failures"][:5]
    assert report["statements"]["class"] > 0 and report["statements"]["count"] == 52
    assert report["statements"]["superlative"] == 140


def test_reassembled_grailqa_queries_answer_as_the_gold_queries_do():
    rng = random.Random(35)
    checked = nonempty = 0
    for q in datasets.load("grailqa", "all"):
        p = q.parses[0]
        gold = parse_query(p.sparql)
        d = decompose_query(gold, q.id, [m for m, _ in p.topic_entities])
        rebuilt = assemble(d.bounds, d.query, d.boilerplate)
        for _ in range(3):
            graph = store(random_graph(gold, rng))
            expected = answers(graph, gold)
            assert answers(graph, rebuilt) == expected, (q.id, to_standard(rebuilt))
            checked += 1
            nonempty += bool(expected) and expected != ['"0"^^<http://www.w3.org/2001/XMLSchema#integer>']
    assert checked == 3 * 1349
    assert nonempty > checked // 2  # the graphs give answers, so the comparison says something
