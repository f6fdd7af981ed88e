"""Rules of reconstruction that the gold queries follow, each on a hand-made KG through the whole pipeline.

* the answer is not the node its own step starts from (``FILTER(?x != ?c)``), and only that one;
* through a CVT the plan walks over (a Make sure on its dates), that node is the one before the CVT;
* Sort orders numbers as numbers, also where the KG keeps them as text.
"""

from __future__ import annotations

from memq.kg.oxigraph import OxigraphStore
from memq.memory.bank import MemoryBank
from memq.memory.embed import HashingEmbedder
from memq.pipeline import Config, Pipeline
from memq.plan.format import parse_plan
from memq.types import MemoryRecord, Statement

FB = "http://rdf.freebase.com/ns/"
NAME = f"<{FB}type.object.name>"


def _pipeline(tmp_path, kg_text: str, relations: list[str]) -> Pipeline:
    """A pipeline over ``kg_text`` whose memory holds one structure-1 statement per relation."""
    (tmp_path / "kg.nt").write_text(kg_text, encoding="utf-8")
    records = [MemoryRecord(Statement(f"{i:012d}", "1", f"?entity1 ns:{rel} ?entity2 .", (rel,), ("q",)),
                            (f"?entity2 is the {rel.rsplit('.', 1)[1].replace('_', ' ')} of ?entity1",), "template")
               for i, rel in enumerate(relations)]
    bank = MemoryBank.build(records, HashingEmbedder())
    return Pipeline(Config(planner="given"), bank=bank, kg=OxigraphStore.from_file(tmp_path / "kg.nt"))


def _triples(*rows: tuple[str, str, str]) -> str:
    def node(x: str) -> str:
        return x if x.startswith(('"', "<")) else f"<{FB}{x}>"

    return "".join(f"{node(s)} <{FB}{p}> {node(o)} .\n" for s, p, o in rows)


def test_the_answer_is_not_the_node_its_step_starts_from_and_the_topic_may_be_one(tmp_path):
    # "In which years did the club that won the 1988 World Series win it?": the 1988 series is an answer too.
    # The club is also (wrongly, as a distractor) listed among its own championships: the gold query's
    # FILTER(?x != ?c) removes it, and nothing removes the topic entity.
    kg = _triples(("m.ws88", "x.event.champion", "m.club"), ("m.club", "x.team.championships", "m.ws88"),
                  ("m.club", "x.team.championships", "m.ws81"), ("m.club", "x.team.championships", "m.club"),
                  ("m.ws88", "type.object.name", '"1988 World Series"@en'),
                  ("m.ws81", "type.object.name", '"1981 World Series"@en'),
                  ("m.club", "type.object.name", '"Dodgers"@en'))
    pipe = _pipeline(tmp_path, kg, ["x.event.champion", "x.team.championships"])
    plan = parse_plan("Find the champion of 1988 World Series, assign it to ?c.\n"
                      "Find the championships of ?c, assign it to ?x.\nFinally the answer is ?x.",
                      ["1988 World Series"])
    got = pipe.answer("which years did the 1988 champion win?", {"m.ws88": "1988 World Series"}, plan=plan)
    assert sorted(m for m, _ in got.answers) == ["m.ws81", "m.ws88"]
    assert "FILTER(?x != ?c)" in got.sparql and f"?x != <{FB}m.ws88>" not in got.sparql


def test_the_topic_is_excluded_when_the_answer_is_one_hop_from_it(tmp_path):
    kg = _triples(("m.fr", "x.country.borders", "m.es"), ("m.fr", "x.country.borders", "m.fr"),
                  ("m.fr", "type.object.name", '"France"@en'))
    pipe = _pipeline(tmp_path, kg, ["x.country.borders"])
    plan = parse_plan("Find the borders of France, assign it to ?x.\nFinally the answer is ?x.", ["France"])
    got = pipe.answer("which countries border france?", {"m.fr": "France"}, plan=plan)
    assert [m for m, _ in got.answers] == ["m.es"]


