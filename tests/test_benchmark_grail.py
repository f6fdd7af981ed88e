"""The benchmark builder on hand-made GrailQA questions: class constraints, VALUES, comparisons, superlatives, counts.

The graph is built from these questions alone (no real triples, no FB15k-237, no schema-true distractors), so
it takes a second; the check runs the ORIGINAL GrailQA queries, wrapper, VALUES and MAX subquery included.
"""

from __future__ import annotations

import gzip
import json

import pytest

from memq import datasets
from memq.benchmark import build_graph
from memq.benchmark.grail import builder_form
from memq.datasets import GoldParse, GoldQuestion
from memq.kg import OxigraphStore
from memq.kg.check import check_gold, result_keys
from memq.kg.cli import benchmark_inputs
from memq.sparql import parse_query, to_standard

HEAD = ("PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> "
        "PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> PREFIX : <http://rdf.freebase.com/ns/> \n")
INT = "<http://www.w3.org/2001/XMLSchema#integer>"


def _wrap(body: str, count: bool = False) -> str:
    head = "SELECT (COUNT(?x0) AS ?value) WHERE {" if count else "SELECT (?x0 AS ?value) WHERE {"
    return HEAD + head + "\nSELECT DISTINCT ?x0  WHERE { \n" + body + "\n}\n}"


def _floors(op: str, n: int) -> str:
    return (f"?x0 :type.object.type :architecture.building . \nFILTER (?x1 {op} \"{n}\"^^{INT})\n"
            "?x0 :architecture.building.floors ?x1 . \nFILTER ( ?x0 != ?x1  )")


TALLEST = ("?x0 :type.object.type :architecture.building . \n{\nSELECT (MAX(?y1) AS ?x1)  WHERE { \n"
           "?y0 :type.object.type :architecture.building . \n?y0 :architecture.building.floors ?y1 . \n"
           "FILTER ( ?y0 != ?y1  )\n}\n}\n?x0 :architecture.building.floors ?x1 . \nFILTER ( ?x0 != ?x1  )")
ARCHITECT = ("?x0 :type.object.type :architecture.structure . \nVALUES ?x1 { :m.0arch } \n"
             "?x0 :architecture.structure.architect ?x1 . \nFILTER ( ?x0 != ?x1  )")

# (id, SPARQL, topic entities, answers, function); the buildings are shared, as GrailQA's comparisons share them
RAW = [
    ("g1", _wrap(_floors("<", 9)), [], ["m.0b1", "m.0b2", "m.0b3"], "<"),
    ("g2", _wrap(_floors(">=", 5)), [], ["m.0b2", "m.0b3", "m.0b5"], ">="),
    ("g3", _wrap(_floors("<=", 6)), [], ["m.0b1", "m.0b2"], "<="),
    ("g4", _wrap(TALLEST), [], ["m.0b5"], "argmax"),
    ("g5", _wrap(ARCHITECT), [("m.0arch", "Some architect")], ["m.0s1", "m.0s2"], "none"),
    ("g6", _wrap(ARCHITECT.replace("m.0arch", "m.0arch2"), count=True), [("m.0arch2", "Another")], ["2"], "count"),
]


def _question(qid, sparql, topics, answers, function) -> GoldQuestion:
    gold = tuple((a, a) for a in answers)
    return GoldQuestion(qid, f"question {qid}", "grailqa", "train", (GoldParse(qid, sparql, tuple(topics), gold),),
                        function=function)


QUESTIONS = [_question(*r) for r in RAW]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    path = tmp_path_factory.mktemp("grail") / "kg.nq.gz"
    build = build_graph(QUESTIONS, real_triples=False, fb15k237=False, density=False)
    build.write(path)
    return build, OxigraphStore.from_file(path)


def test_builder_form_unwraps_counts_and_superlatives():
    plain = builder_form(parse_query(RAW[0][1]), (("m.0b1", ""),), "g1")
    assert plain.function == "none" and not plain.query.where.subqueries and plain.query.distinct
    assert len(plain.query.where.filters) == 1  # the comparison stays, the every-node-differs filter goes
    top = builder_form(parse_query(RAW[3][1]), (("m.0b5", ""),), "g4")
    assert top.function == "superlative" and top.query.order_by[0].descending and top.query.limit == 1
    count = builder_form(parse_query(RAW[5][1]), (("2", "2"),), "g6")
    assert count.function == "count" and len(count.answers) == 2
    assert all(a.startswith("http://memq.dev/synthetic/") for a, _ in count.answers)
    webqsp = "PREFIX ns: <http://rdf.freebase.com/ns/> SELECT DISTINCT ?x WHERE { ns:m.01 ns:a.b.c ?x . }"
    assert builder_form(parse_query(webqsp), (("m.02", ""),), "w") is None


