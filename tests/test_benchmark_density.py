"""A benchmark KG as dense as Freebase: FB15k-237's real triples and schema-true distractors, on a hand-made KG."""

from __future__ import annotations

import gzip

import pytest

from memq.benchmark import build_graph
from memq.benchmark.density import DENSE, Densifier
from memq.benchmark.sources import FB15K_CVT, fb15k_cvt, fb15k_relation, load_fb15k237
from memq.datasets import GoldParse, GoldQuestion
from memq.kg import OxigraphStore
from memq.kg.check import check_gold
from memq.kg.stats import distribution, kg_stats
from memq.sparql.model import FB, XSD, Iri, Literal

P = "PREFIX ns: <http://rdf.freebase.com/ns/>\n"
ENTITIES = ["/m/0a", "/m/0b", "/m/0c", "/m/0d", "/m/0e", "/m/0f"]
RELATIONS = ["/location/country/capital", "/people/person/spouse_s./people/marriage/spouse",
             "/people/person/nationality"]
TRIPLES = [
    (0, 2, 0),  # m.0a capital m.0c: a non-gold answer of "the capital of m.0a" (gold: m.0b), must be left out
    (3, 0, 2),  # m.0d nationality m.0a: harmless, stays
    (4, 5, 1),  # m.0e spouse m.0f through a CVT
]


def _fb15k_folder(tmp_path):
    folder = tmp_path / "fb15k237"
    folder.mkdir()

    def write(name, rows):
        with gzip.open(folder / name, "wt", encoding="utf-8") as fh:
            fh.write(f"{len(rows)}\n" + "".join(r + "\n" for r in rows))

    write("entity2id.txt.gz", [f"{m}\t{i}" for i, m in enumerate(ENTITIES)])
    write("relation2id.txt.gz", [f"{r}\t{i}" for i, r in enumerate(RELATIONS)])
    write("train2id.txt.gz", [f"{h} {t} {r}" for h, t, r in TRIPLES[:2]])
    write("valid2id.txt.gz", [f"{h} {t} {r}" for h, t, r in TRIPLES[2:]])
    write("test2id.txt.gz", [])
    return folder


def _question(qid: str, sparql: str, topic: str, answers: list[str]) -> GoldQuestion:
    parse = GoldParse(f"{qid}.P0", P + sparql, ((topic, f"Topic {topic}"),),
                      tuple((a, f"Answer {a}") for a in answers))
    return GoldQuestion(qid, f"question {qid}", "webqsp", "test", (parse,))


QUESTIONS = [
    _question("WebQTest-1", "SELECT DISTINCT ?x WHERE { FILTER (?x != ns:m.0a) ns:m.0a ns:location.country.capital "
              "?x . }", "m.0a", ["m.0b"]),
    # a CVT with a constraint triple: a sibling marriage (another type of union) leaves the answer alone
    _question("WebQTest-2", "SELECT DISTINCT ?x WHERE { FILTER (?x != ns:m.0p) ns:m.0p ns:people.person.spouse_s ?y . "
              "?y ns:people.marriage.spouse ?x . ?y ns:people.marriage.type_of_union ns:m.04ztj . }", "m.0p", ["m.0q"]),
    # the same without the constraint: a sibling marriage would add an answer, so it must go again
    _question("WebQTest-3", "SELECT DISTINCT ?x WHERE { FILTER (?x != ns:m.0r) ns:m.0r ns:people.person.spouse_s ?y . "
              "?y ns:people.marriage.spouse ?x . }", "m.0r", ["m.0s"]),
    _question("WebQTest-4", "SELECT DISTINCT ?x WHERE { FILTER (?x != ns:m.0t) ns:m.0t "
              "ns:people.person.place_of_birth ?x . }", "m.0t", ["m.0u"]),
]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dense")
    build = build_graph(QUESTIONS, real_triples=False, fb15k237=_fb15k_folder(tmp))
    path = tmp / "kg.nq.gz"
    build.write(path)
    return build, OxigraphStore.from_file(path)


def _relations(build, mid: str) -> set[str]:
    out, into = build.graph.relations(Iri(FB + mid))
    return out | into


def test_fb15k_relations_split_at_the_cvt():
    assert fb15k_relation("/people/person/nationality") == ("people.person.nationality",)
    assert fb15k_relation("/people/person/spouse_s./people/marriage/spouse") == (
        "people.person.spouse_s", "people.marriage.spouse")
    with pytest.raises(ValueError, match="not an FB15k-237 relation"):
        fb15k_relation("/a/b/c./d/e/f./g/h/i")


def test_cvt_paths_expand_through_a_deterministic_cvt_node(tmp_path):
    triples = load_fb15k237(_fb15k_folder(tmp_path))
    cvt = fb15k_cvt("m.0e", RELATIONS[1], "m.0f")
    assert cvt.value.startswith(FB15K_CVT) and cvt == fb15k_cvt("m.0e", RELATIONS[1], "m.0f")
    assert (Iri(FB + "m.0e"), Iri(FB + "people.person.spouse_s"), cvt) in triples
    assert (cvt, Iri(FB + "people.marriage.spouse"), Iri(FB + "m.0f")) in triples
    assert (Iri(FB + "m.0d"), Iri(FB + "people.person.nationality"), Iri(FB + "m.0a")) in triples
    assert len(triples) == 4


def test_every_gold_query_stays_exact(built):
    build, store = built
    assert all(it.status == "ok" for it in build.items), [(it.key, it.reason) for it in build.items]
    summary = check_gold(store, QUESTIONS, timeout=None)
    assert summary["exact"] == len(QUESTIONS)