def test_through_a_cvt_the_answer_is_not_the_node_before_it(tmp_path):
    # CWQ's "who governs the country whose anthem is X": ?c -> governing officials -> ?y (a CVT, checked on its
    # dates) -> office holder -> ?x. The gold query says ?x != ?c, not ?x != ?y.
    date = "<http://www.w3.org/2001/XMLSchema#dateTime>"
    kg = _triples(("m.anthem", "type.object.name", '"Anthem"@en'),
                  ("m.anthem", "x.anthem.country", "m.qa"),
                  ("m.qa", "government.governmental_jurisdiction.governing_officials", "m.cvt1"),
                  ("m.cvt1", "government.government_position_held.office_holder", "m.emir"),
                  ("m.qa", "government.governmental_jurisdiction.governing_officials", "m.cvt2"),
                  ("m.cvt2", "government.government_position_held.office_holder", "m.qa"),
                  ("m.cvt1", "government.government_position_held.from", f'"2013-06-25T00:00:00"^^{date}'),
                  ("m.cvt2", "government.government_position_held.from", f'"2013-06-25T00:00:00"^^{date}'))
    pipe = _pipeline(tmp_path, kg, ["x.anthem.country", "government.governmental_jurisdiction.governing_officials",
                                    "government.government_position_held.office_holder",
                                    "government.government_position_held.from"])
    plan = parse_plan("Find the country of Anthem, assign it to ?c.\n"
                      "Find the governing officials of ?c, assign it to ?y.\n"
                      "Find the office holder of ?y, assign it to ?x.\n"
                      "Find the from of ?y, assign it to ?from.\n"
                      "Make sure ?from is 2013-06-25.\nFinally the answer is ?x.", ["Anthem"])
    got = pipe.answer("who governs the country of Anthem?", {"m.anthem": "Anthem"}, plan=plan)
    assert [m for m, _ in got.answers] == ["m.emir"]
    assert "FILTER(?x != ?c)" in got.sparql and "?x != ?y" not in got.sparql


def test_sort_orders_numbers_kept_as_text_as_numbers_and_dates_as_dates(tmp_path):
    # Freebase keeps a calling code as text: "686" comes after "81" as text, before it as a number.
    date = "<http://www.w3.org/2001/XMLSchema#dateTime>"
    kg = _triples(("m.jp", "type.object.name", '"Japan"@en'),
                  *[("m.jp", "x.country.exports_to", c) for c in ("m.ki", "m.us", "m.kr")],
                  ("m.ki", "x.country.calling_code", '"686"'), ("m.us", "x.country.calling_code", '"1"'),
                  ("m.kr", "x.country.calling_code", '"82"'),
                  ("m.ki", "x.country.founded", f'"1979-07-12T00:00:00"^^{date}'),
                  ("m.us", "x.country.founded", f'"1776-07-04T00:00:00"^^{date}'),
                  ("m.kr", "x.country.founded", f'"1948-08-15T00:00:00"^^{date}'))
    pipe = _pipeline(tmp_path, kg, ["x.country.exports_to", "x.country.calling_code", "x.country.founded"])

    def top(key: str, order: str) -> str:
        plan = parse_plan(f"Find the exports to of Japan, assign it to ?x.\nFind the {key} of ?x, assign it to ?n.\n"
                          f"Sort ?n in {order} order and keep the first result.\nFinally the answer is ?x.",
                          ["Japan"])
        return pipe.answer("which?", {"m.jp": "Japan"}, plan=plan).answers[0][0]

    assert top("calling code", "descending") == "m.ki"
    assert top("calling code", "ascending") == "m.us"
    assert top("founded", "descending") == "m.ki"
    assert top("founded", "ascending") == "m.us"


def test_a_check_of_a_bare_year_compares_numbers_as_numbers_and_dates_as_dates(tmp_path):
    # "fewer than 2416 postgraduates", "less than 2400 people": four digits read as a year, and a count cast to a
    # date is an error (800) or a year, so counts under 1000 were lost. A number, or text that writes one, now
    # compares as a number (a gYear too: the number it writes); a date still compares as a date.
    date, integer = "<http://www.w3.org/2001/XMLSchema#dateTime>", "<http://www.w3.org/2001/XMLSchema#integer>"
    kg = _triples(("m.jp", "type.object.name", '"Japan"@en'),
                  *[("m.jp", "x.country.exports_to", c) for c in ("m.ki", "m.us", "m.kr")],
                  ("m.ki", "x.country.population", f'"800"^^{integer}'),
                  ("m.us", "x.country.population", f'"300000000"^^{integer}'),
                  ("m.kr", "x.country.population", '"1500"'),
                  ("m.ki", "x.country.founded", f'"1979-07-12T00:00:00"^^{date}'),
                  ("m.us", "x.country.founded", f'"1776-07-04T00:00:00"^^{date}'),
                  ("m.kr", "x.country.founded", '"1948"^^<http://www.w3.org/2001/XMLSchema#gYear>'))  # a year alone
    pipe = _pipeline(tmp_path, kg, ["x.country.exports_to", "x.country.population", "x.country.founded"])

    def answers(key: str, check: str) -> set[str]:
        plan = parse_plan(f"Find the exports to of Japan, assign it to ?x.\nFind the {key} of ?x, assign it to ?n.\n"
                          f"Make sure ?n {check}.\nFinally the answer is ?x.", ["Japan"])
        return {a[0] for a in pipe.answer("which?", {"m.jp": "Japan"}, plan=plan).answers}

    assert answers("population", "is before 2400") == {"m.ki", "m.kr"}
    assert answers("population", "is after 1000") == {"m.us", "m.kr"}
    assert answers("founded", "is before 1950") == {"m.us", "m.kr"}
    assert answers("founded", "is after 1950") == {"m.ki"}