def test_original_grailqa_queries_are_exact_on_the_graph(built):
    build, store = built
    assert build.report_data["exact"] == len(QUESTIONS), build.report_data["failures"]
    summary = check_gold(store, QUESTIONS, timeout=None)
    assert summary["exact"] == len(QUESTIONS), summary["inexact"]


def test_shared_members_get_values_between_the_thresholds(built):
    _, store = built
    rows = store.select("SELECT ?b ?n WHERE { ?b <http://rdf.freebase.com/ns/architecture.building.floors> ?n }")
    floors = {r["b"].value.rsplit("/", 1)[-1]: float(r["n"].value) for r in rows}
    assert floors["m.0b2"] >= 5 and floors["m.0b2"] <= 6 and floors["m.0b3"] > 6 and floors["m.0b3"] < 9


def test_class_members_on_both_sides_of_a_threshold_and_a_runner_up(built):
    build, _ = built
    pairs = build.report_data["constraint_pairs_by_kind"]
    assert pairs["filter"]["changed"] == pairs["filter"]["pairs"] > 0  # dropping a comparison adds buildings
    assert pairs["order"]["changed"] == pairs["order"]["pairs"] == 1  # the tallest has a runner-up


def test_a_count_counts_its_materialised_members(built):
    _, store = built
    rows = store.select(to_standard(parse_query(RAW[5][1])))
    assert result_keys(rows, "value") == {"n:2"}


def test_question_files_in_each_format_load(tmp_path):
    grail = tmp_path / "mine.json.gz"
    records = [{"qid": 7, "question": "q?", "function": "none", "level": "zero-shot", "sparql_query": RAW[4][1],
                "graph_query": {"nodes": [{"node_type": "entity", "id": "m.0arch", "friendly_name": "A"}]},
                "answer": [{"answer_type": "Entity", "answer_argument": "m.0s1", "entity_name": "S"}]}]
    with gzip.open(grail, "wt", encoding="utf-8") as fh:
        json.dump(records, fh)
    (q,) = datasets.load_file(grail, "grailqa", split="mine")
    assert (q.id, q.split, q.level, q.parses[0].topic_entities) == ("7", "mine", "zero-shot", (("m.0arch", "A"),))
    cwq = tmp_path / "cwq.json"
    cwq.write_text(json.dumps([{"ID": "c1", "question": "q?", "sparql": "SELECT ?x WHERE { ns:m.01 ns:a.b ?x }",
                                "answer": ["m.02"]}]))
    questions, sources = benchmark_inputs(None, [str(cwq)], "cwq")
    assert [q.parses[0].answers[0][0] for q in questions] == ["m.02"] and "cwq.json" in sources
    with pytest.raises(ValueError):
        datasets.load_file(cwq, "nope")


def test_evaluation_breaks_down_by_level_and_function():
    from memq.evaluate.summary import breakdown

    qs = [GoldQuestion("a", "", "grailqa", "dev", (), level="zero-shot", function="argmax"),
          GoldQuestion("b", "", "grailqa", "dev", (), level="i.i.d.", function="<=")]
    recs = [{"id": "a", "f1": 1.0, "hits@1": 1.0, "ehr": 1.0, "ged": 0.0},
            {"id": "b", "f1": None, "hits@1": None, "ehr": 0.5, "ged": 2.0}]
    out = breakdown(recs, qs)
    assert out["by_level"]["zero-shot"]["f1"] == 1.0 and out["by_level"]["i.i.d."]["f1"] == 0.0
    assert set(out["by_function"]) == {"superlative", "comparative"}


def test_reverse_adds_each_triple_read_the_other_way_as_freebase_holds_it(tmp_path):
    """``--reverse`` (GrailQA's KG): a plan that reads a relation through its reverse property finds the gold
    answers, not only what was materialised in the gold query's direction; the gold queries stay exact."""
    from memq.benchmark.builder_schema import reverse_relations
    from memq.benchmark.graph import BenchmarkGraph
    from memq.sparql.model import FB, Iri

    assert reverse_relations()["architecture.structure.architect"] == "architecture.architect.structures_designed"
    graph = BenchmarkGraph(reverse_relations())
    key = (Iri(FB + "m.0s1"), Iri(FB + "architecture.structure.architect"), Iri(FB + "m.0arch"))
    graph.add(key, owner="g5")
    assert len(graph.mirrored) == 1
    mirror = (Iri(FB + "m.0arch"), Iri(FB + "architecture.architect.structures_designed"), Iri(FB + "m.0s1"))
    assert mirror in graph and graph.info[mirror].owners == {"g5"} and not graph.info[mirror].real
    graph.remove(mirror)
    assert key not in graph and mirror not in graph and not graph.mirrored
    graph.add(key, owner="g5")
    graph.add(mirror, real=True, source="real")  # a source gives the mirror too: no longer only a mirror
    assert not graph.mirrored and graph.info[mirror].real and graph.info[mirror].source == "real"
    assert not graph.info[key].real  # the first triple stays as it was given

    other_way = ("SELECT ?x WHERE { <http://rdf.freebase.com/ns/m.0arch> "
                 "<http://rdf.freebase.com/ns/architecture.architect.structures_designed> ?x . "
                 "?x <http://rdf.freebase.com/ns/type.object.type> "
                 "<http://rdf.freebase.com/ns/architecture.structure> }")
    results = {}
    for reverse in (False, True):
        build = build_graph(QUESTIONS, real_triples=False, fb15k237=False, density=False, reverse=reverse)
        assert build.report_data["exact"] == len(QUESTIONS), build.report_data["failures"]
        path = tmp_path / f"kg{reverse}.nq.gz"
        build.write(path)
        results[reverse] = {r["x"].local for r in build.graph.run(other_way)}
        assert check_gold(OxigraphStore.from_file(path), QUESTIONS, timeout=None)["exact"] == len(QUESTIONS)
    assert results == {False: set(), True: {"m.0s1", "m.0s2"}}


