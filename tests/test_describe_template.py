"""TemplateDescriber: descriptions in the paper's form from the Freebase schema."""

from __future__ import annotations

import json

import pytest

from memq.datasets import data_path
from memq.describe import TemplateConfig, TemplateDescriber, shared_descriptions
from memq.describe.base import Described, describe_with_info
from memq.describe.schema import label_kind, schema
from memq.types import Statement


def st(structure: str, sparql: str, relations: tuple[str, ...] = ()) -> Statement:
    return Statement(f"{structure}-{abs(hash(sparql)) % 10**8}", structure, sparql, relations)


@pytest.fixture(scope="module")
def describer() -> TemplateDescriber:
    return TemplateDescriber()


def first(describer: TemplateDescriber, structure: str, sparql: str) -> tuple[str, ...]:
    got = describer.describe_one(st(structure, sparql))
    assert got.fallback is None, got
    return got.descriptions


def test_forward_relation_uses_label_and_domain(describer):
    d = first(describer, "1", "?entity1 ns:location.country.currency_used ?entity2 .")
    assert d[0] == "?entity2 is the currency used of the country ?entity1"
    assert d[-1] == "the currency used of ?entity1"


def test_reverse_relation_uses_reverse_label_then_passive(describer):
    d = first(describer, "1", "?entity2 ns:people.person.place_of_birth ?entity1 .")
    assert d[0] == "?entity2 is the people born here of the location ?entity1"
    assert "?entity2 is the person whose place of birth is ?entity1" in d


def test_reverse_without_reverse_property_is_passive(describer):
    fb = schema()
    assert fb.reverse("government.election.winner") is None
    d = first(describer, "1", "?entity2 ns:government.election.winner ?entity1 .")
    assert d[0] == "?entity2 is the election whose winner is ?entity1"


def test_verb_like_labels_read_as_verbs(describer):
    assert label_kind("directed by") == "prep" and label_kind("contains") == "verb"
    assert label_kind("place of birth") == "noun"
    d = first(describer, "1", "?entity1 ns:film.film.directed_by ?entity2 .")
    assert d[0] == "?entity2 is the director that the film ?entity1 is directed by"


def test_structure2_reads_through_the_cvt(describer):
    d = first(describer, "2", "?entity1 ns:film.actor.film ?cvt .\n?cvt ns:film.performance.character ?entity2 .")
    assert d[0] == "?entity2 is the character of the film performances of the actor ?entity1"
    assert "?entity2 is the character of the performance whose actor is ?entity1" in d
    s = first(describer, "2", "?entity1 ns:people.person.sibling_s ?cvt .\n"
                              "?cvt ns:people.sibling_relationship.sibling ?entity2 .")
    assert s[-1] == "the sibling of the siblings of ?entity1"


def test_structure3_names_all_three_roles(describer):
    d = first(describer, "3", "?entity1 ns:film.actor.film ?cvt .\n?cvt ns:film.performance.character ?entity2 .\n"
                              "?cvt ns:film.performance.film ?entity3 .")
    assert d[0] == "?entity3 is the film of the performance with actor ?entity1 and character ?entity2"
    r = first(describer, "3", "?entity1 ns:sports.pro_athlete.teams ?cvt .\n"
                              "?cvt ns:sports.sports_team_roster.team ?entity2 .\n"
                              "?cvt ns:sports.sports_team_roster.from ?entity3 .")
    assert r[0].startswith("?entity3 is the start date of the sports team roster")


def test_union_reads_either_or(describer):
    d = first(describer, "1", "{ ?entity2 ns:government.election.winner ?entity1 . } UNION "
                              "{ ?entity2 ns:government.election_campaign.candidate ?entity1 . }")
    assert d[0].startswith("?entity2 is either the election whose winner is ?entity1 or ")


def test_filters(describer):
    assert first(describer, "filter", "FILTER(?entity1 = ?value)")[0] == "?entity1 is the same as ?value"
    assert first(describer, "filter", "FILTER(xsd:dateTime(?entity1) > ?value)")[0] == "?entity1 is after ?value"
    time = first(describer, "filter",
                 "FILTER(NOT EXISTS { ?entity1 ns:people.marriage.from ?sk0 . } || EXISTS { ?entity1 "
                 "ns:people.marriage.from ?sk1 . FILTER(xsd:dateTime(?sk1) <= ?value) })")
    assert time[0] == "the marriage ?entity1 was valid at time ?value, with its start date on or before ?value"
    span = first(describer, "filter", "FILTER((xsd:dateTime(?entity1) - xsd:dateTime(?entity2)) >= ?value)")
    assert span[0] == "the time from ?entity2 to ?entity1 is at least ?value"


