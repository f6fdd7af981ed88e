"""The metric definitions, pinned on hand-made cases."""

from __future__ import annotations

import pytest

from memq.evaluate.metrics import best_over_parses, ehr, ged, hits_at_1, mean, prf
from memq.sparql import parse_query

NS = "PREFIX ns: <http://rdf.freebase.com/ns/> "


def test_hits_at_1_uses_only_the_first_answer():
    assert hits_at_1(["m.a", "m.gold"], {"m.gold"}) == 0.0
    assert hits_at_1(["m.gold", "m.a"], {"m.gold"}) == 1.0
    assert hits_at_1([], {"m.gold"}) == 0.0


def test_f1_per_question():
    assert prf(["m.a", "m.b"], ["m.a"]) == (0.5, 1.0, pytest.approx(2 / 3))
    assert prf([], ["m.a"])[2] == 0.0
    assert prf([], [])[2] == 1.0
    assert prf(["2015-08-10T00:00:00"], ["2015-08-10"])[2] == 1.0


def test_a_crash_counts_zero_in_the_average():
    # Three questions: two perfect, one that raised (scored 0, kept in the denominator).
    scores = [prf(["m.a"], ["m.a"])[2], prf(["m.b"], ["m.b"])[2], 0.0]
    assert mean(scores) == pytest.approx(2 / 3)


def test_multi_parse_takes_the_best_parse():
    hits, f1 = best_over_parses(["m.b"], [["m.a"], ["m.b", "m.c"]])
    assert hits == 1.0 and f1 == pytest.approx(2 / 3)


def test_ehr_counts_gold_edges_and_treats_equality_filters_as_constants():
    gold = parse_query(NS + "SELECT ?x WHERE { ns:m.1 ns:people.person.sibling_s ?y . "
                            "?y ns:people.sibling_relationship.sibling ?x . ?x ns:people.person.gender ns:m.2 }")
    same = parse_query(NS + "SELECT ?x WHERE { ns:m.1 ns:people.person.sibling_s ?c . "
                            "?c ns:people.sibling_relationship.sibling ?x . ?x ns:people.person.gender ?g . "
                            "FILTER(?g = ns:m.2) }")
    missing = parse_query(NS + "SELECT ?x WHERE { ns:m.1 ns:people.person.sibling_s ?c . "
                               "?c ns:people.sibling_relationship.sibling ?x }")
    assert ehr(same, gold) == 1.0
    assert ehr(missing, gold) == pytest.approx(2 / 3)
    assert ehr(None, gold) == 0.0


def test_ehr_reads_a_value_fixed_by_its_text_as_that_constant():
    gold = parse_query(NS + 'SELECT ?x WHERE { ns:m.1 ns:x.team.roster ?y . ?y ns:x.roster.player ?x . '
                            '?y ns:x.roster.number "22" }')
    by_text = parse_query(NS + 'SELECT ?x WHERE { ns:m.1 ns:x.team.roster ?y . ?y ns:x.roster.player ?x . '
                               '?y ns:x.roster.number ?n . FILTER(str(?n) = "22") }')
    either = parse_query(NS + 'SELECT ?x WHERE { ns:m.1 ns:x.team.roster ?y . ?y ns:x.roster.player ?x . '
                              '?y ns:x.roster.number ?n . FILTER(str(?n) = "22" || ?n = 22) }')
    other = parse_query(NS + 'SELECT ?x WHERE { ns:m.1 ns:x.team.roster ?y . ?y ns:x.roster.player ?x . '
                             '?y ns:x.roster.number ?n . FILTER(str(?n) = "22" || ?n = 23) }')
    assert ehr(by_text, gold) == 1.0 and ehr(either, gold) == 1.0
    assert ehr(other, gold) == pytest.approx(2 / 3)  # two values: ?n is not fixed
    # a constant no given entity carries, matched by its text or its node's name (memq.reconstruct.filters)
    named = parse_query(NS + 'SELECT ?x WHERE { ns:m.1 ns:x.team.roster ?y . ?y ns:x.roster.player ?x . '
                             '?y ns:x.roster.number ?n . FILTER(str(?n) = "22" || EXISTS { ?n ns:type.object.name ?l '
                             'FILTER(lcase(str(?l)) = "22") }) }')
    assert ehr(named, gold) == 1.0
    assert ehr(parse_query(NS + 'SELECT ?x WHERE { ns:m.1 ns:x.team.roster ?y . ?y ns:x.roster.player ?x . '
                                '?y ns:x.roster.number ?n . FILTER(str(?n) = "22" || EXISTS { ?n '
                                'ns:type.object.name ?l FILTER(lcase(str(?l)) = "23") }) }'),
               gold) == pytest.approx(2 / 3)