def test_dropping_half_of_a_cvt_path_with_mirrors_drops_the_rest_once():
    """``drop_real`` takes an FB15k-237 CVT path's other half with it; with mirrors, removing one triple removes
    its mirror too, which the loop must not look up again (a KeyError that stopped the first ``--reverse`` build of
    the WebQSP/CWQ KG)."""
    from memq.benchmark.state import BuildState
    from memq.sparql.model import FB, Iri

    state = BuildState([], real_triples=False, fb15k237=False, density=False, reverse=True)
    cvt, team, player = Iri("http://memq.dev/fb15k237/cvt_0001"), Iri(FB + "m.0team"), Iri(FB + "m.0player")
    roster = (team, Iri(FB + "sports.sports_team.roster"), cvt)
    plays = (cvt, Iri(FB + "sports.sports_team_roster.player"), player)
    for key in (roster, plays):
        state.graph.add(key, real=True, source="fb15k237:sports.sports_team.roster./sports/player")
    assert len(state.graph) == 4  # each with its mirror
    state.drop_real(roster)
    assert len(state.graph) == 0


DATE = "<http://www.w3.org/2001/XMLSchema#date>"
LATEST = ("?x0 :type.object.type :cvg.game_version . \n{\nSELECT (MAX(?y1) AS ?x1)  WHERE { \n"
          "?y0 :type.object.type :cvg.game_version . \n?y0 :cvg.game_version.release_date ?y1 . \n"
          "FILTER ( ?y0 != ?y1  )\n}\n}\n?x0 :cvg.game_version.release_date ?x1 . \nFILTER ( ?x0 != ?x1  )")
ON_THE_DAY = (f"?x0 :type.object.type :cvg.game_version . \nVALUES ?x1 {{ \"2007-01-19-08:00\"^^{DATE} }} \n"
              "?x0 :cvg.game_version.release_date ?x1 . \nFILTER ( ?x0 != ?x1  )")


def test_a_superlative_beats_a_date_in_a_time_zone_that_another_question_fixes(tmp_path):
    """GrailQA writes its dates in a time zone ("2007-01-19-08:00"^^xsd:date). The builder read such a date as
    an error, and an error sorts last, so the latest game version got a key (a dateTime) that the other
    question's version, released on that date, outranks on the store, which orders a date and a dateTime in time."""
    questions = [_question("d1", _wrap(ON_THE_DAY), [], ["m.0v1"], "none"),
                 _question("d2", _wrap(LATEST), [], ["m.0v2"], "argmax")]
    path = tmp_path / "kg.nq.gz"
    build = build_graph(questions, real_triples=False, fb15k237=False, density=False)
    build.write(path)
    assert build.report_data["exact"] == 2, build.report_data["failures"]
    summary = check_gold(OxigraphStore.from_file(path), questions, timeout=None)
    assert summary["exact"] == 2, summary["inexact"]


def test_a_date_in_a_time_zone_is_read_and_orders_against_a_datetime_by_more_than_a_day():
    import datetime as dt

    from memq.benchmark.eval import EvalError, to_python
    from memq.benchmark.order import OrderSpec, key_better
    from memq.sparql.model import XSD, Literal, Var

    assert to_python(Literal("2007-01-19-08:00", XSD + "date")) == ("date", dt.datetime(2007, 1, 19))
    with pytest.raises(EvalError):
        to_python(Literal("2007-01-19-08:00", XSD + "dateTime"))  # no dateTime lexical form
    latest = OrderSpec(Var("x1"), descending=True, offset=0)
    day = ("date", dt.datetime(2007, 1, 19))
    assert key_better(latest, ("dateTime", dt.datetime(2008, 1, 19)), [day])
    assert not key_better(latest, ("dateTime", dt.datetime(2007, 1, 20)), [day])  # the zone may close a day
    assert not key_better(latest, ("dateTime", dt.datetime(2006, 1, 19)), [day])