def test_orders(describer):
    d = first(describer, "order", "ORDER BY DESC(xsd:dateTime(?entity1)) LIMIT 1")
    assert d[0] == "sort by ?entity1 as a date in descending order and keep the first result"
    assert d[1] == "rank the results by ?entity1 and take the latest"
    assert first(describer, "order", "ORDER BY ASC(?entity1) LIMIT 1 OFFSET 1")[0] == \
        "sort by ?entity1 in ascending order and keep the second result"


def test_unreadable_statement_falls_back_and_records_it(describer):
    got = describer.describe_one(st("1", "?entity1 ns:a.b.c ?x . ?y ns:d.e.f ?entity2 .", ("a.b.c", "d.e.f")))
    assert got.fallback == "template-generic"
    assert got.descriptions[0] == "?entity2 is related to ?entity1 by c and f"
    bad = describer.describe_one(st("filter", "FILTER(", ()))
    assert bad.fallback == "template-generic"


def test_config_switches_descriptions_and_hash():
    s = st("2", "?entity1 ns:film.actor.film ?cvt .\n?cvt ns:film.performance.character ?entity2 .")
    small = TemplateDescriber(TemplateConfig(alternate=False, short=False))
    assert len(small.describe([s])[0]) == 1
    assert len(TemplateDescriber().describe([s])[0]) == 3
    assert small.prompt_hash != TemplateDescriber().prompt_hash


def test_shared_descriptions_are_counted_and_left_alone():
    # A relation and its reverse read the same way: both keep the text (recall keeps ties, the KG decides).
    described = [Described(("Same ", "s2"), "t"), Described(("same",), "t"), Described(("other",), "t")]
    assert shared_descriptions(d.descriptions[0] for d in described) == 2
    assert described[0].descriptions == ("Same ", "s2")


def test_every_fixture_statement_is_described_without_fallback(describer):
    from memq.datasets import load
    from memq.decompose import decompose_dataset

    raw = json.loads(data_path("fixtures", "webqsp_train_fixture.json").read_text())
    ids = {q["QuestionId"] for q in raw["Questions"]}
    statements = decompose_dataset([q for q in load("webqsp", "train") if q.id in ids])
    assert len(statements) >= 16
    got = describe_with_info(describer, statements)
    for s, d in zip(statements, got, strict=True):
        assert d.fallback is None, (s.sparql, d)
        target = "?entity3 is " if s.structure == "3" else "?entity2 is "
        if s.structure in ("1", "2", "3"):
            assert d.descriptions[0].startswith(target) and "?entity1" in d.descriptions[0]
        assert "ns:" not in " ".join(d.descriptions)


@pytest.mark.parametrize(("type_id", "name"), [
    ("architecture.building", "building"),  # no other type of that name: as before
    ("people.person", "person"),  # shared with base and user types only: the commons keeps it
    ("film.film", "film"),  # the ranges' relation id film.content_rating.film is no type
    ("film.producer", "film producer"),  # shared with music.producer and broadcast.producer
    ("music.producer", "music producer"),
    ("broadcast.radio_station", "radio station"),
    ("base.lightweight.radio_station", "lightweight radio station"),
    ("soccer.football_player", "soccer football player"),
    ("common.topic", "topic"),
])
def test_class_names_tell_apart_types_of_one_name(type_id, name):
    assert schema().class_name(type_id) == name


@pytest.mark.parametrize(("name", "names"), [
    ("Super Bowl", True), ("country", True), ("Film actor", True),  # american_football.super_bowl, film.actor
    ("US President", True), ("Tirana", False), ("Governor", False), ("President of the United States", False),
    ("lightweight radio station", False),  # a base type's name: not of the commons
])
def test_a_name_names_a_commons_type_or_not(name, names):
    assert schema().names_type(name) is names


def test_a_class_statement_is_described_by_its_told_apart_name(describer):
    film = first(describer, "class", "?entity1 ns:type.object.type ns:film.producer .")
    music = first(describer, "class", "?entity1 ns:type.object.type ns:music.producer .")
    assert film == ("?entity1 is a film producer", "every film producer", "film producer")
    assert music[1] == "every music producer"
    from memq.plan.derive import class_name
    assert class_name(st("class", "?entity1 ns:type.object.type ns:film.producer .")) == "film producer"