def test_a_real_triple_that_adds_a_gold_answer_is_left_out_and_counted(built):
    build, _ = built
    a, c, d = (Iri(FB + m) for m in ("m.0a", "m.0c", "m.0d"))
    assert (a, Iri(FB + "location.country.capital"), c) not in build.graph
    assert build.report_data["real_dropped_by_relation"] == {"/location/country/capital (FB15k-237)": 1}
    assert (d, Iri(FB + "people.person.nationality"), a) in build.graph
    assert build.graph.info[(d, Iri(FB + "people.person.nationality"), a)].real


def test_topic_entities_get_the_relations_their_types_carry(built):
    build, _ = built
    for mid in ("m.0a", "m.0p", "m.0t"):
        assert len(_relations(build, mid)) >= 20, (mid, sorted(_relations(build, mid)))
    # the near misses a planner confuses exist beside the gold relation
    assert {"people.person.nationality", "people.person.places_lived"} <= _relations(build, "m.0t")
    # a country is a location, as a place of birth is
    assert build.schema.ranges["people.person.nationality"] == "location.country"
    # no relation the node has is added again: one capital, the gold one
    assert build.graph.values(Iri(FB + "m.0a"), FB + "location.country.capital") == [Iri(FB + "m.0b")]


def test_sibling_cvts_stay_only_where_a_constraint_tells_them_apart(built):
    build, _ = built
    spouse_s = Iri(FB + "people.person.spouse_s")

    def siblings(mid):
        return [k for k in build.graph.around(Iri(FB + mid)) if k[1] == spouse_s
                and any(d.endswith("|sibling") for d in build.graph.info[k].distractors)]

    assert len(siblings("m.0p")) == 1  # another marriage, with another type of union
    assert siblings("m.0r") == []  # it would have been another answer
    assert len(build.graph.values(Iri(FB + "m.0r"), spouse_s.value)) == 1
    removed = build.report_data["distractors_removed"]
    assert removed.get("schema-true distractor added answers to a gold query", 0) >= 1
    assert build.report_data["dense_distractors_by_kind"]["sibling"] >= 1


def test_dense_edges_are_synthetic_and_named(built):
    build, _ = built
    dense = [k for k, info in build.graph.info.items() if any(d.startswith(DENSE + "|") for d in info.distractors)]
    assert dense and not any(build.graph.info[k].real for k in dense)
    name = FB + "type.object.name"
    fresh = {o for _, p, o in dense if isinstance(o, Iri) and "/synthetic/ent_" in o.value}
    assert fresh and all(build.graph.values(o, name) for o in fresh)


def test_stats_count_distinct_relations_at_topic_entities_and_cvts(built):
    build, store = built
    stats = kg_stats(store, QUESTIONS, timeout=None)
    expected = sorted(len(_relations(build, m)) for m in ("m.0a", "m.0p", "m.0r", "m.0t"))
    assert stats["topic_relations"] == distribution(expected)
    assert stats["topic_relations"]["median"] == (expected[1] + expected[2]) / 2
    assert stats["cvt_relations"]["n"] >= 3  # the two gold marriages and the kept sibling
    real = sum(1 for info in build.graph.info.values() if info.real)
    assert stats["quads"]["real"] == real
    assert stats["quads"]["total"] == len(build.graph) + 2  # and the two marker quads


def test_distribution_p10_is_the_nearest_rank():
    assert distribution(range(1, 11)) == {"n": 10, "median": 5.5, "p10": 1, "mean": 5.5}
    assert distribution(range(1, 12))["p10"] == 2
    assert distribution([]) == {"n": 0, "median": 0, "p10": 0, "mean": 0.0}


def test_near_misses_rank_before_more_frequent_relations(built):
    from memq.benchmark.density import Densifier, _family

    build, _ = built
    dens = Densifier(build)
    cands = dens.candidates(Iri(FB + "m.0x"), ["people.person"], {"people.person.place_of_birth"}, set())
    near = [bool(_family(build.schema.ranges.get(r)) & {"location.location"}) for d, r in cands if d == "out"]
    assert near[0] and near.index(False) < len(near)  # some of each
    assert near == sorted(near, reverse=True)  # every near miss first
    assert ("out", "people.person.nationality") in cands[:near.index(False)]
    assert ("out", "people.person.place_of_birth") not in cands  # the node has it



def test_a_sibling_cvt_keeps_a_number_a_number(built):
    """xsd:integer(?n) must not meet "Synthetic text" on a sibling CVT: Virtuoso rejects the whole query (SR341)."""
    build, _ = built
    densifier = Densifier.__new__(Densifier)
    densifier.schema = build.schema
    cvt = Iri("http://memq.dev/synthetic/cvt_0")

    def other(value, rel):
        return densifier._other(Literal(value), Iri(FB + rel), cvt)

    number = other("21176", "measurement_unit.dated_integer.number")  # untyped, as some gold values are
    assert number.datatype is None and number.value.isdigit() and number.value != "21176"
    decimal = other("-3.5", "measurement_unit.dated_float.number")
    assert decimal.datatype is None and float(decimal.value) != -3.5
    assert build.schema.ranges["measurement_unit.dated_integer.number"] == "type.int"
    typed = other("n/a", "measurement_unit.dated_integer.number")  # not a number, on an integer relation
    assert typed.datatype == XSD + "integer" and typed.value.isdigit()
    assert other("Joe", "people.person.nickname").value.startswith("Synthetic text ")