def test_a_tie_at_one_step_is_taken_back_when_a_later_step_binds_nothing_after_it(tmp_path):
    # CWQ's "who is the subject of the film X, and what is their profession": a relation and its reverse property
    # share a description, so step 1 recalls both, tied, and both bind. The preferred one (seen in training)
    # reaches a node with no profession; the other reaches the subject. Grounded choice takes the other one, so
    # step 2 is grounded at the right node too and keeps one statement, not the UNION of its tied pair (whose
    # reverse direction brings a distractor in).
    kg = _triples(("m.film", "type.object.name", '"The Film"@en'),
                  ("m.film", "x.film.subjects", "m.wrong"),
                  ("m.singer", "x.subject.films", "m.film"),
                  ("m.singer", "x.person.profession", "m.job"),
                  ("m.other", "x.profession.people", "m.singer"))

    def record(i: int, sparql: str, rel: str, text: str, seen: bool) -> MemoryRecord:
        return MemoryRecord(Statement(f"{i:012d}", "1", sparql, (rel,), ("q",) if seen else ()), (text,), "template")

    records = [record(0, "?entity1 ns:x.film.subjects ?entity2 .", "x.film.subjects",
                      "?entity2 is the subjects of the film ?entity1", True),
               record(1, "?entity2 ns:x.subject.films ?entity1 .", "x.subject.films",
                      "?entity2 is the subjects of the film ?entity1", False),
               record(2, "?entity1 ns:x.person.profession ?entity2 .", "x.person.profession",
                      "?entity2 is the profession of the person ?entity1", True),
               record(3, "?entity2 ns:x.profession.people ?entity1 .", "x.profession.people",
                      "?entity2 is the profession of the person ?entity1", False)]
    (tmp_path / "kg.nt").write_text(kg, encoding="utf-8")
    pipe = Pipeline(Config(planner="given"), bank=MemoryBank.build(records, HashingEmbedder()),
                    kg=OxigraphStore.from_file(tmp_path / "kg.nt"))
    plan = parse_plan("Find the subjects of the film The Film, assign it to ?c.\n"
                      "Find the profession of the person ?c, assign it to ?x.\nFinally the answer is ?x.",
                      ["The Film"])
    got = pipe.answer("what is the profession of the subject of the film?", {"m.film": "The Film"}, plan=plan)
    assert [m for m, _ in got.answers] == ["m.job"]
    assert "step 1: took tied statement 000000000001, with which step 2 binds too" in got.trace.fallbacks
    assert "UNION" not in got.sparql and "x.profession.people" not in got.sparql


def test_a_constant_no_given_entity_carries_is_matched_by_name_at_the_steps_node(tmp_path):
    # "who is keyshia cole dad?" linked: Keyshia Cole is given, the constraint entity Male is not. The check
    # matches ?gender by its name (case aside), instead of comparing the node's IRI with the text "Male" (which
    # finds nothing and self-repair then drops the check, answering both parents); "is not" excludes by name too.
    kg = _triples(("m.kc", "x.person.parents", "m.dad"), ("m.kc", "x.person.parents", "m.mum"),
                  ("m.dad", "x.person.gender", "m.male"), ("m.mum", "x.person.gender", "m.female"),
                  ("m.male", "type.object.name", '"Male"@en'), ("m.female", "type.object.name", '"Female"@en'),
                  ("m.kc", "type.object.name", '"Keyshia Cole"@en'))
    pipe = _pipeline(tmp_path, kg, ["x.person.parents", "x.person.gender"])
    kc = {"m.kc": "Keyshia Cole"}
    steps = "Find the parents of Keyshia Cole, assign it to ?x.\nFind the gender of ?x, assign it to ?gender.\n"
    got = pipe.answer("who is keyshia cole dad?", kc,
                      plan=parse_plan(steps + "Make sure ?gender is male.\nFinally the answer is ?x.",
                                      ["Keyshia Cole"]))
    assert [m for m, _ in got.answers] == ["m.dad"]
    assert not [f for f in got.trace.fallbacks if "self-repair" in f]
    assert any("'male' is no given entity: ?gender is matched by its name" in f for f in got.trace.fallbacks)
    got = pipe.answer("who is keyshia cole mum?", kc,
                      plan=parse_plan(steps + "Make sure ?gender is not Male.\nFinally the answer is ?x.",
                                      ["Keyshia Cole"]))
    assert [m for m, _ in got.answers] == ["m.mum"]
    given = pipe.answer("who is keyshia cole dad?", {**kc, "m.male": "Male"},  # given: compared as the entity
                        plan=parse_plan(steps + "Make sure ?gender is Male.\nFinally the answer is ?x.",
                                        ["Keyshia Cole", "Male"]))
    assert [m for m, _ in given.answers] == ["m.dad"] and f"?gender = <{FB}m.male>" in given.sparql

