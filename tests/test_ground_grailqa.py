"""Grounded choice among tied statements, GrailQA's cases, on hand-made KGs and memories.

* Two classes of one name in different domains (``x.film.producer`` / ``x.music.producer``: "producer"): the
  class the later steps bind with is taken.
* Two relations of one label (``thrust (sea level)`` / ``thrust (vacuum)``: "the thrust of the rocket engine"),
  both binding: the one with which the step's check holds is taken, before the query runs, so that a count
  (which answers 0 either way) is decided too.
* A number in scientific notation (``1.9e+06``) is a number, compared as one.
"""

from __future__ import annotations

from memq.kg.oxigraph import OxigraphStore
from memq.memory.bank import MemoryBank
from memq.memory.embed import HashingEmbedder
from memq.pipeline import Config, Pipeline
from memq.plan.format import parse_plan
from memq.types import MemoryRecord, Statement

FB = "http://rdf.freebase.com/ns/"
TYPE = f"<{FB}type.object.type>"
NAME = f"<{FB}type.object.name>"
FLOAT = "<http://www.w3.org/2001/XMLSchema#float>"


def _pipeline(tmp_path, kg_text: str, records: list[tuple[Statement, str]]) -> Pipeline:
    (tmp_path / "kg.nt").write_text(kg_text, encoding="utf-8")
    bank = MemoryBank.build([MemoryRecord(s, (d,), "template") for s, d in records], HashingEmbedder())
    return Pipeline(Config(planner="given", distinct_nodes=True), bank=bank,
                    kg=OxigraphStore.from_file(tmp_path / "kg.nt"))


def _class(sid: str, cls: str, seen: bool) -> tuple[Statement, str]:
    return (Statement(sid, "class", f"?entity1 ns:type.object.type ns:{cls} .", (), ("q1",) if seen else ()),
            f"?entity1 is a {cls.rpartition('.')[2]}")


def _relation(sid: str, rel: str, description: str, seen: bool) -> tuple[Statement, str]:
    return (Statement(sid, "1", f"?entity1 ns:{rel} ?entity2 .", (rel,), ("q1",) if seen else ()), description)


def test_a_class_name_shared_by_two_domains_takes_the_class_the_next_step_binds_with(tmp_path):
    kg = "".join(f"<{FB}{m}> {TYPE} <{FB}x.music.producer> .\n<{FB}{m}> {NAME} \"{m}\"@en .\n"
                 for m in ("m.0mus1", "m.0mus2"))
    kg += "".join(f"<{FB}{m}> {TYPE} <{FB}x.film.producer> .\n<{FB}{m}> {NAME} \"{m}\"@en .\n"
                  f"<{FB}{m}> <{FB}x.person.weight_kg> \"{w}\"^^{FLOAT} .\n" for m, w in (("m.0fil1", "60.0"),
                                                                                        ("m.0fil2", "90.0")))
    # the music producer is the preferred one of the tie (seen in a training query)
    pipe = _pipeline(tmp_path, kg, [_class("mus000000001", "x.music.producer", seen=True),
                                    _class("fil000000001", "x.film.producer", seen=False),
                                    _relation("wgt000000001", "x.person.weight_kg",
                                              "?entity2 is the weight of ?entity1", seen=True)])
    plan = parse_plan("Find every producer, assign it to ?x0.\nFind the weight of ?x0, assign it to ?x1.\n"
                      "Make sure ?x1 <= 70.\nFinally the answer is ?x0.", [])
    got = pipe.answer("which film producer weighs at most 70 kg?", {}, plan=plan)
    assert [m for m, _ in got.answers] == ["m.0fil1"]
    assert any("2 tied class statements; kept mus000000001" in f for f in got.trace.fallbacks)
    assert any("took tied statement fil000000001" in f for f in got.trace.fallbacks)
    assert not any("self-repair" in f for f in got.trace.fallbacks)


def _engines(tmp_path) -> Pipeline:
    kg = ""
    for m, sea, vacuum in (("m.0eng1", "1.519e+06", "1.8e+06"), ("m.0eng2", "6.7e+06", "7.1e+06"),
                           ("m.0eng3", "2.0e+05", "1.519e+05")):
        kg += (f"<{FB}{m}> {TYPE} <{FB}x.rocket_engine> .\n<{FB}{m}> {NAME} \"{m}\"@en .\n"
               f"<{FB}{m}> <{FB}x.rocket_engine.thrust_sea_level> \"{sea}\"^^{FLOAT} .\n"
               f"<{FB}{m}> <{FB}x.rocket_engine.thrust_vacuum> \"{vacuum}\"^^{FLOAT} .\n")
    thrust = "?entity2 is the thrust of the rocket engine ?entity1"
    # thrust (vacuum) is the preferred one of the tie (seen in a training query)
    return _pipeline(tmp_path, kg, [_class("eng000000001", "x.rocket_engine", seen=True),
                                    _relation("vac000000001", "x.rocket_engine.thrust_vacuum", thrust, seen=True),
                                    _relation("sea000000001", "x.rocket_engine.thrust_sea_level", thrust,
                                              seen=False)])


# every rocket engine and its thrust, the steps the engine tests' plans start with
THRUST = "Find every rocket engine, assign it to ?x0.\nFind the thrust of the rocket engine ?x0, assign it to ?x1.\n"


def test_two_relations_of_one_label_take_the_one_the_check_holds_with(tmp_path):
    pipe = _engines(tmp_path)
    plan = parse_plan(THRUST + "Make sure ?x1 is 1.519e+06.\nFinally the answer is ?x0.", [])
    got = pipe.answer("which rocket engines can thrust 1.519e+06?", {}, plan=plan)
    assert [m for m, _ in got.answers] == ["m.0eng1"]
    assert any("took tied statement sea000000001, with which the whole pattern" in f for f in got.trace.fallbacks)
    assert not any("self-repair" in f for f in got.trace.fallbacks)
    counted = parse_plan(THRUST + "Make sure ?x1 is 6.7e+06.\nCount ?x0, assign it to ?count.\n"
                         "Finally the answer is ?count.", [])
    got = pipe.answer("how many rocket engines can thrust 6.7e+06?", {}, plan=counted)
    assert [m for m, _ in got.answers] == ["1"]  # not 0: the count's query answers either way


def test_a_number_in_scientific_notation_is_compared_as_a_number(tmp_path):
    pipe = _engines(tmp_path)
    plan = parse_plan(THRUST + "Make sure ?x1 > 1.0e+06.\nFinally the answer is ?x0.", [])
    got = pipe.answer("which rocket engines thrust more than 1.0e+06?", {}, plan=plan)
    # as text, "2.0e+05" > "1.0e+06" and "1.8e+06" > "1.0e+06" alike; as numbers only the first two engines
    assert sorted(m for m, _ in got.answers) == ["m.0eng1", "m.0eng2"]
