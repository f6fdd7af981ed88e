"""Reconstruction rules that need no KG: how mentions become ids."""

from __future__ import annotations

import re

from memq.reconstruct import Reconstructor
from memq.sparql.model import FB, Group, Iri
from memq.types import PlanStep, Statement

PERFORMANCE = Statement(
    "c80f799bf092", "3",
    "?cvt ns:film.performance.character ?entity2 .\n?entity1 ns:film.film.starring ?cvt .\n"
    "?cvt ns:film.performance.actor ?entity3 .",
    ("film.film.starring", "film.performance.character", "film.performance.actor"))
LANGUAGES = Statement("36f77316f04b", "1", "?entity1 ns:location.country.languages_spoken ?entity2 .",
                      ("location.country.languages_spoken",))

FILM, CHARACTER = "m.01s3vk", "m.0c1pj"  # both named "Edward Scissorhands"


def _ends(group: Group) -> set[tuple[str, str]]:
    """(film id, character id) of each reading of a performance group."""
    readings = group.unions[0] if group.unions else (group,)
    out = set()
    for g in readings:
        film = next(t.s for t in g.triples if t.p == Iri(FB + "film.film.starring"))
        char = next(t.o for t in g.triples if t.p == Iri(FB + "film.performance.character"))
        out.add((film.local, char.local))
    return out


def test_a_shared_name_is_tried_both_ways_but_never_as_one_entity_at_both_ends():
    rec = Reconstructor({FILM: "Edward Scissorhands", CHARACTER: "Edward Scissorhands"})
    step = PlanStep("find", "Find the actor of the performance with film Edward Scissorhands and character "
                    "Edward Scissorhands, assign it to ?x.", source="Edward Scissorhands",
                    relation="actor", target="?x", value="Edward Scissorhands")
    group = rec.find(step, PERFORMANCE)
    assert _ends(group) == {(FILM, CHARACTER), (CHARACTER, FILM)}
    assert rec.ambiguous == {"Edward Scissorhands": (FILM, CHARACTER)}  # the pipeline traces this


def test_a_unique_name_gives_one_plain_group():
    rec = Reconstructor({"m.03_r3": "Jamaica"})
    step = PlanStep("find", "Find the languages spoken of Jamaica, assign it to ?x.", source="jamaica",
                    relation="languages spoken", target="?x")
    group = rec.find(step, LANGUAGES)
    assert not group.unions and group.triples[0].s == Iri(FB + "m.03_r3")
    assert rec.ambiguous == {}


def test_a_shared_name_on_a_one_hop_step_is_a_union_of_both():
    rec = Reconstructor({"m.0a": "Georgia", "m.0b": "Georgia"})
    step = PlanStep("find", "Find the languages spoken of Georgia, assign it to ?x.", source="Georgia",
                    relation="languages spoken", target="?x")
    group = rec.find(step, LANGUAGES)
    assert {g.triples[0].s.local for g in group.unions[0]} == {"m.0a", "m.0b"}


START_BEFORE = Statement(
    "s1", "filter",
    "FILTER(NOT EXISTS { ?entity1 ns:celebrities.romantic_relationship.start_date ?sk0 . } || EXISTS { "
    "?entity1 ns:celebrities.romantic_relationship.start_date ?sk1 . FILTER(xsd:dateTime(?sk1) >= ?value) })",
    ("celebrities.romantic_relationship.start_date",))


def _check(op: str, statement: Statement):
    from memq.sparql.serialize import READABLE

    rec = Reconstructor({"m.01gq0b": "Claire Danes"})
    words = {"<=": "on or before", ">=": "on or after"}[op]
    step = PlanStep("check", f"Make sure the start date of the romantic relationship ?y is {words} 2015-08-10.",
                    relation="the start date of the romantic relationship ?y", target="?y", op=op,
                    value="2015-08-10")
    return READABLE.expr(rec.check(step, statement)), rec.notes


def test_the_steps_comparator_wins_over_the_recalled_filter_statements():
    text, notes = _check("<=", START_BEFORE)
    assert re.search(r"xsd:dateTime\(\?sk1_\d+\) <= ", text) and ">=" not in text
    assert notes and "s1 compares with >=; the step's <= used" in next(iter(notes.values()))
    text, notes = _check(">=", START_BEFORE)  # they agree: nothing changed, nothing noted
    assert ">= " in text and notes == {}