def test_ged_is_zero_for_the_same_shape_and_grows_with_edits():
    gold = parse_query(NS + "SELECT ?x WHERE { ns:m.1 ns:a.b.c ?y . ?y ns:a.b.d ?x }")
    renamed = parse_query(NS + "SELECT ?z WHERE { ns:m.1 ns:a.b.c ?w . ?w ns:a.b.d ?z }")
    one_edge = parse_query(NS + "SELECT ?x WHERE { ns:m.1 ns:a.b.c ?x }")
    assert ged(renamed, gold) == 0.0
    assert ged(one_edge, gold) == 2.0  # one edge and one node missing
    assert ged(None, gold) == 5.0


def test_p95_is_a_nearest_rank_never_below_the_median():
    from memq.evaluate.metrics import p95

    assert p95([]) == 0.0
    assert p95([0.4, 0.08]) == 0.4  # two values: the larger (an index into the lower end gave the smaller)
    assert p95(range(1, 101)) == 95
    assert p95([3.0]) == 3.0


def test_ehr_reads_a_one_value_values_clause_as_that_constant():
    """GrailQA's gold queries name their topic entity and a literal they check with ``VALUES ?v { c }``, inside a
    subquery: the same edges as the constant written in place or fixed by a FILTER."""
    gold = parse_query(NS + 'SELECT (?x0 AS ?value) WHERE { SELECT DISTINCT ?x0 WHERE { '
                            '?x0 ns:type.object.type ns:spaceflight.rocket_engine . '
                            'VALUES ?x1 { "1.519e+06"^^<http://www.w3.org/2001/XMLSchema#float> } '
                            '?x0 ns:spaceflight.rocket_engine.thrust_sea_level ?x1 . VALUES ?x2 { ns:m.04x4gj } '
                            '?x0 ns:spaceflight.rocket_engine.designed_by ?x2 . FILTER(?x0 != ?x1) } }')
    equal = parse_query(NS + 'SELECT DISTINCT ?x0 WHERE { ?x0 ns:type.object.type ns:spaceflight.rocket_engine . '
                             '?x0 ns:spaceflight.rocket_engine.thrust_sea_level ?x1 . '
                             '?x0 ns:spaceflight.rocket_engine.designed_by ns:m.04x4gj . '
                             'FILTER((str(?x1) = "1.519e+06") || (?x1 = "1.519e+06"^^'
                             '<http://www.w3.org/2001/XMLSchema#double>)) }')
    compared = parse_query(NS + 'SELECT DISTINCT ?x0 WHERE { ?x0 ns:type.object.type ns:spaceflight.rocket_engine . '
                                '?x0 ns:spaceflight.rocket_engine.thrust_sea_level ?x1 . '
                                '?x0 ns:spaceflight.rocket_engine.designed_by ns:m.04x4gj . '
                                'FILTER(?x1 >= "1.519e+06"^^<http://www.w3.org/2001/XMLSchema#double>) }')
    assert ehr(equal, gold) == 1.0
    assert ehr(compared, gold) == pytest.approx(2 / 3)  # >= does not fix ?x1
    two = parse_query(NS + 'SELECT ?x WHERE { VALUES ?y { ns:m.1 ns:m.2 } ?y ns:a.b.c ?x }')
    assert ehr(parse_query(NS + 'SELECT ?x WHERE { ns:m.1 ns:a.b.c ?x }'), two) == 0.0  # two values fix nothing
