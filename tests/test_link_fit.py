"""Entity linking with the fit through the memory (memq.link.fit): on a hand-made KG with two entities called
Lincoln (the city has more triples, so popularity alone picks it), the statement recalled for a question about a
vice president binds only at the person, and one about a mayor only at the city."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from memq.errors import MemoryBankError
from memq.kg.oxigraph import OxigraphStore
from memq.link.fit import MemoryFit
from memq.link.index import MentionCounts, build_index
from memq.link.linker import Linker
from memq.link.resolve import open_linker, resolve
from memq.link.settings import LinkConfig
from memq.memory.bank import MemoryBank
from memq.memory.embed import HashingEmbedder
from memq.types import MemoryRecord, Statement, Trace

FB = "http://rdf.freebase.com/ns/"
NAME = f"<{FB}type.object.name>"


def edges(subject: str, predicate: str, prefix: str, n: int) -> str:
    """``n`` triples from ``subject`` to ``prefix``0, 1, ...: edges that make an entity more popular (its degree)."""
    return "".join(f"<{FB}{subject}> <{FB}{predicate}> <{FB}{prefix}{i}> .\n" for i in range(n))


CITY, PERSON = "m.0city", "m.0abe"
TRIPLES = f"""
<{FB}{CITY}> {NAME} "Lincoln"@en .
<{FB}{PERSON}> {NAME} "Lincoln"@en .
<{FB}m.0vp> {NAME} "Hannibal Hamlin"@en .
<{FB}m.0mayor> {NAME} "Leirion Gaylor Baird"@en .
<{FB}{PERSON}> <{FB}government.us_president.vice_president> <{FB}m.0vp> .
<{FB}{CITY}> <{FB}government.governmental_jurisdiction.governing_officials> <{FB}m.0mayor> .
""" + edges(CITY, "location.location.contains", "m.0p", 6)
STATEMENTS = [
    ("?entity1 ns:government.us_president.vice_president ?entity2 .", "government.us_president.vice_president",
     "?entity2 is the vice president of the us president ?entity1"),
    ("?entity1 ns:government.governmental_jurisdiction.governing_officials ?entity2 .",
     "government.governmental_jurisdiction.governing_officials",
     "?entity2 is the governing officials mayor of the governmental jurisdiction ?entity1"),
    ("?entity2 ns:location.location.contains ?entity1 .", "location.location.contains",
     "?entity2 is the location that contains ?entity1"),
]


@pytest.fixture(scope="module")
def kg(tmp_path_factory):
    path = tmp_path_factory.mktemp("fitkg") / "kg.nt"
    path.write_text(TRIPLES, encoding="utf-8")
    return OxigraphStore.from_file(path)


@pytest.fixture(scope="module")
def index(kg):
    return build_index(kg, source={"kg": "kg.nt"})


def make_bank():
    records = [MemoryRecord(Statement(f"s{i}", "1", sparql, (rel,)), (desc,), "template")
               for i, (sparql, rel, desc) in enumerate(STATEMENTS)]
    return MemoryBank.build(records, HashingEmbedder())


@pytest.fixture(scope="module")
def bank():
    return make_bank()


FIT = LinkConfig(fit_weight=2.0, fit_recall=2)  # the hashing embedder's similarities are low (0.28 here)


def test_popularity_alone_reads_lincoln_as_the_city(index):
    assert index.exact("lincoln") == [CITY, PERSON]
    assert Linker(index).link("who was lincoln's vice president?")[0].id == CITY


def test_the_recalled_statement_binds_only_at_the_person(index, kg, bank):
    fit = MemoryFit(kg, bank)
    assert fit.edges(PERSON) >= {("government.us_president.vice_president", "out")}
    assert ("government.us_president.vice_president", "out") not in fit.edges(CITY)
    links = Linker(index, FIT, fit).link("who was lincoln's vice president?")
    top = links[0]
    assert top.id == PERSON and top.fit > 0 and top.fit_statement == "s0"
    assert CITY in [i for i, _, _ in top.runners_up]
    shown = top.to_json()
    assert shown["fit"] == round(top.fit, 4) and shown["fit_statement"] == "s0"
    # the other question about a Lincoln binds at the city
    assert Linker(index, FIT, fit).link("who is the mayor governing officials of lincoln?")[0].id == CITY
    queries = fit.queries
    Linker(index, FIT, fit).link("who was lincoln's vice president?")
    assert fit.queries == queries  # the edges of an entity are read once


def test_the_statement_s_direction_counts(index, kg, bank):
    fit = MemoryFit(kg, bank)
    # location.location.contains is written with ?entity1 as the object: the city holds it only as a subject
    assert fit.first_edges(bank.get("s2").statement) == {("location.location.contains", "in")}
    assert [st.id for st, _, _ in fit.recalled("what location contains lincoln?", 1)] == ["s2"]
    assert fit.scores("what location contains lincoln?", [CITY, PERSON], recall=1) == {CITY: (0.0, None),
                                                                                        PERSON: (0.0, None)}


def test_without_a_kg_and_bank_or_with_a_zero_weight_the_fit_is_off(index, kg, bank):
    plain = Linker(index).link("who was lincoln's vice president?")[0]
    assert plain.fit is None and "fit" not in plain.to_json()
    off = Linker(index, LinkConfig(fit_weight=0.0), MemoryFit(kg, bank)).link("who was lincoln's vice president?")
    assert off[0].id == CITY and off[0].fit is None


def test_loaders_are_called_on_first_use_and_a_failed_load_turns_the_fit_off(index, kg, bank):
    calls = []
    fit = MemoryFit(lambda: calls.append("kg") or kg, lambda: calls.append("bank") or bank)
    linker = Linker(index, FIT, fit)
    assert calls == []
    assert linker.link("who was lincoln's vice president?")[0].id == PERSON
    assert sorted(calls) == ["bank", "kg"]

    def missing():
        raise MemoryBankError("no such memory bank manifest")

    broken = Linker(index, FIT, MemoryFit(kg, missing))
    assert broken.link("who was lincoln's vice president?")[0].id == CITY  # linked without the fit
    assert broken.fit is None


def test_open_linker_wires_the_fit_from_the_config(index, kg, bank, tmp_path):
    from memq.pipeline import Config

    index.save(tmp_path / "index")
    config = Config(entity_index=str(tmp_path / "index"), link=FIT)
    linker = open_linker(config, kg=kg, bank=lambda: bank)
    assert linker.uses_fit and linker.link("who was lincoln's vice president?")[0].id == PERSON
    assert not open_linker(replace(config, link=LinkConfig(fit_weight=0.0))).uses_fit


def test_link_config_refuses_a_negative_fit_weight():
    with pytest.raises(ValueError, match="fit_weight and commonness_weight must be >= 0, got -1, 0.5"):
        LinkConfig(fit_weight=-1)
    with pytest.raises(ValueError, match="commonness_weight must be >= 0, got 0.6, -0.5"):
        LinkConfig(commonness_weight=-0.5)
    with pytest.raises(ValueError, match="fit_recall and alias_floor must be >= 1, got 6, 5, 3, 4, 0, 2"):
        LinkConfig(fit_recall=0)


# Coherence: two films called "Rings"; the more popular one is the default reading, but only the other shares a CVT
# (a performance, a node without a name) with the character the question also names, the first entity linked. A
# direct edge does not count.
COHERENT = f"""
<{FB}m.0sar> {NAME} "Saruman"@en .
<{FB}m.0ringa> {NAME} "Rings"@en .
<{FB}m.0ringb> {NAME} "Rings"@en .
<{FB}m.0staff> {NAME} "Staff"@en .
<{FB}m.0power> {NAME} "Rings of Power"@en .
<{FB}m.0sar> <{FB}film.film_character.portrayed_in_films> <{FB}m.0perf> .
<{FB}m.0perf> <{FB}film.performance.film> <{FB}m.0ringb> .
<{FB}m.0sar> <{FB}fictional_universe.fictional_character.things> <{FB}m.0staff> .
""" + edges("m.0ringa", "film.film.starring", "m.0p", 2) \
  + edges("m.0sar", "fictional_universe.fictional_character.appears_in", "m.0w", 6)


def store(tmp_path_factory, triples: str) -> OxigraphStore:
    path = tmp_path_factory.mktemp("kg") / "kg.nt"
    path.write_text(triples, encoding="utf-8")
    return OxigraphStore.from_file(path)


@pytest.fixture(scope="module")
def coherent_kg(tmp_path_factory):
    return store(tmp_path_factory, COHERENT)


def test_coherence_prefers_the_reading_one_cvt_joins_with_another_span(coherent_kg, bank):
    index = build_index(coherent_kg, source={"kg": "kg.nt"})
    assert index.exact("rings") == ["m.0ringa", "m.0ringb"]
    fit = MemoryFit(coherent_kg, bank)
    assert fit.connected([("m.0sar", "m.0ringb"), ("m.0sar", "m.0ringa"), ("m.0sar", "m.0staff")]) == {
        frozenset(("m.0sar", "m.0ringb"))}  # the direct edge to the staff does not count
    question = "who plays saruman in rings?"
    plain = LinkConfig(fit_weight=0.0, second_threshold=0.0, coherence_weight=0.0)
    assert {link.id for link in Linker(index, plain, fit).link(question)[:2]} == {"m.0sar", "m.0ringa"}
    # "rings" is part of one more name (Rings of Power): a class word when at most 0 names may have it
    assert len(index.partial("rings")) == 1
    shy = replace(plain, coherence_weight=0.3, coherence_max_names=0)
    assert {link.id for link in Linker(index, shy, fit).link(question)[:2]} == {"m.0sar", "m.0ringa"}
    links = Linker(index, replace(plain, coherence_weight=0.3), fit).link(question)
    assert {link.id for link in links[:2]} == {"m.0sar", "m.0ringb"}
    assert links[0].id == "m.0sar"  # the first choice does not change
    shown = {link.id: link.to_json() for link in links}
    assert shown["m.0ringb"]["coherent"] == "m.0sar" and "coherent" not in shown["m.0sar"]
    queries = fit.queries
    trace = Trace()
    resolve(Linker(index, replace(plain, coherence_weight=0.3), fit), question, None, trace)
    assert fit.queries == queries  # pairs are asked once
    assert "Rings (m.0ringb) from 'rings'" in trace.fallbacks[0]
    assert "one CVT joins it with m.0sar" in trace.fallbacks[0]
    from memq.ask import show  # what memq ask prints
    from memq.types import Answer, Plan

    shown = show(Answer(question, [], "", Plan([]), [], trace))
    assert "Rings (m.0ringb)  from 'rings'" in shown and "(one CVT joins it with m.0sar)" in shown
    with pytest.raises(ValueError, match="coherence_weight"):
        LinkConfig(coherence_weight=-0.1)


# The names beside the first entity: a show's regular cast is a CVT that joins it with a character, Sam Goodson.
# "sam" is the exact name of one entity and part of two more names, the more popular Sam Shepard's first: with one
# candidate a name (`candidates`), Sam Goodson is no reading of "sam" at all, until the KG's entities beside the show
# are read.
BESIDE = f"""
<{FB}m.0show> {NAME} "Anger Management"@en .
<{FB}m.0sam> {NAME} "Sam"@en .
<{FB}m.0shep> {NAME} "Sam Shepard"@en .
<{FB}m.0good> {NAME} "Sam Goodson"@en .
<{FB}m.0dan> {NAME} "Daniela Bobadilla"@en .
<{FB}m.0show> <{FB}tv.tv_program.regular_cast> <{FB}m.0cast> .
<{FB}m.0cast> <{FB}tv.regular_tv_appearance.character> <{FB}m.0good> .
<{FB}m.0cast> <{FB}tv.regular_tv_appearance.actor> <{FB}m.0dan> .
<{FB}m.0show> <{FB}tv.tv_program.genre> <{FB}m.0sam> .
""" + edges("m.0shep", "film.actor.film", "m.0f", 4) + edges("m.0sam", "common.topic.subject", "m.0s", 3)


def test_a_span_reads_a_name_beside_the_first_entity_past_the_popular_ones(tmp_path_factory, bank):
    kg = store(tmp_path_factory, BESIDE)
    index = build_index(kg, source={"kg": "kg.nt"})
    assert [mid for mid, _ in index.partial("sam")] == ["m.0shep", "m.0good"]
    fit = MemoryFit(kg, bank)
    assert fit.beside("m.0show", 10) == (frozenset({"m.0good", "m.0dan"}), True)  # not m.0sam: a direct edge
    assert fit.beside("m.0show", 1)[1] is False  # more than the limit: not all of them
    question = "who plays sam in anger management?"
    plain = LinkConfig(fit_weight=0.0, candidates=1, second_threshold=0.0, max_entities=2, beside=False)
    assert [link.id for link in Linker(index, plain, fit).link(question)] == ["m.0show", "m.0sam"]
    links = Linker(index, replace(plain, beside=True), fit).link(question)
    assert [link.id for link in links] == ["m.0show", "m.0good"]
    assert links[1].mention == "sam" and links[1].coherent == "m.0show"
    assert links[1].score == pytest.approx(max(c[0] for c in Linker(index, plain, fit).candidates(question)
                                               if c[1:3] == (2, 3)) + plain.coherence_weight)
    # a span the training questions read as naming an entity keeps its readings ("harry potter": the franchise)
    read = copy.copy(index)
    read.mentions = MentionCounts({"sam": (5, 3)}, {"sam": {"m.0sam": 3}})
    assert [link.id for link in Linker(read, replace(plain, beside=True), fit).link(question)] == ["m.0show", "m.0sam"]
    # nor where no span the training questions never read could reach the second threshold with the bonus
    queries = fit.queries
    high = replace(plain, beside=True, beside_limit=7, second_threshold=9.0)
    assert [link.id for link in Linker(index, high, fit).link(question)] == ["m.0show"] and fit.queries == queries
    # a first entity with more edges than beside_degree is not read
    shy = replace(plain, beside=True, beside_degree=2)
    assert [link.id for link in Linker(index, shy, fit).link(question)] == ["m.0show", "m.0sam"]
    with pytest.raises(ValueError, match="not a Freebase id"):
        fit.beside("m.0show> ?p ?o } #", 10)
    with pytest.raises(ValueError, match="beside_limit must be >= 1"):
        LinkConfig(beside_limit=0)


def test_coherence_checks_ids_before_they_reach_sparql(coherent_kg, bank):
    with pytest.raises(ValueError, match="not a Freebase id"):
        MemoryFit(coherent_kg, bank).connected([("m.0sar", "m.0x> ?p ?o } #")])


# A place beside a place: two cities called "Fresno"; the more popular one is the default reading, but the question
# names the region of the other right after it ("fresno texas"), and the KG puts only that one in it.
PLACES = f"""
<{FB}m.0fca> {NAME} "Fresno"@en .
<{FB}m.0ftx> {NAME} "Fresno"@en .
<{FB}m.0tx> {NAME} "Texas"@en .
<{FB}m.0fsu> {NAME} "Fresno State University"@en .
<{FB}m.0ftx> <{FB}location.location.containedby> <{FB}m.0county> .
<{FB}m.0county> <{FB}location.location.containedby> <{FB}m.0tx> .
<{FB}m.0tx> <{FB}location.location.contains> <{FB}m.0fsu> .
<{FB}m.0hou> {NAME} "Houston"@en .
<{FB}m.0hou> <{FB}location.location.containedby> <{FB}m.0tx> .
""" + edges("m.0fca", "location.location.contains", "m.0p", 6)


@pytest.fixture(scope="module")
def places_kg(tmp_path_factory):
    return store(tmp_path_factory, PLACES)


def test_a_places_reading_is_the_one_inside_the_region_named_after_it(places_kg, bank):
    index = build_index(places_kg, source={"kg": "kg.nt"})
    assert index.exact("fresno") == ["m.0fca", "m.0ftx"]
    fit = MemoryFit(places_kg, bank)
    assert fit.contained([("m.0ftx", "m.0tx"), ("m.0fca", "m.0tx"), ("m.0fsu", "m.0tx"), ("m.0tx", "m.0ftx")]) == {
        ("m.0ftx", "m.0tx"), ("m.0fsu", "m.0tx")}  # two containedby edges, or contains; not the other way round
    off = LinkConfig(fit_weight=0.0, place_weight=0.0)
    assert Linker(index, off, fit).link("where is fresno texas?")[0].id == "m.0fca"
    on = replace(off, place_weight=0.5)
    links = Linker(index, on, fit).link("where is fresno texas?")
    assert links[0].id == "m.0ftx" and links[0].to_json()["within"] == "m.0tx"
    assert links[0].to_json()["within_name"] == "Texas"
    assert all("within" not in link.to_json() for link in links[1:])
    # the region must come right after the place, and a question without one reads the popular city
    assert Linker(index, on, fit).link("where is fresno?")[0].id == "m.0fca"
    assert Linker(index, on, fit).link("is texas where fresno is?")[0].id != "m.0ftx"
    # a place is named exactly: the university inside Texas that "fresno" is part of gains nothing
    assert all(c[6][3:] == () for c in Linker(index, on, fit).candidates("where is fresno texas?")
               if c[3] == "m.0fsu")
    trace = Trace()
    resolve(Linker(index, on, fit), "where is fresno texas?", None, trace)
    assert "the KG puts it in Texas (m.0tx), named beside it" in trace.fallbacks[0]
    from memq.ask import show  # what memq ask prints
    from memq.types import Answer, Plan

    assert "(in Texas (m.0tx), named beside it)" in show(Answer("where is fresno texas?", [], "", Plan([]), [], trace))
    with pytest.raises(ValueError, match="nested_exact_weight and neighbour_weight must be >= 0"):
        LinkConfig(place_weight=-0.5)


def test_the_region_that_places_a_place_is_a_second_reading(places_kg, bank):
    """"where to stay in paris france?": France, the region that placed Paris, was a topic entity of its own, and the
    plan checked that the hotels lie in France (held-out WebQSP dev, 1 -> 0.67). Of the 37 WebQSP train questions where
    the linker reads a place so, none has the region among its gold topic entities; so the region becomes a second
    reading (optional, left out of the planner's prompt), and the place stays the entity."""
    from memq.link.constraints import linked_entities

    index = build_index(places_kg, source={"kg": "kg.nt"})
    fit = MemoryFit(places_kg, bank)
    on = LinkConfig(fit_weight=0.0, place_weight=0.5)
    assert on.regions_apart
    links = Linker(index, on, fit).link("where is fresno texas?")
    assert [(x.id, x.alternative) for x in links] == [("m.0ftx", False), ("m.0tx", True)]
    apart = Linker(index, replace(on, regions_apart=False), fit).link("where is fresno texas?")
    assert [(x.id, x.alternative) for x in apart] == [("m.0ftx", False), ("m.0tx", False)]
    # a region named without a place before it is an entity as before
    assert [(x.id, x.alternative) for x in Linker(index, on, fit).link("where is texas?")] == [("m.0tx", False)]
    trace = Trace()
    entities, optional, second = linked_entities(Linker(index, on, fit), "where is fresno texas?", None, trace)
    assert second == ("m.0tx",) and "m.0tx" not in entities and optional["m.0tx"] == "Texas"  # left out of the prompt
    assert "m.0ftx" in {**entities, **optional}
    assert linked_entities(Linker(index, replace(on, regions_apart=False), fit), "where is fresno texas?", None,
                           Trace())[2] == ()
    # a region the KG puts a place linked right beside it in, before or after it, where the place had one reading
    # and placed() asked nothing: "newark california", "texas houston" (LinkConfig.regions_beside; 0 of 44 in train)
    for question in ("what time is it in houston texas?", "what time is it in texas houston?"):
        links = Linker(index, on, fit).link(question)
        assert {(x.id, x.alternative) for x in links} == {("m.0hou", False), ("m.0tx", True)}, question
        assert next(x for x in links if x.id == "m.0hou").within_name == "Texas"
        alone = Linker(index, replace(on, regions_beside=False), fit).link(question)
        assert {(x.id, x.alternative) for x in alone} == {("m.0hou", False), ("m.0tx", False)}, question
    # not beside each other, or not in it: both entities
    for question in ("is texas where houston is?", "what time is it in houston fresno?"):
        links = Linker(index, on, fit).link(question)
        assert len(links) == 2 and not any(x.alternative for x in links), question


def test_a_state_s_postal_code_after_a_place_names_its_region(places_kg, bank):
    """ "what to do san jose ca", "what county is st paul nc in": WebQSP ends 53 questions with a US state's postal
    code (32 train, 21 test), and "ca" reads no entity, so the place rule could not tell San Jose, California from San
    José, Costa Rica. A code that ends the question, but for function words, now names its state for the place
    before it."""
    from memq.link.context import state_code

    assert state_code("what county is frederick md in".split(), 4) == "maryland"
    assert state_code("where is washington dc".split(), 3) == "washington d c"  # as the index's keys are written
    assert state_code("what la teams play there".split(), 1) is None  # inside the question: a word, a name's part
    assert state_code("what county is paris in".split(), 4) is None  # "in", "or", "me", "hi", "oh", "ok", "id": words
    index = build_index(places_kg, source={"kg": "kg.nt"})
    fit = MemoryFit(places_kg, bank)
    on = LinkConfig(fit_weight=0.0)
    assert on.state_codes
    links = Linker(index, on, fit).link("where is fresno tx?")
    assert links[0].id == "m.0ftx" and links[0].to_json()["within"] == "m.0tx"
    assert Linker(index, replace(on, state_codes=False), fit).link("where is fresno tx?")[0].id == "m.0fca"
    assert Linker(index, on, fit).link("where is fresno tx airport?")[0].id == "m.0fca"  # not at the question's end
    assert Linker(index, on, fit).link("where is fresno ca?")[0].id == "m.0fca"  # no California in this KG: as before


WALTON = f"""
<{FB}m.0walton> {NAME} "Walton"@en .
<{FB}m.0goggins> {NAME} "Walton Goggins"@en .
<{FB}m.0in> {NAME} "Indiana"@en .
<{FB}m.0walton> <{FB}location.location.containedby> <{FB}m.0in> .
""" + edges("m.0goggins", "film.actor.film", "m.0f", 12) + edges("m.0in", "location.location.contains", "m.0c", 8)


def test_a_place_named_by_no_other_place_gains_by_the_region_after_it_too(tmp_path_factory, bank):
    """ "walton" reads one place, Walton, and the more popular Walton Goggins, a part of whose name it is. The place
    rule asked for two readings with the span's exact name (two places called Fresno), so the town in Indiana gained
    nothing; one is enough now (place_readings 1), when the span has another reading to be told from."""
    kg = store(tmp_path_factory, WALTON)
    index, fit = build_index(kg, source={"kg": "kg.nt"}), MemoryFit(kg, bank)
    on = LinkConfig(fit_weight=0.0)
    links = Linker(index, on, fit).link("where is walton indiana?")
    assert links[0].id == "m.0walton" and links[0].to_json()["within"] == "m.0in"
    before = Linker(index, replace(on, place_readings=2), fit).link("where is walton indiana?")
    assert "m.0walton" not in [link.id for link in before] and before[0].id in ("m.0in", "m.0goggins")
    with pytest.raises(ValueError, match="place_readings >= 1"):
        LinkConfig(place_readings=0)


def test_places_check_ids_before_they_reach_sparql(places_kg, bank):
    with pytest.raises(ValueError, match="not a Freebase id"):
        MemoryFit(places_kg, bank).contained([("m.0ftx", "m.0x> ?p ?o } #")])
