"""The SPARQL layer on hand-written cases: dialect rewrites, model, errors."""

from __future__ import annotations

import pyoxigraph
import pytest
from rdflib.plugins.sparql.parser import parseQuery

from memq.errors import SparqlParseError
from memq.sparql import parse_query, to_readable, to_standard
from memq.sparql.model import FB, XSD, Call, Exists, Iri, Literal, Triple, Var

TIME_QUERY = """PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?x
WHERE {
FILTER (?x != ns:m.0c2yrf)
FILTER (!isLiteral(?x) OR lang(?x) = '' OR langMatches(lang(?x), 'en'))
ns:m.0c2yrf ns:sports.pro_athlete.teams ?y .
?y ns:sports.sports_team_roster.team ?x .
FILTER(NOT EXISTS {?y ns:sports.sports_team_roster.from ?sk0} ||
EXISTS {?y ns:sports.sports_team_roster.from ?sk1 .
FILTER(xsd:datetime(?sk1) <= "2015-08-10"^^xsd:dateTime) })
}
ORDER BY DESC(xsd:datetime(?x))
LIMIT 1
OFFSET 2
"""


def test_dialect_is_rewritten_while_parsing():
    q = parse_query(TIME_QUERY)
    assert q.distinct and q.answer_var == Var("x")
    assert Triple(Iri(FB + "m.0c2yrf"), Iri(FB + "sports.pro_athlete.teams"), Var("y")) in q.where.triples
    lang_filter = q.where.filters[1]
    assert isinstance(lang_filter, Call) and lang_filter.op == "||"  # OR -> ||
    time_filter = q.where.filters[2]
    assert isinstance(time_filter.args[0], Exists) and time_filter.args[0].negated
    inner = time_filter.args[1].pattern.filters[0]
    assert inner.args[0].op == XSD + "dateTime"  # xsd:datetime -> xsd:dateTime
    assert inner.args[1] == Literal("2015-08-10", datatype=XSD + "dateTime")
    assert q.order_by[0].descending and (q.limit, q.offset) == (1, 2)


def test_standard_form_uses_full_iris_and_is_accepted_by_both_engines():
    text = to_standard(TIME_QUERY)
    assert "ns:" not in text and " OR " not in text and "datetime" not in text
    assert '"2015-08-10T00:00:00"^^<http://www.w3.org/2001/XMLSchema#dateTime>' in text
    pyoxigraph.Store().query(text)
    parseQuery(text)


def test_readable_form_round_trips_to_the_same_model():
    q = parse_query(TIME_QUERY)
    readable = to_readable(q)
    assert "ns:sports.pro_athlete.teams" in readable
    assert parse_query(readable) == q


def test_count_distinct_gets_an_alias():
    q = parse_query("PREFIX ns: <http://rdf.freebase.com/ns/> SELECT COUNT DISTINCT ?x WHERE { ns:m.1 ns:a.b ?x }")
    assert q.projection[0].var == Var("count")
    assert q.projection[0].expr == Call("COUNT", (Var("x"),), distinct=True)
    assert "(COUNT(DISTINCT ?x) AS ?count)" in to_standard(q)


def test_union_order_and_values():
    q = parse_query("PREFIX ns: <http://rdf.freebase.com/ns/> SELECT ?x WHERE { { ns:m.1 ns:a.b ?x } UNION "
                    "{ ?x ns:a.c ns:m.1 . } } ORDER BY ?x LIMIT 3")
    assert len(q.where.unions) == 1 and len(q.where.unions[0]) == 2
    assert q.limit == 3 and not q.order_by[0].descending
    pyoxigraph.Store().query(to_standard(q))


def test_implicit_group_by_of_virtuoso_is_made_explicit():
    q = parse_query("SELECT ?x (COUNT(?x) AS ?n) WHERE { ?x <http://e/p> ?y }")
    assert q.group_by == (Var("x"),)
    pyoxigraph.Store().query(to_standard(q))


def test_blank_node_becomes_a_fresh_variable():
    q = parse_query("PREFIX ns: <http://rdf.freebase.com/ns/> SELECT ?x WHERE { ?x ns:a.b [] }")
    assert isinstance(q.where.triples[0].o, Var)


@pytest.mark.parametrize("bad, where", [
    ("SELECT ?x WHERE { ?x ?p }", (1, 25)),
    ("SELECT ?x WHERE { ?x <http://e/p> ?y ", (1, 38)),
    ("SELECT WHERE { ?x ?p ?o }", (1, 8)),
    ("PREFIX ns: <http://e/>\nSELECT ?x WHERE {\n  ?x foo:bar ?y }", (3, 6)),
    ("SELECT ?x WHERE { FILTER(?x = ) }", (1, 31)),
    ("SELECT ?x WHERE { ?x ?p ?o } LIMIT ten", (1, 36)),
    ("SELECT ?x WHERE { ?x ?p ?o } garbage", (1, 30)),
    ("SELECT ?x WHERE { ?x ?p ?o ~ }", (1, 28)),
])
def test_malformed_sparql_names_where(bad, where):
    with pytest.raises(SparqlParseError) as err:
        parse_query(bad)
    assert (err.value.line, err.value.column) == where
    assert f"line {where[0]}, column {where[1]}" in str(err.value)


def test_non_string_is_a_parse_error():
    with pytest.raises(SparqlParseError):
        parse_query(None)  # type: ignore[arg-type]


# -- found by the fuzz (tests/test_sparql_corpus.py): each once escaped as something other than SparqlParseError
@pytest.mark.parametrize("modifier", ["LIMIT", "OFFSET"])
@pytest.mark.parametrize("digits", ["9" * 4301, "9" * 20, "9223372036854775808"])
def test_a_limit_beyond_64_bits_is_a_parse_error(modifier, digits):
    # int() of more than 4,300 digits raised ValueError; engines take LIMIT and OFFSET as 64-bit integers
    with pytest.raises(SparqlParseError, match=r"integer over 9223372036854775807 \(2\^63 - 1\), found '9{20}"
                                               r"|found '9223372036854775808'") as err:
        parse_query(f"SELECT ?x WHERE {{ ?x ?p ?o }} {modifier} {digits}")
    assert len(str(err.value)) < 200 and (err.value.line, err.value.column) == (1, 29 + len(modifier) + 2)
    assert parse_query(f"SELECT ?x WHERE {{ ?x ?p ?o }} {modifier} 9223372036854775807")


_CHAINS = {op: f"SELECT ?x WHERE {{ FILTER({f' {op} '.join(['?x'] * 400)}) }}" for op in ("||", "&&", "+", "*")}


@pytest.mark.parametrize("op", list(_CHAINS))
def test_a_chain_too_long_to_recurse_on_is_a_parse_error(op):
    # The parser reads a chain with a loop, but writing, comparing and hashing the left-nested model recursed
    # once per operator: a few hundred of them raised RecursionError there.
    with pytest.raises(SparqlParseError, match="query is nested too deeply: 402 levels .*at most 128"):
        parse_query(_CHAINS[op])


@pytest.mark.parametrize("text", [
    "SELECT ?x WHERE " + "{ " * 200 + "?x ?p ?o" + " }" * 200,
    "SELECT ?x WHERE { FILTER(" + "!" * 300 + "?x) }",
    "SELECT ?x WHERE { FILTER(" + "(" * 2000 + "?x" + ")" * 2000 + ") }",
])
def test_deep_nesting_is_a_parse_error(text):
    with pytest.raises(SparqlParseError, match="nested too deeply"):
        parse_query(text)


def _deep_stack(frames: int, fn):
    return fn() if frames == 0 else _deep_stack(frames - 1, fn)


@pytest.mark.parametrize("op", ["||", "&&", "+", "-", "*", "/"])
def test_a_query_at_the_depth_limit_is_written_read_back_and_hashed_even_from_a_deep_stack(op):
    from memq.sparql.model import depth
    from memq.sparql.parser import MAX_DEPTH

    # the query, its group, 125 calls and their operands: 128 levels
    text = f"SELECT ?x WHERE {{ FILTER({f' {op} '.join(['?x'] * (MAX_DEPTH - 2))}) }}"

    def everything():
        q = parse_query(text)
        standard = to_standard(q)
        return depth(q), parse_query(standard) == q, to_standard(parse_query(standard)) == standard, hash(q)

    assert _deep_stack(300, everything)[:3] == (MAX_DEPTH, True, True)
    with pytest.raises(SparqlParseError, match="129 levels"):
        parse_query(text.replace("?x)", f"?x {op} ?x)"))


def test_arithmetic_chains_are_written_flat_and_read_back_the_same():
    q = parse_query("SELECT ?x WHERE { FILTER(?a - ?b + ?c * ?d / ?e - -3 > ?f - (?g + ?h)) }")
    standard = to_standard(q)
    assert "(?a - ?b + (?c * ?d / ?e) - " in standard and "?f - (?g + ?h)" in standard
    assert parse_query(standard) == q


def test_the_deepest_gold_query_is_within_the_depth_limit():
    from memq import datasets
    from memq.sparql.model import depth
    from memq.sparql.parser import MAX_DEPTH

    gold = next(p for q in datasets.load("webqsp", "test") if q.id == "WebQTest-1127" for p in q.parses)
    assert depth(parse_query(gold.sparql)) == 87 < MAX_DEPTH
