"""Entity linking (memq.link): the index built from a small hand-made KG, the linker, and questions asked without
ids through Pipeline.answer, memq.answer, memq ask and memq serve."""

from __future__ import annotations

import copy
import json
from dataclasses import replace

import pytest
from fastapi.testclient import TestClient
from test_answer import TRIPLES, SpyKG, _question

import memq
from memq import api
from memq.errors import EntityIndexError, LinkingError
from memq.kg.oxigraph import OxigraphStore
from memq.link.context import numbered_initials, numeral_value, pronoun_us, roman, roman_key, spelling
from memq.link.demonyms import asks_language, countries, demonyms, plural, plurals, speakers
from memq.link.index import ENTITIES, MANIFEST, EntityIndex, MentionCounts, build_index, normalize
from memq.link.linker import Link, Linker, quoted
from memq.link.mentions import link_entries, mention_counts
from memq.link.resolve import resolve
from memq.link.settings import LinkConfig
from memq.pipeline import Config, Pipeline
from memq.types import Plan, Trace

FB = "http://rdf.freebase.com/ns/"
NAME = f"<{FB}type.object.name>"
ALIAS = f"<{FB}common.topic.alias>"
# Two entities called Jamaica (the country has more triples), an alias, a synthetic distractor with a real name, a
# French name that is not indexed, and a name with SPARQL syntax in it
EXTRA = f"""
<{FB}m.0nn1zzq> {NAME} "Jamaica"@en .
<{FB}m.03_r3> {ALIAS} "JA"@en .
<http://memq.dev/synthetic/ent_1> {NAME} "Justin Bieber"@en .
<{FB}m.0fr> {NAME} "Jamaïque"@fr .
<{FB}m.0fr> <{FB}people.person.gender> <{FB}m.05zppz> .
<{FB}m.0odd> {NAME} "Odd \\"}} UNION {{ ?s ?p ?o\\" name"@en .
"""


@pytest.fixture(scope="module")
def kg(tmp_path_factory):
    path = tmp_path_factory.mktemp("linkkg") / "kg.nt"
    path.write_text(TRIPLES + EXTRA, encoding="utf-8")
    return SpyKG(OxigraphStore.from_file(path))


@pytest.fixture(scope="module")
def index(kg):
    return build_index(kg, source={"kg": "kg.nt"})


def test_normalize_folds_case_accents_possessives_and_punctuation():
    assert normalize("Côte d'Ivoire's  Capital!") == "cote d ivoire capital"
    assert normalize("What does JAMAICAN people speak?") == "what does jamaican people speak"
    assert normalize("?!") == ""


def test_the_index_holds_named_freebase_ids_with_aliases_and_degrees(index):
    assert "m.03_r3" in index and index.name("m.03_r3") == "Jamaica"
    assert index.degree("m.03_r3") == 5  # 1 name + 3 languages edges + 1 alias as subject; no triple points at it
    assert not any(i.startswith("http") for i in index.ids)  # the synthetic distractor is left out
    assert "m.0fr" not in index  # its only name is French
    assert index.exact("jamaica") == ["m.03_r3", "m.0nn1zzq"]  # most popular first
    assert index.exact("ja") == ["m.03_r3"]  # the alias
    assert dict(index.partial("bieber")) == {"m.06w2sn5": 6 / 13, "m.0gxnnwq": 6 / 12, "m.0jazz01": 6 / 13}
    assert dict(index.partial("jb")) == {"m.06w2sn5": 0.5, "m.0gxnnwq": 0.5, "m.0jazz01": 0.5}  # initials
    assert index.name("m.0odd") == 'Odd "} UNION { ?s ?p ?o" name'  # a name is data, never query text
    assert [n for n, _ in index.fuzzy("jamaican")] == ["jamaica"]
    assert index.fuzzy("zzzz") == []


def test_an_index_round_trips_and_a_changed_file_is_refused(index, tmp_path):
    index.mentions = {"jamaican": (3, 2)}
    index.save(tmp_path / "idx")
    loaded = EntityIndex.load(tmp_path / "idx")
    assert loaded.ids == index.ids and loaded.degrees == index.degrees and loaded.aliases == index.aliases
    assert loaded.mentions == {"jamaican": (3, 2)}
    manifest = json.loads((tmp_path / "idx" / MANIFEST).read_text())
    assert manifest["counts"]["entities"] == len(index) and manifest["source"] == {"kg": "kg.nt"}
    entities = tmp_path / "idx" / ENTITIES
    entities.write_text(entities.read_text().replace("Jamaica", "Jamaika"))
    with pytest.raises(EntityIndexError, match="entities.tsv: sha256 does not match the manifest"):
        EntityIndex.load(tmp_path / "idx")
    with pytest.raises(EntityIndexError, match="no such entity index manifest"):
        EntityIndex.load(tmp_path / "nothing")
    index.mentions = {}


def test_an_endpoint_is_read_page_by_page_with_the_same_result(kg, index):
    class Paged:
        """Answers at most 4 rows a query, as an endpoint's row cap would, and records the queries."""

        def __init__(self):
            self.queries = []

        def select(self, query, timeout=None):
            self.queries.append(query)
            rows = kg.select(query, timeout=timeout)
            assert len(rows) <= 4 or "LIMIT" not in query
            return rows

    paged = Paged()
    built = build_index(paged, page=4)
    assert built.ids == index.ids and built.degrees == index.degrees and built.names == index.names
    assert all("ORDER BY" in q and "LIMIT 4 OFFSET" in q for q in paged.queries)
    assert any("OFFSET 8" in q for q in paged.queries)


def test_the_linker_finds_a_demonym_and_prefers_the_popular_entity(index):
    links = Linker(index).link("what does jamaican people speak?")
    assert [link.id for link in links][:1] == ["m.03_r3"]
    top = links[0]
    assert top.mention == "jamaican" and 0.85 < top.match < 1.0 and top.score > 1.0
    assert "m.0nn1zzq" in [i for i, _, _ in top.runners_up]
    assert Linker(index).link("what is the weather like?") == []


def test_an_adjective_finds_the_place_or_creed_it_is_formed_from():
    """Fuzzy matching finds "jamaica" for "jamaican" (one letter apart), not "egypt" for "egyptian": the names an
    adjective may be formed from are matched too, and the popular place wins over a name that holds the word."""
    rows = [("m.02k54", 900, "Egypt"), ("m.02hx2cr", 40, "Egyptian Arabic"), ("m.05r4w", 900, "Portugal"),
            ("m.05zjd", 300, "Portuguese Language"), ("m.0flw86", 500, "Islam"), ("m.03s0c", 50, "Island"),
            ("m.0d05w3", 900, "China"), ("m.0egypt", 5, "Egyptology")]
    index = EntityIndex([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [() for _ in rows])
    assert index.bases("egyptian") == ["egypt"] and index.bases("portuguese") == ["portugal"]
    assert index.bases("islamic") == ["islam"] and index.bases("chinese") == ["china"]  # not "island"
    assert index.bases("egypt") == [] and index.bases("egyptian arabic") == []  # no adjective, or two words
    assert index.bases("egyptianish") == []  # "egypt" would leave it too long an ending, as "accola" "accomplish"
    linker = Linker(index)
    assert [link.id for link in linker.link("what language does egyptian people speak?")][:1] == ["m.02k54"]
    assert [link.id for link in linker.link("what do portuguese people speak?")][:1] == ["m.05r4w"]
    off = Linker(index, replace(LinkConfig(), base_match=0.0, demonym_match=0.0))  # "egyptian people": a demonym too
    assert "m.02k54" not in [link.id for link in off.link("what language does egyptian people speak?")]
    assert "m.02k54" not in [link.id for link in off.link("what language does egyptian speak?")]
    assert [link.id for link in Linker(index, replace(LinkConfig(), demonym_match=0.0)).link(
        "what language does egyptian speak?")][:1] == ["m.02k54"]  # the adjective rule alone


def test_a_name_written_after_a_title_is_found_without_it():
    """ "st augustine" is part of a song's name, and the saint is "Augustine of Hippo"; "king" of "king henry viii"
    is a name of its own. A span that starts with a title also matches what the rest of it matches, a little below
    the span's own exact name ("st paul" is St. Paul before Saint Paul), and "st" is written out ("st peter")."""
    rows = [("m.0w6w", 300, "Augustine of Hippo"), ("m.0song", 40, "I Dreamed I Saw St. Augustine"),
            ("m.03p77", 300, "Henry VIII of England"), ("m.0king", 300, "King"), ("m.071wp", 200, "Saint Peter"),
            ("m.0peter", 250, "Peter Crouch"), ("m.013nm2", 60, "St. Paul"), ("m.0b2lw", 60, "Saint Paul")]
    index = EntityIndex([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [() for _ in rows])
    linker, off = Linker(index), Linker(index, replace(LinkConfig(), title_match=0.0))
    assert [link.id for link in linker.link("what did st augustine do?")] == ["m.0w6w"]
    assert [link.id for link in off.link("what did st augustine do?")][:1] == ["m.0song"]
    assert [link.id for link in linker.link("what did king henry viii rule?")] == ["m.03p77"]
    assert "m.0king" in [link.id for link in off.link("what did king henry viii rule?")]
    assert [link.id for link in linker.link("where was st peter killed?")][:1] == ["m.071wp"]
    assert [link.id for link in off.link("where was st peter killed?")][:1] == ["m.0peter"]
    assert [link.id for link in linker.link("what county is st paul va in?")][:1] == ["m.013nm2"]


def test_a_span_that_starts_with_a_title_and_is_an_exact_name_reads_that_name_first():
    """ "miss america" is the pageant's exact name, and the title rule read "america" too: the United States of
    America, far more popular, came first. Where the whole span is an exact name, its title's readings score just
    below that name (they stay runners-up); a titled span that is no exact name reads the rest as before."""
    rows = [("m.09c7w0", 5000, "United States of America"), ("m.01bk3n", 30, "Miss America"),
            ("m.0w6w", 300, "Augustine of Hippo")]
    index = EntityIndex([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [() for _ in rows])
    linker, before = Linker(index), Linker(index, replace(LinkConfig(), title_exact_first=False))
    question = "what year was the first miss america pageant held?"
    assert [link.id for link in before.link(question)][:1] == ["m.09c7w0"]
    first = linker.link(question)[0]
    assert first.id == "m.01bk3n" and "m.09c7w0" in [r[0] for r in first.runners_up]
    assert [link.id for link in linker.link("what did st augustine do?")] == ["m.0w6w"]


def test_a_fuzzy_match_that_swaps_a_word_for_another_is_no_reading():
    """ "prime minister of spain" is within the fuzzy cutoff of "prime minister of canada" as a whole, and linked the
    Canadian office; "scream 3" read "Scream 2". A fuzzy name with a content word that matches no word of the span,
    where the span has one that matches no word of the name, is not a reading; a misspelling, a word more, or a
    short form inside a word is."""
    from memq.link.linker import swaps_a_word

    assert swaps_a_word("prime minister of spain", "prime minister of canada", 70)
    assert swaps_a_word("scream 3", "scream 2", 70) and swaps_a_word("men in black 3", "men in black ii", 70)
    assert not swaps_a_word("montesquie", "montesquieu", 70)
    assert not swaps_a_word("natalie portman play", "natalie portman", 70)  # a word more on one side only
    assert not swaps_a_word("vince scully", "vin scully", 70)
    assert not swaps_a_word("cruella deville", "cruella de vil", 70)
    rows = [("m.060m4", 300, "Prime Minister of Canada"), ("m.06mkj", 900, "Spain"), ("m.060bp", 200, "Prime minister")]
    index = EntityIndex([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [() for _ in rows])
    question = "who is the prime minister of spain?"
    before = Linker(index, replace(LinkConfig(), fuzzy_words=0.0)).link(question)
    assert before[0].id == "m.060m4"
    assert {link.id for link in Linker(index).link(question)} == {"m.06mkj", "m.060bp"}
    with pytest.raises(ValueError, match="fuzzy_words is a rapidfuzz ratio"):
        LinkConfig(fuzzy_words=-1)


def test_a_span_that_starts_or_ends_with_a_function_word_reads_exact_names_only():
    """ "what is the largest unit of frequency in terms of hertz?" linked *Astronomical Unit of Mass* from "unit of":
    the function word made the span cover more of the name than "unit" alone does. A span that starts or ends with
    one reads exact names only ("the beatles" still reads The Beatles); the span without it reads the names it is a
    part of."""
    rows = [("m.0aum", 300, "Astronomical Unit of Mass"), ("m.0hz", 50, "Hertz"), ("m.0bt", 900, "The Beatles")]
    index = EntityIndex([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [() for _ in rows])
    question = "what is the largest unit of frequency in terms of hertz?"

    def readings(config):
        return {key: {mid for mid, _ in matches} for _, _, key, matches in Linker(index, config).spans(question)}

    before = readings(replace(LinkConfig(), content_edges=False))
    assert "m.0aum" in before["unit of"] and "m.0aum" in before["unit"]
    now = readings(LinkConfig())
    assert "unit of" not in now and now["unit"] == {"m.0aum"}  # a part of the name, as it was
    old = {x.id: x for x in Linker(index, replace(LinkConfig(), content_edges=False)).link(question)}
    new = {x.id: x for x in Linker(index).link(question)}
    assert old["m.0aum"].mention == "unit of" and new["m.0aum"].mention == "unit"  # it covers less of the name
    assert new["m.0aum"].score < old["m.0aum"].score
    beatles = {key: {mid for mid, _ in m} for _, _, key, m in Linker(index).spans("who were the beatles?")}
    assert beatles["the beatles"] == {"m.0bt"}


def test_a_number_after_a_word_reads_the_names_that_write_it_as_a_roman_numeral():
    """ "when did world war 2 end?" linked *World War I*: names write the number of a war, a sequel or a monarch as a
    Roman numeral, so "world war 2" had no exact reading, and "world war i" was the closest fuzzy one. A number of 1
    to 99 after a word is now looked up written so too; one after a function word or another number is not."""
    rows = [("m.0ww1", 900, "World War I"), ("m.0ww2", 800, "World War II"), ("m.0ep3", 300,
            "Star Wars Episode III: Revenge of the Sith"), ("m.0h8", 200, "Henry VIII of England"), ("m.0ii", 50, "II")]
    index = EntityIndex([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [() for _ in rows])
    off = replace(LinkConfig(), numerals=False)
    assert [x.id for x in Linker(index, off).link("when did world war 2 end?")][:1] == ["m.0ww1"]
    assert [x.id for x in Linker(index).link("when did world war 2 end?")][:1] == ["m.0ww2"]
    assert [x.id for x in Linker(index).link("when did world war 1 start?")][:1] == ["m.0ww1"]
    spans = {key: dict(m) for _, _, key, m in Linker(index).spans("who played vader in episode 3?")}
    assert spans["episode 3"] == {"m.0ep3": spans["episode 3"]["m.0ep3"]} and spans["episode 3"]["m.0ep3"] < 1.0
    assert "m.0h8" in {x.id for x in Linker(index).link("how many wives did henry 8 have?")}
    assert roman_key("in 2".split()) is None and roman_key("2 fast".split()) is None  # "II" stays unread
    assert roman_key("may 2 2010".split()) == "may ii 2010" and roman(49) == "xlix"
    with pytest.raises(ValueError, match="100"):
        roman(100)


def test_a_word_that_is_a_name_s_initials_and_its_number_reads_that_name():
    """ "wwii" read no war (a name's initials take its numeral's first letter: "wwi" is the initials of both wars, and
    "wwii" those of the Williamite War in Ireland), and "ww1" nothing. A word of two letters or more and a number, in
    digits or as a Roman numeral, now reads the name whose words' initials and last word they are."""
    rows = [("m.0ww1", 900, "World War I"), ("m.0ww2", 800, "World War II"),
            ("m.0wwi", 100, "Williamite War in Ireland"), ("m.0nfl", 700, "National Football League")]
    index = EntityIndex([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [() for _ in rows])
    assert numbered_initials(index, "wwii") == numbered_initials(index, "ww2") == ["m.0ww2"]
    assert numbered_initials(index, "ww1") == numbered_initials(index, "wwi") == ["m.0ww1"]
    assert numbered_initials(index, "nfl") == [] and numbered_initials(index, "ww") == []
    values = [numeral_value(t) for t in ("2", "ii", "xiv", "iiii", "il", "0", "100")]
    assert values == [2, 2, 14, None, None, None, None]
    assert numeral_value("xc") == 90 and numeral_value("xlix") == 49
    off = replace(LinkConfig(), numerals=False)
    question = "who led the us during wwii?"
    assert "m.0ww2" not in {x.id for x in Linker(index, off).link(question)}
    assert [x.id for x in Linker(index).link(question)][:1] == ["m.0ww2"]
    assert [x.id for x in Linker(index).link("who won ww1?")][:1] == ["m.0ww1"]


def test_initials_with_full_stops_and_words_with_an_ampersand_read_as_names_write_them():
    """ "u.s." normalised to the two one-letter words "u s", which name nothing, and "the u.k." read nothing; "at&t"
    to "at t", two function words, never looked up; "tom & jerry" to "tom jerry", no run of "Tom and Jerry". Initials
    written with full stops are now also read joined (and counted by the mention prior as the joined word), a word
    written with "&" is a word, and "&" between words reads "and"."""
    rows = [("m.0usa", 900, "United States of America", ()), ("m.0uk", 800, "United Kingdom", ("UK",)),
            ("m.0att", 300, "AT&T", ()), ("m.0tj", 200, "Tom and Jerry", ()), ("m.0tom", 400, "Tom", ()),
            ("m.0us", 20, "Us", ())]
    mentions = MentionCounts({"us": (20, 10)}, {"us": {"m.0usa": 9}})  # "us" a learnt alias of the United States
    index = EntityIndex(*([r[k] for r in rows] for k in range(4)), mentions=mentions)
    # off: neither the spellings nor the words beside a span ("tom" beside "jerry" also reads Tom and Jerry)
    on, off = Linker(index), Linker(index, replace(LinkConfig(), spellings=False, neighbour_weight=0.0))
    for question, mid in [("what language do u.s. citizens speak?", "m.0usa"), ("who rules the u.k.?", "m.0uk"),
                          ("who owns at&t?", "m.0att"), ("who voices tom in tom & jerry?", "m.0tj")]:
        assert [x.id for x in off.link(question)][:1] != [mid], question
        assert [x.id for x in on.link(question)][:1] == [mid], question
    assert "us" in {key for _, _, key, _ in on.spans("what language do u.s. citizens speak?")}  # as the prior counts it
    written = spelling("the U.S.A., at&t, r&b & d.c. in 1.5 u. s. hours")
    assert set(written.initials.values()) == {"usa", "dc"} and len(written.glued) == 2 and len(written.ands) == 1
    assert not spelling("in 1.5 u. s. hours") and not spelling("a & b").initials
    tokens = normalize("the U.S.A. today").split()
    assert spelling("the U.S.A. today").key(tokens, 0, 4) == "the usa"
    assert spelling("the U.S.A. today").key(tokens, 0, 2) is None  # a span that holds a part of the initials


def test_us_as_a_verb_s_object_is_the_pronoun():
    """ "can you tell us who the president of france is?" linked the United States beside France: "us" reads the
    country (a learnt alias). A lower-case "us" right after a verb it is the object of, before a function word or
    nothing, now reads nothing; "show us presidents" (before a content word) and "tell US who" keep the country."""
    rows = [("m.0usa", 900, "United States of America", ()), ("m.0fr", 800, "France", ())]
    mentions = MentionCounts({"us": (20, 10)}, {"us": {"m.0usa": 9}})
    index = EntityIndex(*([r[k] for r in rows] for k in range(4)), mentions=mentions)
    on, off = Linker(index), Linker(index, replace(LinkConfig(), spellings=False))
    question = "can you tell us who the president of france is?"
    assert [x.id for x in off.link(question)] == ["m.0fr", "m.0usa"]
    assert [x.id for x in on.link(question)] == ["m.0fr"]
    assert pronoun_us('who said "let us do or die."?') == [3] and pronoun_us("tell us.") == [1]
    assert pronoun_us("show us presidents") == pronoun_us("tell US who") == pronoun_us("what does the us export?") == []
    assert "m.0usa" in {x.id for x in on.link("what do they tell US about france?")}


def test_a_name_s_initials_are_read_without_its_suffix():
    """ "where did mlk go to college?" read *Michael LeMoyne Kennedy*: the initials of "Martin Luther King, Jr." were
    "mlkj". A name of four words or more that ends with Jr. or Sr. has its initials without the suffix too; a
    shorter one does not ("John Smith Jr." is no "js")."""
    rows = [("m.0mlk", 900, "Martin Luther King, Jr."), ("m.0kennedy", 300, "Michael LeMoyne Kennedy"),
            ("m.0js", 50, "John Smith Jr.")]
    index = EntityIndex([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [() for _ in rows])
    assert {mid for mid, _ in index.partial("mlk")} == {"m.0mlk", "m.0kennedy"}
    assert {mid for mid, _ in index.partial("mlkj")} == {"m.0mlk"} and not index.partial("js")
    assert Linker(index).link("where did mlk go to college?")[0].id == "m.0mlk"


def test_a_language_or_its_country_is_read_by_the_class_the_question_asks_for():
    """ "german" reads German Language and Germany (a fuzzy match, more popular): "what countries speak german?"
    asks for countries and names the language, "what languages do portuguese people speak?" asks for languages and
    names the country. The reading of the class not asked for gains asked_other; a question that asks for neither,
    or a span with one reading, is as before."""
    rows = [("m.0germany", 900, "Germany"), ("m.0german", 200, "German Language"), ("m.0portugal", 300, "Portugal"),
            ("m.0portuguese", 900, "Portuguese Language")]
    index = EntityIndex([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [() for _ in rows])
    linker, off = Linker(index), Linker(index, replace(LinkConfig(), asked_other=0.0))
    assert off.link("what countries speak german?")[0].id == "m.0germany"
    assert linker.link("what countries speak german?")[0].id == "m.0german"
    assert linker.link("which nations speak german?")[0].id == "m.0german"
    assert off.link("what languages do portuguese people speak?")[0].id == "m.0portuguese"
    assert linker.link("what languages do portuguese people speak?")[0].id == "m.0portugal"
    for question in ("who is german?", "what language family is german in?"):  # asks for neither
        assert linker.link(question)[0].id == off.link(question)[0].id
    with pytest.raises(ValueError, match="asked_other and unread_weight must be >= 0"):
        LinkConfig(asked_other=-1)
    # a span said to be spoken reads the language, however the question asks (LinkConfig.spoken)
    unsaid = Linker(index, replace(LinkConfig(), spoken=False))
    for question in ("where do they speak german?", "what german speaking country has the capital bonn?",
                     "what german-speaking country has the lowest iso number?", "where is german spoken?",
                     "who speaks german?"):
        assert unsaid.link(question)[0].id == "m.0germany", question
        assert linker.link(question)[0].id == "m.0german", question
    # but not a people who speak: "what do portuguese speak?" asks for a language (LinkConfig.speech_asked), so the
    # country, as the test below says
    unasked = Linker(index, replace(LinkConfig(), speech_asked=False))
    assert unasked.link("what do portuguese speak?")[0].id == off.link("what do portuguese speak?")[0].id


def test_a_question_asking_what_someone_speaks_asks_for_a_language_and_its_speakers_name_their_country():
    """ "what do portuguese people speak?" asks for a language without the word, so the country the demonym reads
    gains asked_other; "what language is spoken in greek?" writes a singular demonym that only a question asking for
    a language reads as its country (LinkConfig.speech_asked). A span said to be spoken, or one before "language",
    still reads the language; a question about a speech asks for none."""
    rows = [("m.0greece", 900, "Greece"), ("m.0greek", 300, "Greek Language"), ("m.0portugal", 300, "Portugal"),
            ("m.0portuguese", 900, "Portuguese Language")]
    index = EntityIndex([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [() for _ in rows])
    linker, unasked = Linker(index), Linker(index, replace(LinkConfig(), speech_asked=False))

    def read(linker: Linker, question: str, word: str) -> str:  # the best reading of the one-word span ``word``
        at = normalize(question).split().index(word)
        return next(c[3] for c in linker.candidates(question) if (c[1], c[2]) == (at, at + 1))

    for question, word, country, language in (
            ("what do portuguese people speak?", "portuguese", "m.0portugal", "m.0portuguese"),
            ("what language is spoken in greek?", "greek", "m.0greece", "m.0greek"),
            ("what kind of language do greek speak?", "greek", "m.0greece", "m.0greek")):
        assert read(unasked, question, word) == language, question
        assert read(linker, question, word) == country, question
    for question in ("what countries speak greek?", "where is greek language spoken?", "what does greek mean?",
                     "what did the greek speak about?",
                     "what country speaks portuguese and has greek as its language?"):
        assert read(linker, question, "greek") == read(unasked, question, "greek") == "m.0greek", question
    tokens = "what language do they speak in greek".split()
    assert speakers(tokens, 6) and not speakers("what countries speak greek".split(), 3)
    assert not speakers("where is greek language spoken".split(), 2)
    assert asks_language("what do portuguese people speak", speech=True)
    assert not asks_language("what do portuguese people speak") and not asks_language("what did he speak about", True)
    assert not asks_language("what country speaks italian but has german as its official language", speech=True)


def test_a_part_of_a_name_written_with_capitals_that_nothing_reads_loses_unread_weight():
    """ "Peter Minuit" is written as a name, and the index reads it nowhere whole: "peter", a part of *Peter Crouch*,
    is seldom him. A part of a written name that is read whole ("Hector Camacho"), an exact name inside an unread
    one, a reading whose name is close to the written one ("Payton Manning"), and a question in lower case are as
    before."""
    from memq.link.capitals import cased_runs

    question = "Where does Hector Camacho live and has assets owned by Peter Minuit?"
    tokens = normalize(question).split()
    assert [" ".join(tokens[a:b]) for a, b in cased_runs(question, tokens)] == ["hector camacho", "peter minuit"]
    assert cased_runs(question.lower(), normalize(question).split()) == []
    title = "Where Does Hector Camacho Live And Has Assets Owned By Peter Minuit?"  # a title: most words capitalised
    assert cased_runs(title, normalize(title).split()) == []
    odd = "Which peer of the Order of St Michael and St George was Côte d'Ivoire's President?"
    assert [" ".join(normalize(odd).split()[a:b]) for a, b in cased_runs(odd, normalize(odd).split())] == [
        "order of st michael", "st george", "cote d ivoire president"]
    rows = [("m.0crouch", 40, "Peter Crouch"), ("m.0hector", 30, "Héctor Camacho"), ("m.0minuit", 5, "Minuit"),
            ("m.0big", 1000, "Big Entity")]
    index = EntityIndex([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [() for _ in rows])
    off = Linker(index, replace(LinkConfig(), unread_weight=0.0))
    assert [link.id for link in off.link(question)] == ["m.0hector", "m.0crouch", "m.0minuit"]
    assert [link.id for link in Linker(index).link(question)] == ["m.0hector", "m.0minuit"]  # Minuit: exact
    assert [link.id for link in Linker(index).link(question.lower())] == [link.id for link in off.link(question)]
    # "and" joins no two names; a reading whose name is close to the written one is kept (a name misspelt)
    two = "Name the movie Demi Moore and Tupac played in."
    assert [" ".join(normalize(two).split()[a:b]) for a, b in cased_runs(two, normalize(two).split())] == ["demi moore"]
    rows.append(("m.0peyton", 40, "Peyton Manning"))
    index = EntityIndex([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [() for _ in rows])
    misspelt = "What team did Payton Manning play for?"
    with pytest.raises(ValueError, match=r"unread_weight must be >= 0 \(0: off\), got 0.6, -0.5"):
        LinkConfig(unread_weight=-0.5)
    kept = Linker(index).link(misspelt)[0]
    unruled = Linker(index, replace(LinkConfig(), unread_weight=0.0)).link(misspelt)[0]
    assert (kept.id, kept.mention) == ("m.0peyton", "manning") and kept.score == pytest.approx(unruled.score)


def test_an_exact_name_inside_a_longer_exact_name_loses_to_it():
    """ "north africa" is North Africa's exact name, and "africa" and "north" are exact names of their own: the more
    popular Africa won, and North came beside it. A reading of a span inside a longer span that is some entity's
    exact name loses nested_exact_weight even when it is its own span's exact name, so the longest name wins; a
    name with no longer name around it loses nothing. 0 turns it off."""
    rows = [("m.0africa", 900, "Africa"), ("m.0nafrica", 20, "North Africa"), ("m.0north", 100, "North"),
            ("m.0egypt", 800, "Egypt")]
    index = EntityIndex([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [() for _ in rows])
    question = "what are all the countries in north africa?"
    assert [link.id for link in Linker(index, LinkConfig(nested_exact_weight=0.0)).link(question)] == [
        "m.0africa", "m.0north"]
    assert [link.id for link in Linker(index).link(question)] == ["m.0nafrica"]
    assert [link.id for link in Linker(index).link("what are all the countries in africa?")] == ["m.0africa"]
    on, off = (Linker(index, LinkConfig(nested_exact_weight=w)).link("is egypt in north africa?") for w in (0.5, 0))
    assert [link.id for link in on] == ["m.0egypt", "m.0nafrica"]
    assert on[0].score == next(link.score for link in off if link.id == "m.0egypt")
    with pytest.raises(ValueError, match="nested_exact_weight"):
        LinkConfig(nested_exact_weight=-0.1)


def test_a_demonym_reads_the_country_it_names(tmp_path):
    """ "italians" (a plural) and "british people" (a singular before "people", formed otherwise than "united
    kingdom") name their countries: data/demonyms/demonyms.tsv, countryinfo's demonyms, gives the span the most
    popular entity with the country's exact name at demonym_match, also where the span is an exact name of its own
    ("maltese"). Not a plural after a word that is no stop word ("lakota indians" is a people), nor a
    singular alone ("speak maltese" is the language); 0 turns it off."""
    assert (plural("italian"), plural("new zealander"), plural("portuguese"), plural("british")) == (
        "italians", "new zealanders", "portuguese", "british")
    table = demonyms()
    assert table["italians"] == table["italian"] == ("italy",) and table["british"] == ("united kingdom",)
    assert table["greeks"] == ("greece",) and table["french"][0] == "france"
    assert "italians" in plurals() and "italian" not in plurals() and "portuguese" not in plurals()
    rows = [("m.0italy", 900, "Italy"), ("m.0uk", 950, "United Kingdom"), ("m.0malta", 300, "Malta"),
            ("m.0maltese", 40, "Maltese"), ("m.0malta2", 5, "Malta")]
    index = EntityIndex([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [() for _ in rows])
    stop = frozenset({"do", "most"})
    assert countries(index, ["maltese", "people"], 0, 1) == ["m.0malta"] and countries(index, ["malta"], 0, 1) == []
    assert countries(index, "do most italians".split(), 2, 3, stop) == ["m.0italy"]
    assert countries(index, "do lakota italians".split(), 2, 3, stop) == []
    assert countries(index, ["italian", "food"], 0, 1) == []
    for question, country in (("what language do most italians speak?", "m.0italy"),
                              ("what language do british people speak?", "m.0uk"),
                              ("what language do maltese people speak?", "m.0malta")):
        assert Linker(index).link(question)[0].id == country
        assert country not in [link.id for link in Linker(index, LinkConfig(demonym_match=0)).link(question)]
    entries = link_entries(Linker(index), Linker(index).link("what language do most italians speak?"))
    assert entries[0]["id"] == "m.0italy" and entries[0]["demonym"] is True  # the trace says how it was read
    assert "demonym" not in link_entries(Linker(index), Linker(index).link("what is italy?"))[0]
    trace = Trace()
    resolve(Linker(index), "what language do most italians speak?", None, trace)
    assert "Italy (m.0italy) from 'italians', a demonym (score" in trace.fallbacks[0]
    for question in ("what language do lakota italians speak?", "where do they speak maltese?"):
        assert not {"m.0italy", "m.0malta"} & {link.id for link in Linker(index).link(question)}
    bad = tmp_path / "demonyms.tsv"
    bad.write_text("Italy\n", encoding="utf-8")
    with pytest.raises(ValueError, match="'Italy'"):
        demonyms(bad)
    with pytest.raises(ValueError, match="demonym_match matches in 0-1, got 85.0, 0.9, -0.1"):
        LinkConfig(demonym_match=-0.1)


def test_a_quotation_longer_than_a_span_is_looked_up_whole():
    """CWQ names quotations and titles in double quotes, often longer than the linker's 6-token spans: the quoted
    text is looked up whole, exactly or fuzzily ("widked"), and is then the mention; 0 turns it off."""
    rows = [("m.048hg08", 3, "War is too important a matter to be left to the military."),
            ("m.081pw", 900, "World War II"),
            ("m.0sun", 3, "The sun also shines on the wicked"), ("m.0rises", 80, "The Sun Also Rises")]
    index = EntityIndex([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [() for _ in rows])
    question = ('What was the occupation of the person who said "War is too important a matter to be left to the '
                'military."?')
    tokens = normalize(question).split()
    assert quoted(question, tokens, 6, 30) == [(9, 21)] and quoted(question, tokens, 12, 30) == []
    assert quoted(question, tokens, 6, 11) == [] and quoted(question.replace('"', "'"), tokens, 6, 30) == []
    links = Linker(index).link(question)
    assert links[0].id == "m.048hg08" and links[0].mention == " ".join(tokens[9:21]) and links[0].match == 1.0
    assert "m.048hg08" not in [link.id for link in Linker(index, LinkConfig(quote_tokens=0)).link(question)]
    typo = Linker(index).link('Who said \u201cThe sun also shines on the widked now\u201d?')
    assert typo[0].id == "m.0sun" and typo[0].match < 1.0


def test_a_written_number_is_one_span_and_no_piece_of_it_is_looked_up():
    """GrailQA writes decimals and dates ("thrust 787920.0", "on 1943-05-25"): the linker read "0" of "787920.0" as
    an entity named "0" and "1943" of the date as a part of "1943 Atlantic hurricane season". A piece of one written
    number is no span now (``number_pieces`` True: as before); the whole number, and a number written alone, are."""
    from memq.link.context import numbers

    def pieces(question):
        tokens = normalize(question).split()
        return [tokens[a:b] for a, b in numbers(question)]

    assert pieces("which rocket engines can thrust 787920.0 or 1.9e+06?") == [["787920", "0"], ["1", "9e", "06"]]
    assert pieces("on 1943-05-25, 07/18/2011 and 3:2, which?") == [["1943", "05", "25"], ["07", "18", "2011"],
                                                                  ["3", "2"]]
    assert pieces("who won the 2010 world series, in 7 games?") == [] and pieces("jan. the 17th, 2011") == []
    assert pieces("a 95.25kg weight") == [["95", "25kg"]]
    rows = [("m.0zero", 50, "0"), ("m.0storm", 40, "1943 Atlantic hurricane season"), ("m.0year", 30, "1600"),
            ("m.0ratio", 10, "3:2")]
    index = EntityIndex([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [() for _ in rows])

    def linked(question, **settings):
        return {link.id for link in Linker(index, LinkConfig(**settings)).link(question)}

    assert linked("which engines can thrust 787920.0?") == set()
    assert linked("which engines can thrust 787920.0?", number_pieces=True) == {"m.0zero"}
    assert "m.0storm" not in linked("which radio program was first broadcast on 1943-05-25?")
    assert "m.0storm" in linked("which radio program was first broadcast on 1943-05-25?", number_pieces=True)
    assert linked("which lake has 1600 islands?") == {"m.0year"}  # a number alone is a span
    assert linked("which cameras have a 3:2 image ratio?") == {"m.0ratio"}  # the whole number is a span


def test_the_longer_exact_name_wins_over_a_part_of_it(index):
    links = Linker(index).link("who are justin bieber's siblings?")
    assert links[0].id == "m.06w2sn5" and links[0].mention == "justin bieber" and links[0].match == 1.0


def test_the_mention_prior_counts_training_questions_and_silences_a_generic_span(index):
    counts = mention_counts(index, [("where is jamaica?", ["m.03_r3"]), ("what is male in jamaica?", ["m.03_r3"]),
                                    ("is male a gender?", ["m.02zsn"])])
    assert counts["jamaica"] == (2, 2) and counts["male"] == (2, 0)
    index.mentions = counts
    try:
        strict = Linker(index, LinkConfig(mention_weight=4.0))
        assert "m.05zppz" not in [link.id for link in strict.link("which male singer is from jamaica?")]
        assert strict.keyphraseness("male") == pytest.approx(1 / 4) and strict.keyphraseness("never seen") == 0.5
    finally:
        index.mentions = {}


def test_a_span_inside_the_span_naming_a_gold_entity_is_no_occurrence_of_its_own(index):
    questions = [("who is justin bieber?", ["m.06w2sn5"]), ("what is bieber in jamaica?", ["m.03_r3"])]
    counts = mention_counts(index, questions)
    # "bieber" of "justin bieber" was part of the mention of a gold entity; alone, it named none
    assert counts["justin bieber"] == (1, 1) and counts["bieber"] == (1, 0)
    assert Linker(index).keyphraseness("bieber") == 0.5  # (the index the tests share counts nothing)
    index.mentions = counts
    try:
        assert Linker(index).keyphraseness("bieber") == pytest.approx(1 / 3)
    finally:
        index.mentions = {}
    # before: the part counted as a mention that named Justin Bieber, a reading of it
    assert mention_counts(index, questions, LinkConfig(mentions_apart=False))["bieber"] == (2, 1)
    # a span the question also writes apart from the mention counts
    assert mention_counts(index, [("is justin bieber bieber?", ["m.06w2sn5"])])["bieber"] == (1, 1)


def test_commonness_chooses_the_reading_a_span_named_in_training_and_never_lifts_a_span(index, tmp_path):
    # the training questions' "jamaica" named the less popular Jamaica twice, the country once
    counts = mention_counts(index, [("where is jamaica?", ["m.0nn1zzq"]), ("who sang jamaica?", ["m.0nn1zzq"]),
                                    ("what is spoken in jamaica?", ["m.03_r3"]),
                                    ("who is justin bieber?", ["m.06w2sn5"])])
    assert counts["jamaica"] == (3, 3) and counts.named["jamaica"] == {"m.0nn1zzq": 2, "m.03_r3": 1}
    # the longest span that finds an entity named it, not a part of it; nor does keyphraseness count the part
    assert counts.named["justin bieber"] == {"m.06w2sn5": 1} and "bieber" not in counts.named
    assert "bieber" not in counts
    index.mentions = counts
    try:
        plain, common = (Linker(index, LinkConfig(commonness_weight=0.0)),
                         Linker(index, LinkConfig(commonness_weight=3.0)))
        assert common.commonness("jamaica", "m.0nn1zzq") == pytest.approx(2 / 4)
        assert common.commonness("jamaica", "m.03_r3") == pytest.approx(1 / 4)
        assert plain.link("where is jamaica?")[0].id == "m.03_r3"  # without it: the more popular one
        before = {c[3]: c[0] for c in plain.candidates("where is jamaica?")}
        after = {c[3]: c[0] for c in common.candidates("where is jamaica?")}
        # the reading named most keeps its score, the other loses by how much less often it was named
        assert after["m.0nn1zzq"] == pytest.approx(before["m.0nn1zzq"])
        assert after["m.03_r3"] == pytest.approx(before["m.03_r3"] - 3.0 * (2 / 4 - 1 / 4))
        assert common.link("where is jamaica?")[0].id == "m.0nn1zzq"
        index.save(tmp_path / "idx")
        assert EntityIndex.load(tmp_path / "idx").mentions.named == counts.named  # kept in mentions.tsv
    finally:
        index.mentions = {}


def test_a_reading_of_a_span_the_training_questions_use_as_a_common_noun_loses_generic_weight(index):
    from memq.link.context import generic_span

    # "bieber" in 30 training questions, one of whose readings was gold in 3, and never the span that named it best
    # (a longer span did): a common noun to them, like "city" (New York City) or "time zone" (Eastern Time Zone)
    index.mentions = MentionCounts({"bieber": (30, 3), "jamaica": (30, 3)}, {})
    try:
        plain, generic = Linker(index, LinkConfig(generic_weight=0.0)), Linker(index, LinkConfig(generic_weight=0.5))
        assert generic_span(generic, "bieber") and generic_span(generic, "jamaica")
        before = {(c[3], c[1]): c[0] for c in plain.candidates("is bieber from jamaica?")}
        after = {(c[3], c[1]): c[0] for c in generic.candidates("is bieber from jamaica?")}
        # a part of a longer name loses; an exact name ("jamaica") keeps its score
        assert after[("m.06w2sn5", 1)] == pytest.approx(before[("m.06w2sn5", 1)] - 0.5)
        assert after[("m.03_r3", 3)] == pytest.approx(before[("m.03_r3", 3)])
        # not a common noun: a span that named an entity best in more than generic_named (0.1) of the questions it
        # occurs in, one seen in fewer questions, or a keyphrase
        index.mentions = MentionCounts({"bieber": (30, 3)}, {"bieber": {"m.06w2sn5": 4}})
        assert not generic_span(generic, "bieber")
        index.mentions = MentionCounts({"bieber": (30, 3)}, {"bieber": {"m.06w2sn5": 1}})  # 1 of 30
        assert generic_span(generic, "bieber")
        assert generic_span(Linker(index, LinkConfig(generic_weight=0.5, generic_named=0.05)), "bieber")
        assert not generic_span(Linker(index, LinkConfig(generic_weight=0.5, generic_named=0.0)), "bieber")
        index.mentions = MentionCounts({"bieber": (19, 1)}, {})
        assert not generic_span(generic, "bieber")
        index.mentions = MentionCounts({"bieber": (30, 9)}, {})  # keyphraseness 10 / 32
        assert not generic_span(generic, "bieber")
        with pytest.raises(ValueError, match="generic_weight"):
            LinkConfig(generic_weight=-0.5)
    finally:
        index.mentions = {}


def test_every_span_s_best_reading_comes_before_a_second_reading(index):
    # "bieber" has second readings within the margin that outscore "jamaica", which the mention prior holds down
    index.mentions = {"jamaica": (10, 0)}
    try:
        settings = {"max_entities": 2, "same_span_margin": 0.5, "second_threshold": 0.9}
        first = Linker(index, LinkConfig(**settings)).link("is bieber from jamaica?")
        assert [(link.mention, link.alternative) for link in first] == [("bieber", False), ("jamaica", False)]
        assert first[1].id == "m.03_r3"
        before = Linker(index, LinkConfig(**settings, alternatives_last=False)).link("is bieber from jamaica?")
        assert [(link.mention, link.alternative) for link in before] == [("bieber", False), ("bieber", True)]
        roomy = Linker(index, LinkConfig(**{**settings, "max_entities": 3})).link("is bieber from jamaica?")
        assert roomy[:2] == first and roomy[2].mention == "bieber" and roomy[2].alternative
    finally:
        index.mentions = {}


def test_a_span_annotated_in_training_becomes_a_learnt_alias_of_its_entity(index):
    from memq.link.mentions import learnt_aliases

    # "the isle" names Jamaica in its annotation, and no name of the index finds it there; "jamaica" finds it already
    questions = [("what do people of the isle speak?", ["m.03_r3"], set(), [("the isle", "m.03_r3")]),
                 ("where is jamaica?", ["m.03_r3"], set(), [("jamaica", "m.03_r3")]),
                 ("is the isle a song?", ["m.0nn1zzq"], set(), [("the isle", "m.0nn1zzq")]),
                 ("who visited the isle?", ["m.06w2sn5"], set(), [("the isle", "m.03_r3")])]  # not its gold: no
    linker = Linker(index)
    assert learnt_aliases(linker, questions) == {"the isle": {"m.03_r3": 1, "m.0nn1zzq": 1}}
    # a span the index names exactly ("jamaica") becomes an alias of another entity only when alias_floor (2)
    # questions say so; alias_floor 1 learns it from one, as before the floor
    odd = [("is jamaica by bieber?", ["m.06w2sn5"], set(), [("jamaica", "m.06w2sn5")])]
    assert learnt_aliases(linker, odd) == {} and learnt_aliases(linker, odd * 2) == {"jamaica": {"m.06w2sn5": 2}}
    assert learnt_aliases(Linker(index, LinkConfig(alias_floor=1)), odd) == {"jamaica": {"m.06w2sn5": 1}}
    counts = mention_counts(index, questions)
    # counted as any reading: seen in three questions, naming a gold entity in two, each reading once
    assert counts["the isle"] == (3, 2) and counts.named["the isle"] == {"m.03_r3": 1, "m.0nn1zzq": 1}
    assert counts.named["jamaica"] == {"m.03_r3": 1}
    # with alias_match 0 the counts are those of spans the index finds, as before aliases were learnt
    off = mention_counts(index, questions, LinkConfig(alias_match=0.0))
    assert "the isle" not in off and off == mention_counts(index, [q[:3] for q in questions])
    index.mentions = counts
    try:
        links = Linker(index, LinkConfig(max_entities=1)).link("what is the isle famous for?")
        assert [(link.id, link.mention, link.match) for link in links] == [("m.03_r3", "the isle", 0.9)]
        assert Linker(index, LinkConfig(alias_match=0.0)).link("what is the isle famous for?") == []
        # a reading the index has keeps its own match: "jamaica" is still an exact name
        assert Linker(index).link("where is jamaica?")[0].match == 1.0
        # memq link show and the answer's trace say which readings are learnt aliases
        from memq.link.mentions import learnt_alias
        assert learnt_alias(Linker(index), "the isle", "m.03_r3")
        assert not learnt_alias(Linker(index), "jamaica", "m.03_r3")
        assert not learnt_alias(Linker(index, LinkConfig(alias_match=0.0)), "the isle", "m.03_r3")
        trace = Trace()
        assert resolve(Linker(index, LinkConfig(max_entities=1)), "what is the isle famous for?", None, trace) \
            == {"m.03_r3": "Jamaica"}
        assert trace.links[0]["learnt_alias"] is True and "from 'the isle', a learnt alias (" in trace.fallbacks[0]
        trace = Trace()
        resolve(Linker(index), "where is jamaica?", None, trace)
        assert "learnt_alias" not in trace.links[0] and "learnt alias" not in trace.fallbacks[0]
    finally:
        index.mentions = {}


def test_annotated_mentions_come_from_webqsp_train_and_the_cwq_questions_made_from_it(monkeypatch):
    from memq.datasets import GoldParse, GoldQuestion
    from memq.link import gold

    monkeypatch.setattr(gold, "_webqsp_train_mentions", lambda: {"WebQTrn-5": ("the US", "m.09c7w0")})
    monkeypatch.setattr(gold, "_webqsp_train", lambda: {"WebQTrn-5": (("m.09c7w0",), {"m.09c7w0"})})

    def question(qid, text, dataset, split="train"):
        parse = GoldParse("p", "SELECT ?x WHERE {}", (("m.09c7w0", "United States of America"),), None)
        return GoldQuestion(qid, text, dataset, split, (parse,))

    assert gold.annotated_mentions(question("WebQTrn-5", "what kind government does the us have?", "webqsp")) \
        == (("the US", "m.09c7w0"),)
    # a CWQ question made from it keeps the span where it still writes it
    assert gold.annotated_mentions(question("WebQTrn-5_ab12", "what party rules the us and has a donkey?", "cwq")) \
        == (("the US", "m.09c7w0"),)
    assert gold.annotated_mentions(question("WebQTrn-5_cd34", "what party rules america?", "cwq")) == ()
    # never a test question's, nor a span inside a word ("us" of "status")
    assert gold.annotated_mentions(question("WebQTrn-5", "what kind government does the us have?", "webqsp",
                                            "test")) == ()
    assert gold.annotated_mentions(question("WebQTrn-5", "what is the status of it?", "webqsp")) == ()


def test_a_gold_entity_that_a_span_names_exactly_counts_as_named_for_the_mention_prior(index):
    # Male is a constraint of the first question's parse, not the entity it is about: named exactly, it counts
    questions = [("what is male in jamaica?", ["m.03_r3"], {"m.03_r3", "m.05zppz"}),
                 ("is male a gender?", ["m.05zppz"], {"m.05zppz"})]
    assert mention_counts(index, questions)["male"] == (2, 2)
    assert mention_counts(index, [q[:2] for q in questions])["male"] == (2, 1)  # without the gold set: named only
    # a gold entity that a span names only in part (Justin Bieber) is not named so
    assert mention_counts(index, [("is bieber in jamaica?", ["m.03_r3"], {"m.03_r3", "m.06w2sn5"})])["bieber"] == (1, 0)


def test_the_mention_prior_counts_every_training_set_and_can_hold_dev_out(index, monkeypatch):
    from memq import datasets
    from memq.datasets import GoldParse, GoldQuestion
    from memq.link.mentions import training_mentions

    def question(qid, text, dataset, ids):
        parse = GoldParse("p", "SELECT ?x WHERE {}", tuple((i, i) for i in ids), None)
        return GoldQuestion(qid, text, dataset, "train", (parse,))

    bundled = {  # TestQ-7 falls in dev (memq.plan.data.split_of), TestQ-0 and TestQ-1 in train
        "webqsp": [question("TestQ-0", "where is jamaica?", "webqsp", ["m.03_r3"])],
        "cwq": [question("TestQ-7_c1", "is male a gender in jamaica?", "cwq", ["m.03_r3"]),
                question("TestQ-1_c2", "what male is from jamaica?", "cwq", ["m.03_r3"])],
        # GrailQA's dev set is a file of its own: its train questions all count, TestQ-7 too
        "grailqa": [question("TestQ-7", "which male is a singer?", "grailqa", [])],
    }
    monkeypatch.setattr(datasets, "load", lambda dataset, split: bundled[dataset])
    counts, source = training_mentions(index)
    assert counts["jamaica"] == (3, 3) and counts["male"] == (3, 0)
    assert source.startswith("webqsp train (1 questions), cwq train (2 questions), grailqa train (1 questions); named")
    held, source = training_mentions(index, hold_out_dev=True)
    assert held["jamaica"] == (2, 2) and held["male"] == (2, 0)
    assert source.startswith("webqsp train less dev (1 questions), cwq train less dev (1 questions), grailqa train "
                             "(1 questions);")
    webqsp_only = training_mentions(index, ["webqsp"])[0]
    assert webqsp_only["jamaica"] == (1, 1) and "male" not in webqsp_only


def test_a_dev_evaluation_counts_its_linkers_mention_prior_without_the_dev_questions(index, monkeypatch):
    from memq import datasets
    from memq.datasets import GoldParse, GoldQuestion
    from memq.link.evaluate import hold_out_dev

    def question(qid, text, ids):
        parse = GoldParse("p", "SELECT ?x WHERE {}", tuple((i, i) for i in ids), None)
        return GoldQuestion(qid, text, "webqsp", "train", (parse,))

    bundled = {"webqsp": [question("TestQ-0", "where is jamaica?", ["m.03_r3"]),
                          question("TestQ-7", "is jamaica big?", ["m.03_r3"])],  # TestQ-7: dev
               "cwq": [], "grailqa": []}
    monkeypatch.setattr(datasets, "load", lambda dataset, split: bundled[dataset])
    shared = copy.copy(index)
    shared.mentions, shared.info = {"jamaica": (9, 9)}, {**index.info, "mentions_from": "webqsp train (9 questions)"}
    linker = Linker(shared)
    hold_out_dev(linker)
    assert linker.index is not shared and shared.mentions == {"jamaica": (9, 9)}  # the shared index is untouched
    assert linker.index.mentions["jamaica"] == (1, 1)
    assert linker.index.info["mentions_from"].startswith("webqsp train less dev (1 questions)")
    counted = linker.index
    hold_out_dev(linker)  # once is enough
    assert linker.index is counted


def test_a_cached_index_counted_on_older_rules_counts_its_mention_prior_again(tmp_path, monkeypatch):
    from memq.link import resolve
    from memq.link.mentions import MENTION_DATASETS, MENTIONS_RULE

    kg_file = tmp_path / "kg.nt"
    kg_file.write_text(TRIPLES + EXTRA, encoding="utf-8")
    calls = []

    def counted(index, rule=MENTIONS_RULE):
        calls.append(rule)
        index.mentions = {"jamaica": (len(calls), 1)}
        index.info["mentions_from"] = ", ".join(f"{d} train (1 questions)" for d in MENTION_DATASETS) + f"; {rule}"

    monkeypatch.setattr(resolve, "add_training_mentions", counted)
    first = resolve.cached_index(kg_file, tmp_path / "cache")
    assert calls == [MENTIONS_RULE] and first.mentions == {"jamaica": (1, 1)}
    assert resolve.cached_index(kg_file, tmp_path / "cache").mentions == {"jamaica": (1, 1)} and len(calls) == 1
    (target,) = (tmp_path / "cache" / "entity_index").iterdir()
    counted(first, "an older rule")  # what an older memq counted and saved
    first.save(target)
    again = resolve.cached_index(kg_file, tmp_path / "cache")
    assert again.mentions == {"jamaica": (3, 1)} and MENTIONS_RULE in again.info["mentions_from"]
    assert EntityIndex.load(target).mentions == {"jamaica": (3, 1)}  # saved


def test_the_mention_rule_names_a_digest_of_the_code_that_counts(monkeypatch):
    import inspect
    import re

    from memq.link import mentions

    digest = mentions.counting_code()
    assert re.fullmatch(r"[0-9a-f]{12}", digest) and mentions.MENTIONS_RULE.endswith(f"; counting code {digest}")
    monkeypatch.setattr(mentions, "LinkConfig", lambda: LinkConfig(max_tokens=5))  # spans looked up otherwise
    assert mentions.counting_code() != digest

    def unreadable(obj):
        raise OSError("no source")

    monkeypatch.setattr(inspect, "getsource", unreadable)
    assert mentions.counting_code() == "code not read"


def test_link_config_refuses_bad_values():
    with pytest.raises(ValueError, match="fuzzy_cutoff is a rapidfuzz ratio in 0-100, alias_match and demonym_match "
                                         "matches in 0-1, got 120"):
        LinkConfig(fuzzy_cutoff=120)
    with pytest.raises(ValueError, match="matches in 0-1, got 85.0, 1.5, 0.85"):
        LinkConfig(alias_match=1.5)
    with pytest.raises(ValueError, match="must be >= 1"):
        LinkConfig(max_entities=0)
    with pytest.raises(ValueError, match="fit_recall and alias_floor must be >= 1, got .*, 0"):
        LinkConfig(alias_floor=0)


def test_resolve_names_alone_and_trace_what_was_dropped(index):
    linker = Linker(index)
    trace = Trace()
    assert resolve(linker, "q?", ["jamaica", "Nowhereland"], trace) == {"m.03_r3": "jamaica"}
    assert trace.links[0]["id"] == "m.03_r3" and trace.links[0]["given"] == "jamaica"
    assert any("'Nowhereland' matches no entity" in f for f in trace.fallbacks)
    with pytest.raises(LinkingError, match="no entity of the index is named 'Nowhereland', 'Atlantis'"):
        resolve(linker, "q?", ["Nowhereland", "Atlantis"], Trace())
    with pytest.raises(LinkingError, match="no topic entity found in the question 'what is the weather like.*no name "
                                           "in the entity index matches a span of it; give the entities"):
        resolve(linker, "what is the weather like?", None, Trace())
    # a question whose readings all score below the threshold: the message names the best one
    strict = Linker(index, LinkConfig(threshold=10.0, fit_weight=0.0))
    with pytest.raises(LinkingError, match=r"its best reading, Jamaica \(m.03_r3\) from 'jamaica', scores [0-9.]+ "
                                           "where the linker's threshold is 10; give the entities"):
        resolve(strict, "where is jamaica?", None, Trace())


@pytest.fixture(scope="module")
def pipe(kg, index, tmp_path_factory):
    from test_answer import MemoryBank, MemoryRecord, TemplateDescriber  # noqa: F401 - the same fakes

    from memq.decompose import decompose_dataset
    from memq.memory.embed import HashingEmbedder
    from memq.plan import ScriptedPlanner
    from memq.plan.derive import derive_plan

    root = tmp_path_factory.mktemp("linkpipe")
    index.save(root / "index")
    describer = TemplateDescriber()
    jamaica = _question("webqsp", "test", "WebQTest-0")
    statements = decompose_dataset([jamaica])
    records = [MemoryRecord(s, tuple(d), "template") for s, d in zip(statements, describer.describe(statements),
                                                                      strict=True)]
    plan = "\n".join(s.text for s in derive_plan(jamaica, lambda s: describer.describe([s])[0][0]).steps)
    config = Config(planner="fewshot", entity_index=str(root / "index"))
    return Pipeline(config, bank=MemoryBank.build(records, HashingEmbedder()), kg=kg,
                    planner=ScriptedPlanner({jamaica.question: plan}))


def test_a_question_without_entities_is_linked_and_answered(pipe):
    a = pipe.answer("what does jamaican people speak?")
    assert {i for i, _ in a.answers} == {"m.01428y", "m.04ygk0"}
    assert a.trace.links[0]["id"] == "m.03_r3" and a.trace.links[0]["mention"] == "jamaican"
    assert any(f.startswith("entity linking: no entities given; linked Jamaica (m.03_r3)") for f in a.trace.fallbacks)
    assert "link" in a.trace.timings


def test_names_alone_and_ids_with_names_give_the_same_answers(pipe):
    q = "what does jamaican people speak?"
    by_name = pipe.answer(q, ["Jamaica"])
    by_id = pipe.answer(q, {"m.03_r3": "Jamaica"})
    assert by_name.answers == by_id.answers and by_name.answers
    assert by_id.trace.links == []


def test_an_unknown_id_among_known_ones_is_dropped_and_traced(pipe):
    a = pipe.answer("what does jamaican people speak?", {"m.03_r3": "Jamaica", "m.0zzzzz": "Foo"})
    assert {i for i, _ in a.answers} == {"m.01428y", "m.04ygk0"}
    assert any("unknown entity id 'm.0zzzzz' ('Foo')" in f and "dropped" in f for f in a.trace.fallbacks)
    with pytest.raises(LinkingError, match="unknown entity ids 'm.0zzzzz', 'm.0yyyyy': the knowledge graph"):
        pipe.answer("who?", {"m.0zzzzz": "Foo", "m.0yyyyy": "Bar"}, plan=Plan(steps=[]))


def test_memq_answer_links_when_no_entities_are_given(pipe, monkeypatch):
    monkeypatch.setitem(api._PIPELINES, pipe.config, pipe)
    a = memq.answer("what does jamaican people speak?", config=pipe.config)
    assert {i for i, _ in a.answers} == {"m.01428y", "m.04ygk0"}
    assert api.check_request("who?", None) == ("who?", None)
    assert api.check_request(" who? ", ["Jamaica "]) == ("who?", ["Jamaica"])
    with pytest.raises(ValueError, match="leave entities out to have memq link them"):
        api.check_request("who?", [])


def test_memq_ask_prints_what_it_linked(pipe, monkeypatch, capsys):
    from memq import ask

    monkeypatch.setattr(api, "pipeline", lambda config=None: pipe)
    args = ask_args("what does jamaican people speak?")
    assert ask.run(args) == 0
    out = capsys.readouterr().out
    assert "linked:\n  Jamaica (m.03_r3)  from 'jamaican'" in out and "Jamaican English (m.01428y)" in out
    assert ask.parse_entities([]) is None and ask.parse_entities(["Jamaica"]) == ["Jamaica"]
    with pytest.raises(ValueError, match="not both: got 'Jamaica' beside m.03_r3='Jamaica'"):
        ask.parse_entities(["m.03_r3=Jamaica", "Jamaica"])


def ask_args(question: str):
    from memq.cli import build_parser

    return build_parser().parse_args(["ask", question])


def test_memq_serve_answers_a_request_without_entities(pipe):
    from memq.serve import create_app

    with TestClient(create_app(pipeline=pipe, warm=False)) as c:
        r = c.post("/answer", json={"question": "what does jamaican people speak?"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["linked"][0]["id"] == "m.03_r3" and {a["id"] for a in body["answers"]} == {"m.01428y",
                                                                                                "m.04ygk0"}
        r = c.post("/answer", json={"question": "what is the weather like?"})
        assert r.status_code == 422 and "no topic entity found" in r.json()["detail"]
        r = c.post("/answer", json={"question": "what does jamaican people speak?", "entities": ["Atlantis"]})
        assert r.status_code == 422 and "no entity of the index is named 'Atlantis'" in r.json()["detail"]


def test_an_endpoint_without_an_index_is_told_how_to_build_one():
    from memq.link.resolve import open_linker

    with pytest.raises(LinkingError, match="memq link build --endpoint URL --out DIR"):
        open_linker(replace(Config(), endpoint="http://localhost:8890/sparql"))


def test_memq_link_build_writes_an_index_that_loads(kg, tmp_path, capsys):
    from memq.cli import main

    path = tmp_path / "kg.nt"
    path.write_text(TRIPLES + EXTRA, encoding="utf-8")
    assert main(["link", "build", "--kg", str(path), "--out", str(tmp_path / "idx"), "--no-mentions"]) == 0
    loaded = EntityIndex.load(tmp_path / "idx")
    assert loaded.exact("jamaica") == ["m.03_r3", "m.0nn1zzq"] and loaded.mentions == {}
    assert loaded.info["manifest"]["source"]["kg"] == "kg.nt"  # the file's name, not a path of this machine
    capsys.readouterr()
    assert main(["link", "show", "what do jamaican people speak?", "--kg", str(path), "--entity-index",
                 str(tmp_path / "idx"), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["linked"][0]["id"] == "m.03_r3" and "learnt_alias" not in shown["linked"][0]  # no mention prior
    assert main(["link", "show", "what do jamaican people speak?", "--kg", str(path), "--entity-index",
                 str(tmp_path / "idx")]) == 0
    assert "(m.03_r3)  from 'jamaican'" in capsys.readouterr().out
    assert main(["link", "build", "--kg", str(path), "--out", str(tmp_path / "x"), "--page", "0"]) == 2
    assert "--page must be >= 1, got 0" in capsys.readouterr().err


def test_linking_metrics_count_named_and_all_gold_entities():
    from memq.link.evaluate import summarise_links

    records = [  # linked 2, one is the named gold, one a constraint entity; linked 1 wrong; linked none
        {"linked": [{"id": "a"}, {"id": "c"}], "link_ms": 1.0, "gold_named": ["a"], "gold_all": ["a", "c"],
         "hits_named": 1, "hits_all": 2},
        {"linked": [{"id": "x"}], "link_ms": 2.0, "gold_named": ["b"], "gold_all": ["b"], "hits_named": 0,
         "hits_all": 0},
        {"linked": [], "link_ms": 3.0, "gold_named": ["d"], "gold_all": ["d", "e"], "hits_named": 0, "hits_all": 0},
    ]
    s = summarise_links(records)
    assert (s["precision"], s["recall"], s["recall_all"]) == (round(2 / 3, 4), round(1 / 3, 4), round(2 / 5, 4))
    assert s["entities_per_question"] == 1.0 and s["questions_without_entity"] == 1 and s["p50_ms"] == 2.0
    assert s["f1"] == round(2 * (2 / 3) * (1 / 3) / (2 / 3 + 1 / 3), 4)


def test_gold_entities_named_is_webqsps_topic_entity_and_all_adds_the_constraints():
    from memq.link.evaluate import gold_entities

    q = _question("webqsp", "test", "WebQTest-9")  # who was richard nixon married to? (a Marriage constraint)
    named, every = gold_entities(q)
    assert named == {"m.06c97"} and every == {"m.06c97", "m.04ztj"}


def test_a_cwq_question_names_for_the_mention_prior_what_it_added_not_the_constraints_it_kept():
    from memq.link.gold import prior_entities

    # "Name the brother of a celebrity that had legal entanglement in Miami.?": CWQ put Miami where WebQSP's
    # "who is justin bieber's brother?" named Justin Bieber, and kept its Male constraint, which no span names
    q = _question("cwq", "train", "WebQTrn-0_02ed5ce4f0d0e6c1b8d15752a1be80ad")
    assert {m for m, _ in q.parses[0].topic_entities} == {"m.0f2v0", "m.05zppz"}
    assert prior_entities(q) == {"m.0f2v0"}
    webqsp = _question("webqsp", "test", "WebQTest-9")
    assert prior_entities(webqsp) == {"m.06c97"}  # WebQSP: the annotated topic entity, as gold_entities names it


class Recording:
    """A planner that accepts optional entities: records what it was given and plans with ``inner``."""

    plans_with_optional = True

    def __init__(self, inner):
        self.inner, self.seen = inner, []

    def plan(self, question, entities, optional=(), unprompted=()):
        self.seen.append((dict(entities), tuple(optional)))
        self.unprompted = tuple(unprompted)
        return self.inner.plan(question, entities)


def test_the_pipeline_gives_the_planner_optional_entities_and_drops_unknown_ones(pipe):
    planner = Recording(pipe.planner)
    p = Pipeline(pipe.config, bank=pipe.bank, kg=pipe.kg, planner=planner, linker=pipe.linker)
    q = "what does jamaican people speak?"
    a = p.answer(q, {"m.03_r3": "Jamaica"}, optional={"m.05zppz": "Male", "m.0zzzzz": "Foo", "m.03_r3": "Jamaica"})
    assert {i for i, _ in a.answers} == {"m.01428y", "m.04ygk0"}
    assert planner.seen[-1] == ({"m.03_r3": "Jamaica", "m.05zppz": "Male"}, ("m.05zppz",))
    assert planner.unprompted == ()
    assert any("unknown entity id 'm.0zzzzz' ('Foo')" in f for f in a.trace.fallbacks)
    p.answer(q, {"m.03_r3": "Jamaica"}, optional={"m.0zzzzz": "Foo"})  # none left: the question goes on without
    assert planner.seen[-1] == ({"m.03_r3": "Jamaica"}, ())
    with pytest.raises(ValueError, match="m.0bad!"):
        p.answer(q, {"m.03_r3": "Jamaica"}, optional={"m.0bad!": "Bad"})

    # a linked question: what the suggester proposes is optional, listed in the trace
    from memq.link.constraints import Suggestion

    p.suggest = lambda question, given: [Suggestion("m.05zppz", "Male", 0.8, ("WebQTrn-1",))]
    a = p.answer(q)  # linked (LinkConfig.required 0): Jamaica is optional too, and a plan starts from it
    assert planner.seen[-1] == ({"m.03_r3": "Jamaica", "m.05zppz": "Male"}, ("m.03_r3", "m.05zppz"))
    assert a.trace.links[-1]["suggested"] == "constraint" and {i for i, _ in a.answers} == {"m.01428y", "m.04ygk0"}
    assert any(f.startswith("constraint entities suggested") for f in a.trace.fallbacks)


def test_a_suggested_constraint_the_plan_leaves_unnamed_is_taken_out_of_the_prompt_and_the_question_planned_again(
        pipe):
    from memq.link.constraints import Suggestion

    planner = Recording(pipe.planner)  # its plan for the question names Jamaica, not Male
    p = Pipeline(pipe.config, bank=pipe.bank, kg=pipe.kg, planner=planner, linker=pipe.linker)  # on by default
    p.suggest = lambda question, given: [Suggestion("m.05zppz", "Male", 0.8, ("WebQTrn-1",))]
    a = p.answer("what does jamaican people speak?")
    assert len(planner.seen) == 2 and planner.unprompted == ("m.05zppz",)  # planned again, Male out of the prompt
    assert planner.seen[-1] == ({"m.03_r3": "Jamaica", "m.05zppz": "Male"}, ("m.03_r3", "m.05zppz"))  # still optional
    assert [x.get("unprompted") for x in a.trace.links] == [None, True]
    assert any(f.startswith("suggested constraint entities the plan does not name") and "Male (m.05zppz)" in f
               for f in a.trace.fallbacks)
    from memq.ask import show

    assert "Male (m.05zppz)  suggested by similar training questions  support 0.80  (not named in the planner's " \
           "prompt)" in show(a)
    assert {i for i, _ in a.answers} == {"m.01428y", "m.04ygk0"}
    off = Recording(pipe.planner)  # off: planned once, Male named in the prompt
    config = replace(pipe.config, link=replace(pipe.config.link, replan_unused=False))
    p = Pipeline(config, bank=pipe.bank, kg=pipe.kg, planner=off, linker=pipe.linker)
    p.suggest = lambda question, given: [Suggestion("m.05zppz", "Male", 0.8, ("WebQTrn-1",))]
    p.answer("what does jamaican people speak?")
    assert len(off.seen) == 1 and off.unprompted == () and "m.05zppz" in off.seen[0][0]


def test_a_suggested_constraint_a_step_names_stays_in_the_prompt():
    from memq.link.constraints import unused_suggestions
    from memq.plan.format import parse_plan
    from memq.types import Trace

    entities = {"m.1": "LeAnn Rimes", "m.2": "Marriage", "m.3": "Country", "m.4": "Male"}
    trace = Trace()
    trace.links = [{"id": "m.1"}, *({"id": m, "suggested": "constraint"} for m in ("m.2", "m.3", "m.4"))]
    plan = parse_plan("Find the spouse of the marriage with spouse LeAnn Rimes and type of union Marriage, assign it "
                      "to ?x.\nMake sure ?t is country.\nFinally the answer is ?x.", list(entities.values()))
    # Marriage names the CVT's second entity, Country a check's constant (case aside); Male no step; Male's second
    # reading (unprompted already) is not counted again
    assert unused_suggestions(plan.steps, entities, trace) == ("m.4",)
    assert unused_suggestions(plan.steps, entities, Trace(), ()) == ()  # no suggestion in the trace
    assert unused_suggestions(plan.steps, entities, trace, ("m.4",)) == ()


def test_no_constraint_is_suggested_when_the_config_says_0_or_the_bank_has_no_training_questions(pipe):
    assert Pipeline(replace(pipe.config, constraints=0.0), bank=pipe.bank).suggest("who is x's wife?", []) == []
    assert Pipeline(pipe.config, bank=pipe.bank).suggest("who is x's wife?", []) == []  # built from one question
    with pytest.raises(ValueError, match="constraints must be in"):
        Config(constraints=1.5)
    with pytest.raises(ValueError, match="cue_share must be in"):
        LinkConfig(cue_share=1.5)


def test_a_second_reading_of_a_linked_span_is_an_optional_entity(pipe, index):
    linker = Linker(index, LinkConfig(same_span_margin=5.0, max_entities=2, second_threshold=0.0, fit_weight=0.0))
    links = linker.link("what does jamaican people speak?")  # "jamaican": Jamaica, or Jamaican English
    assert [(x.id, x.alternative) for x in links] == [("m.03_r3", False), ("m.01428y", True)]
    assert links[1].to_json()["alternative"] is True and "alternative" not in links[0].to_json()
    # the other Jamaica: a plan could not name it apart from the first, so it is no alternative
    assert "m.0nn1zzq" not in [x.id for x in linker.link("what does jamaica speak?")]

    planner = Recording(pipe.planner)
    p = Pipeline(pipe.config, bank=pipe.bank, kg=pipe.kg, planner=planner, linker=linker)
    from memq.ask import show
    from memq.link.constraints import Suggestion

    p.suggest = lambda question, given: [Suggestion("m.05zppz", "Male", 0.8, ("WebQTrn-1",))]
    a = p.answer("what does jamaican people speak?")
    assert planner.seen[-1] == ({"m.03_r3": "Jamaica", "m.01428y": "Jamaican English", "m.05zppz": "Male"},
                                ("m.03_r3", "m.01428y", "m.05zppz"))
    # the second reading is not named in the prompt; Male was, and the plan did not name it, so it is planned again
    # without Male in the prompt too (LinkConfig.replan_unused)
    assert planner.unprompted == ("m.01428y", "m.05zppz") and len(planner.seen) == 2
    assert "second readings, unprompted links not in the planner's prompt: Jamaican English " \
           "(m.01428y)" in a.trace.fallbacks
    shown = show(a)  # what memq ask prints
    assert "Jamaican English (m.01428y)  from 'jamaican'" in shown and "(a second reading: optional)" in shown
    # marked as every link the prompt leaves out is (memq.link.constraints.left_out): not named in it
    assert next(x for x in a.trace.links if x["id"] == "m.01428y").get("unprompted") is True
    assert "(a second reading: optional)  (not named in the planner's prompt)" in shown
    assert "Male (m.05zppz)  suggested by similar training questions  support 0.80" in shown


def test_a_linked_run_gives_the_gold_entity_answers_their_saved_plans(pipe, tmp_path):
    from memq.link.evaluate import run_linked

    saved = tmp_path / "saved.jsonl"
    plan = pipe.planner.plans["what does jamaican people speak?"]
    saved.write_text(json.dumps({"id": "WebQTest-0", "planner": "fewshot", "plan_raw": plan, "plan_s": 1.5}) + "\n",
                     encoding="utf-8")
    summary = run_linked("webqsp", "test", "fewshot", pipeline=pipe, limit=1, plans_from=str(saved), progress=False,
                         per_question=tmp_path / "out.jsonl")
    [record] = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert record["gold_entities"]["plan_s"] == 1.5 and record["gold_entities"]["f1"] == 1.0
    assert summary["gold_entity_plans_from"].endswith("saved.jsonl") and summary["f1_gold_entities"] == 1.0
    assert summary["linking"]["questions"] == 1639 and "constraints" in summary["linking"]
    losses = summary["losses"]  # where the linked answers lose against the gold entities', by class
    assert abs(losses["gap"] - (summary["f1_gold_entities"] - summary["f1"])) <= 1e-4  # the two F1s are rounded
    assert set(losses["classes"]) == {"missed", "constraint", "extra", "same"}


def test_a_linked_run_on_a_grailqa_part_links_that_part_and_counts_its_prior_on_every_training_question(pipe):
    """``memq evaluate --dataset grailqa --part tune --entities linked``: the part's questions, and GrailQA's dev set
    is its own file, so the mention prior is not counted again without a dev carved from train."""
    from memq.evaluate.run import questions_for
    from memq.link.evaluate import run_linked

    counted = pipe.linker.index
    summary = run_linked("grailqa", "dev", "fewshot", pipeline=pipe, limit=0, part="tune", progress=False)
    assert summary["linking"]["questions"] == len(questions_for("grailqa", "dev", "tune")) == 208
    assert summary["part"]["name"] == "tune" and pipe.linker.index is counted
    with pytest.raises(ValueError, match="part 'tune'"):
        run_linked("webqsp", "test", "fewshot", pipeline=pipe, limit=0, part="tune", progress=False)


class TwoLinks:
    """A linker that links Jamaica, then Male (a second, weaker entity of another span)."""

    index = None

    def link(self, question):
        from memq.link.linker import Link

        return [Link("m.03_r3", "Jamaica", "jamaican", 2.0, 1.0, 0.5, span=(2, 3)),
                Link("m.05zppz", "Male", "male", 1.5, 1.0, 0.4, span=(4, 5))]

    def resolve_name(self, name):
        return next(x for x in self.link("") if x.name == name)


def test_linked_entities_after_the_required_ones_are_optional_and_named_in_the_prompt(pipe):
    planner = Recording(pipe.planner)
    q = "what does jamaican people speak?"
    every = Pipeline(replace(pipe.config, constraints=0.0, link=LinkConfig(required=-1)), bank=pipe.bank, kg=pipe.kg,
                     planner=planner, linker=TwoLinks())
    every.answer(q)
    assert planner.seen[-1] == ({"m.03_r3": "Jamaica", "m.05zppz": "Male"}, ())  # -1: both must be named
    first = Pipeline(replace(pipe.config, constraints=0.0, link=LinkConfig(required=1)), bank=pipe.bank, kg=pipe.kg,
                     planner=planner, linker=TwoLinks())
    a = first.answer(q)
    assert planner.seen[-1] == ({"m.03_r3": "Jamaica", "m.05zppz": "Male"}, ("m.05zppz",))
    assert planner.unprompted == ()  # optional, yet named in the prompt: it is no second reading of a span
    assert "linked entities after the best 1 are optional (the plan may name them; entity coverage leaves them " \
           "out): Male (m.05zppz)" in a.trace.fallbacks
    assert [x.get("optional") for x in a.trace.links] == [None, True]
    from memq.ask import show

    assert "Male (m.05zppz)  from 'male'  score 1.500  (optional: a plan may leave it out)" in show(a)
    first.answer(q, ["Jamaica", "Male"])  # names the caller gave are all required
    assert planner.seen[-1] == ({"m.03_r3": "Jamaica", "m.05zppz": "Male"}, ())
    none = Pipeline(replace(pipe.config, constraints=0.0, link=LinkConfig(required=0)), bank=pipe.bank, kg=pipe.kg,
                    planner=planner, linker=TwoLinks())
    a = none.answer(q)
    assert planner.seen[-1] == ({"m.03_r3": "Jamaica", "m.05zppz": "Male"}, ("m.03_r3", "m.05zppz"))
    assert any(f.startswith("linked entities (all of them) are optional") for f in a.trace.fallbacks)
    with pytest.raises(ValueError, match="required and prompted must be >= 0, or -1"):
        LinkConfig(required=-2)
    with pytest.raises(ValueError, match="required and prompted must be >= 0, or -1"):
        LinkConfig(prompted=-2)


def test_linked_entities_after_the_prompted_ones_are_left_out_of_the_prompt(pipe):
    planner = Recording(pipe.planner)
    q = "what does jamaican people speak?"
    one = Pipeline(replace(pipe.config, constraints=0.0, link=LinkConfig(required=0, prompted=1)), bank=pipe.bank,
                   kg=pipe.kg, planner=planner, linker=TwoLinks())
    a = one.answer(q)
    assert planner.seen[-1] == ({"m.03_r3": "Jamaica", "m.05zppz": "Male"}, ("m.03_r3", "m.05zppz"))
    assert planner.unprompted == ("m.05zppz",)  # the weaker one: optional, and not named in the prompt
    assert "linked entities after the best 1 are left out of the planner's prompt (its lines may start there): " \
           "Male (m.05zppz)" in a.trace.fallbacks
    assert [x.get("unprompted") for x in a.trace.links] == [None, True]
    one.answer(q, ["Jamaica", "Male"])  # names the caller gave are all named in the prompt
    assert planner.unprompted == ()
    required = Pipeline(replace(pipe.config, constraints=0.0, link=LinkConfig(required=-1, prompted=0)),
                        bank=pipe.bank, kg=pipe.kg, planner=planner, linker=TwoLinks())
    required.answer(q)
    assert planner.unprompted == ()  # an entity the plan must name is always in the prompt


def test_linked_entities_that_training_questions_list_after_another_go_behind_in_the_prompt(pipe):
    from collections import Counter

    from memq.link.order import ListedFirst

    planner = Recording(pipe.planner)
    q = "what does jamaican people speak?"
    p = Pipeline(replace(pipe.config, constraints=0.0), bank=pipe.bank, kg=pipe.kg, planner=planner, linker=TwoLinks())
    assert p.listed is None  # a bank of no training questions: the linker's order
    p.answer(q)
    assert list(planner.seen[-1][0]) == ["m.03_r3", "m.05zppz"]
    # Jamaica listed first by none of the 5 training questions that list it, Male by 3 of 4: Male first
    p.listed = ListedFirst(Counter({"m.05zppz": 3}), Counter({"m.05zppz": 4, "m.03_r3": 5}))
    a = p.answer(q)
    assert list(planner.seen[-1][0]) == ["m.05zppz", "m.03_r3"]
    assert "linked entities that training questions list after another go behind the others in the planner's " \
           "prompt: Male (m.05zppz, first in 3 of 4), Jamaica (m.03_r3, first in 0 of 5)" in a.trace.fallbacks
    p.answer(q, ["Jamaica", "Male"])  # a caller's names keep the caller's order
    assert list(planner.seen[-1][0]) == ["m.03_r3", "m.05zppz"]
    p.listed = ListedFirst(Counter({"m.05zppz": 3}), Counter({"m.05zppz": 4}))  # Male is lifted over no one
    a = p.answer(q)
    assert list(planner.seen[-1][0]) == ["m.03_r3", "m.05zppz"]
    assert not any("go behind" in f for f in a.trace.fallbacks)
    off = Pipeline(replace(pipe.config, constraints=0.0, link=LinkConfig(listed_order=False)), bank=pipe.bank,
                   kg=pipe.kg, planner=planner, linker=TwoLinks())
    assert off.listed is None


def test_an_entity_training_questions_list_after_another_goes_behind_the_others():
    from memq.datasets import GoldParse, GoldQuestion
    from memq.link.order import ListedFirst
    from memq.plan.data import split_of

    train = [f"Q-{i}" for i in range(40) if split_of(f"Q-{i}") == "train"]
    dev = next(f"Q-{i}" for i in range(40) if split_of(f"Q-{i}") == "dev")

    def question(qid, *ids):
        parse = GoldParse(f"{qid}.P0", "", tuple((m, m.upper()) for m in ids), ())
        return GoldQuestion(qid, "q?", "webqsp", "train", (parse,))

    questions = [question(train[0], "m.a", "m.zone"), question(train[1], "m.b", "m.zone"),
                 question(train[2], "m.zone", "m.c"), question(train[3], "m.lone"),  # one entity: not counted
                 question(train[4], "m.b", "m.c"),
                 question(dev, "m.zone", "m.a"), question(f"WebQTest-1_{train[5]}", "m.zone", "m.a")]
    listed = ListedFirst.from_questions(questions)
    assert (listed.first["m.zone"], listed.listed["m.zone"]) == (1, 3)  # dev and WebQSP test's questions left out
    assert listed.listed["m.lone"] == 0 and listed.share("m.a") == 0.75 and listed.share("m.new") == 0.5
    assert listed.share("m.zone") == 0.375 and listed.share("m.c") == pytest.approx(1 / 6)  # 0 of 2
    assert list(listed.order({"m.zone": "Z", "m.a": "A"})) == ["m.a", "m.zone"]
    assert list(listed.order({"m.zone": "Z", "m.new": "N"})) == ["m.new", "m.zone"]
    assert list(listed.order({"m.c": "C", "m.zone": "Z", "m.new": "N"})) == ["m.new", "m.zone", "m.c"]
    # an entity listed first more often than not moves ahead of none: the linker's order stands
    assert list(listed.order({"m.new": "N", "m.a": "A"})) == ["m.new", "m.a"]
    with pytest.raises(ValueError, match="prior must be > 0, got 0"):
        ListedFirst(listed.first, listed.listed, prior=0)


def test_linker_settings_from_the_command_line_are_typed_and_checked():
    from memq.link.settings import with_settings

    config = with_settings(LinkConfig(), ["required=1", "threshold=1.1"])
    assert config.required == 1 and config.threshold == 1.1 and config.max_entities == LinkConfig().max_entities
    with pytest.raises(ValueError, match="KEY one of max_tokens"):
        with_settings(LinkConfig(), ["nonsense=1"])
    with pytest.raises(ValueError, match="linker setting required takes a int, got 'one'"):
        with_settings(LinkConfig(), ["required=one"])
    assert not with_settings(LinkConfig(), ["alternatives_last=false"]).alternatives_last  # bool("false") is True
    assert with_settings(LinkConfig(alternatives_last=False), ["alternatives_last=1"]).alternatives_last
    with pytest.raises(ValueError, match="linker setting alternatives_last takes a bool, got 'maybe'"):
        with_settings(LinkConfig(), ["alternatives_last=maybe"])


def test_a_linked_run_answers_as_memq_answer_does_without_entities(pipe, tmp_path):
    from memq.link.evaluate import run_linked

    planner = Recording(pipe.planner)
    p = Pipeline(replace(pipe.config, constraints=0.0, link=LinkConfig(required=1)), bank=pipe.bank, kg=pipe.kg,
                 planner=planner, linker=TwoLinks())
    p.linker.index = pipe.linker.index
    run_linked("webqsp", "test", "fewshot", pipeline=p, limit=1, progress=False, per_question=tmp_path / "out.jsonl")
    [record] = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert not record["same_entities"]  # Male is optional here, so the gold-entity answer is not reused
    assert [x["id"] for x in record["links"]] == ["m.03_r3", "m.05zppz"]
    assert any(f.startswith("linked entities after the best 1") for f in record["fallbacks"])
    assert planner.seen[-1] == ({"m.03_r3": "Jamaica", "m.05zppz": "Male"}, ("m.05zppz",))
    assert record["f1"] == 1.0


def test_a_suggested_constraint_with_enough_support_is_one_the_plan_must_name(pipe):
    from memq.link.constraints import Suggestion

    planner = Recording(pipe.planner)
    q = "what does jamaican people speak?"
    for floor, required in ((0.0, False), (0.9, False), (0.7, True)):
        p = Pipeline(replace(pipe.config, link=LinkConfig(required=-1, required_support=floor, fit_weight=0.0)),
                     bank=pipe.bank, kg=pipe.kg, planner=planner, linker=pipe.linker)
        p.suggest = lambda question, given: [Suggestion("m.05zppz", "Male", 0.8, ("WebQTrn-1",))]
        a = p.answer(q)
        assert planner.seen[-1] == ({"m.03_r3": "Jamaica", "m.05zppz": "Male"}, () if required else ("m.05zppz",))
        assert any(f.startswith("suggested constraint entities with at least 0.7 of the vote are ones the plan must "
                                "name: Male (m.05zppz)") for f in a.trace.fallbacks) == required
    with pytest.raises(ValueError, match="required_support is a share"):
        LinkConfig(required_support=1.5)


def test_a_linked_input_reuses_the_gold_answer_only_when_it_makes_the_same_plan():
    from memq.link.evaluate import same_input

    gold = ({"m.03_r3": "Jamaica"}, {}, ())
    assert same_input(gold, ({"m.03_r3": "Jamaica"}, {}, ()))
    assert same_input(gold, ({}, {"m.03_r3": "Jamaica"}, ()))  # one entity: optional or not, the same plan
    assert not same_input(gold, ({"m.03_r3": "Jamaica"}, {"m.05zppz": "Male"}, ()))  # a suggestion more
    assert not same_input(gold, ({"m.03_r3": "Jamaica"}, {}, ("m.03_r3",)))  # left out of the prompt
    assert not same_input(gold, ({"m.03_r3": "Jamaica (island)"}, {}, ()))  # another name
    two = ({"m.03_r3": "Jamaica", "m.05zppz": "Male"}, {}, ())
    assert not same_input(two, ({}, {"m.03_r3": "Jamaica", "m.05zppz": "Male"}, ()))  # coverage differs
    assert same_input(({}, {"m.03_r3": "Jamaica", "m.05zppz": "Male"}, ()),
                      ({}, {"m.03_r3": "Jamaica", "m.05zppz": "Male"}, ()))
    # another order: the prompt lists them so, and the planner starts from the first
    assert not same_input(({}, {"m.03_r3": "Jamaica", "m.05zppz": "Male"}, ()),
                          ({}, {"m.05zppz": "Male", "m.03_r3": "Jamaica"}, ()))


def test_linked_entities_that_are_all_unknown_to_the_kg_fail_the_question_by_their_ids(pipe):
    from memq.link.linker import Link

    class Unknown(TwoLinks):
        def link(self, question):
            return [Link("m.0zzzzz", "Foo", "foo", 2.0, 1.0, 0.5, span=(0, 1))]

    p = Pipeline(replace(pipe.config, constraints=0.0), bank=pipe.bank, kg=pipe.kg, planner=pipe.planner,
                 linker=Unknown())
    with pytest.raises(LinkingError, match="unknown entity ids 'm.0zzzzz': the knowledge graph has no triple"):
        p.answer("what does foo speak?")


def test_a_linked_run_shares_its_questions_between_shards(pipe, tmp_path):
    from memq.evaluate.run import questions_for
    from memq.evaluate.saved import load_records
    from memq.link.evaluate import link_record, run_linked

    out = tmp_path / "s1.jsonl"
    summary = run_linked("webqsp", "test", "fewshot", pipeline=pipe, limit=3, shard=(1, 2), progress=False,
                         per_question=out)
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    questions = questions_for("webqsp", "test")[:3]
    assert [r["id"] for r in records] == [questions[0].id, questions[2].id] and summary["questions"] == 2
    for r, q in zip(records, (questions[0], questions[2]), strict=True):  # each keeps its own question's linking
        want = {**link_record(pipe.linker, q), "suggested": r["linking"]["suggested"], "link_ms": None}
        assert {**r["linking"], "link_ms": None} == want
    assert summary["shard"]["index"] == 1 and summary["shard"]["of"] == 2
    # a file an earlier shard run wrote with the linkings swapped: resuming appends each record with its own
    first, third = records
    swapped = [{**first, "linking": third["linking"]}, {**third, "linking": first["linking"]}]
    out.write_text("".join(json.dumps(r) + "\n" for r in swapped), encoding="utf-8")
    run_linked("webqsp", "test", "fewshot", pipeline=pipe, limit=3, shard=(1, 2), progress=False, per_question=out)
    assert len(out.read_text(encoding="utf-8").splitlines()) == 4
    fixed = load_records(out)
    assert fixed[first["id"]]["linking"]["gold_all"] == first["linking"]["gold_all"]
    assert fixed[third["id"]]["linking"]["gold_all"] == third["linking"]["gold_all"]


def test_bad_names_are_refused_before_the_entity_index_loads(tmp_path):
    p = Pipeline(Config(entity_index=str(tmp_path / "no-index")))
    with pytest.raises(ValueError, match="contains characters a name cannot have"):
        p.answer("what does jamaican people speak?", ["Jam{aica"])
    assert p._linker is None  # the index was never opened


def test_a_part_of_a_longer_name_the_question_writes_loses_to_it(tmp_path):
    from memq.link.context import nested

    path = tmp_path / "kg.nt"
    path.write_text("".join(f'<{FB}{mid}> {NAME} "{name}"@en .\n' for mid, name in (
        ("m.0usa", "United States of America"), ("m.0latam", "Latin America"))) + "".join(
        f"<{FB}m.0usa> <{FB}location.location.contains> <{FB}m.0p{i}> .\n" for i in range(40)), encoding="utf-8")
    index = build_index(OxigraphStore.from_file(path), source={"kg": "kg.nt"})
    question = "what does latin america consist of?"
    assert Linker(index, LinkConfig(nested_weight=0.0)).link(question)[0].id == "m.0usa"  # popular, from "america"
    links = Linker(index).link(question)
    assert links[0].id == "m.0latam" and links[0].mention == "latin america"
    # only a reading that is not its own span's exact name, and only inside a longer exact name
    found = [(2.0, 2, 3, "m.0usa", 0.8, 1.0, (None, None)), (1.9, 2, 4, "m.0latam", 1.0, 0.4, (None, None)),
             (1.5, 3, 4, "m.0x", 1.0, 0.4, (None, None)), (1.4, 5, 6, "m.0y", 0.8, 0.4, (None, None))]
    assert [round(c[0], 2) for c in nested(found, 0.3)] == [1.7, 1.9, 1.5, 1.4]
    assert nested(found, 0.0) == found


def test_a_reading_whose_name_holds_the_words_beside_its_span_gains_neighbour_weight(tmp_path):
    """ "what college did john nash go to?": "john nash" is no name in the index, and "nash" read Steve Nash, the
    most popular name with it, before John Forbes Nash, Jr., whose name holds "john" too. A reading that is not its
    span's exact name gains neighbour_weight where its name holds every word beside the span (up to a function word
    each way, one or two of them), unless a longer span reads the same entity."""
    from memq.link.context import neighbours

    path = tmp_path / "kg.nt"
    path.write_text("".join(f'<{FB}{mid}> {NAME} "{name}"@en .\n' for mid, name in (
        ("m.0steve", "Steve Nash"), ("m.0john", "John Forbes Nash, Jr."), ("m.0czech", "Czech Republic"),
        ("m.0kc", "Kansas City"))) + "".join(
        f"<{FB}{mid}> <{FB}people.person.sibling_s> <{FB}m.0p{i}> .\n" for mid, n in (("m.0steve", 8), ("m.0john", 5))
        for i in range(n)), encoding="utf-8")
    index = build_index(OxigraphStore.from_file(path), source={"kg": "kg.nt"})
    question = "what college did john nash go to?"
    assert Linker(index, LinkConfig(neighbour_weight=0.0)).link(question)[0].id == "m.0steve"  # popular
    assert Linker(index).link(question)[0].id == "m.0john"
    assert Linker(index).link("what college did steve nash go to?")[0].id == "m.0steve"
    tokens = "what college did john nash go to".split()
    found = [(2.0, 4, 5, "m.0steve", 0.8, 1.0, (None, None)), (1.9, 4, 5, "m.0john", 0.7, 0.4, (None, None)),
             (1.5, 4, 5, "m.0x", 1.0, 0.4, (None, None))]
    # only a reading that is not its span's exact name and whose name holds "john"
    assert [round(c[0], 2) for c in neighbours(index, found, tokens, 0.3)] == [2.0, 2.2, 1.5]
    assert neighbours(index, found, tokens, 0.0) == found
    # not where a longer span reads it ("czech" of "czech republic"), nor with three words beside the span
    czech = [(1.0, 2, 3, "m.0czech", 0.8, 1.0, (None, None)), (2.0, 2, 4, "m.0czech", 1.0, 1.0, (None, None))]
    assert neighbours(index, czech, "who is czech republic president".split(), 0.3) == czech
    # nor where a word beside is part of another name the question writes ("kansas city kansas": "city")
    kansas = [(1.0, 5, 6, "m.0kc", 0.8, 1.0, (None, None)), (2.0, 3, 5, "m.0kc", 1.0, 1.0, (None, None))]
    assert neighbours(index, kansas, "what county is kansas city kansas".split(), 0.3) == kansas
    assert neighbours(index, kansas[:1], "what county is kansas city kansas".split(), 0.3)[0][0] == 1.3
    three = "what college did john forbes jr nash go to".split()
    assert neighbours(index, [(1.9, 6, 7, "m.0john", 0.7, 0.4, (None, None))], three, 0.3)[0][0] == 1.9
    with pytest.raises(ValueError, match="neighbour_weight must be >= 0"):
        LinkConfig(neighbour_weight=-0.1)


def test_a_title_of_a_place_links_the_place_and_the_title_in_its_place(tmp_path):
    from memq.link.titles import of_parts, parts_first

    path = tmp_path / "kg.nt"
    names = (("m.0pres_pk", "President of Pakistan"), ("m.0pk", "Pakistan"), ("m.0pres", "President"),
             ("m.0ut", "University of Texas"), ("m.0tx", "Texas"))
    path.write_text("".join(f'<{FB}{mid}> {NAME} "{name}"@en .\n' for mid, name in names) + "".join(
        f"<{FB}{mid}> <{FB}location.location.contains> <{FB}m.0p{i}> .\n" for mid in ("m.0pk", "m.0tx")
        for i in range(20)) + "".join(f"<{FB}m.0ut> <{FB}education.university.x> <{FB}m.0u{i}> .\n"
                                      for i in range(40)) + "".join(
        f"<{FB}m.0pres_pk> <{FB}government.office.x> <{FB}m.0h{i}> .\n" for i in range(12)), encoding="utf-8")
    index = build_index(OxigraphStore.from_file(path), source={"kg": "kg.nt"})
    question = "who was the president of pakistan in 1980?"
    assert [link.id for link in Linker(index, LinkConfig(of_parts=False)).link(question)] == ["m.0pres_pk"]
    links = Linker(index, LinkConfig(parts_first=False)).link(question)
    assert [(link.id, link.alternative) for link in links] == [
        ("m.0pres_pk", False), ("m.0pk", True), ("m.0pres", True)]  # the place first, then the title
    # by default both parts are read in the name's place (named in the prompt), the name a second reading
    links = Linker(index).link(question)
    assert [(link.id, link.mention, link.alternative, link.of_name) for link in links] == [
        ("m.0pk", "pakistan", False, "President of Pakistan"), ("m.0pres", "president", False, "President of Pakistan"),
        ("m.0pres_pk", "president of pakistan", True, None)]
    # the trace says why: each part names the name it was read in place of
    trace = Trace()
    assert list(resolve(Linker(index), question, None, trace)) == ["m.0pk", "m.0pres", "m.0pres_pk"]
    assert trace.links[0]["of_name"] == "President of Pakistan" and "of_name" not in trace.links[2]
    assert "Pakistan (m.0pk) from 'pakistan' (score" in trace.fallbacks[0]
    assert "read in place of President of Pakistan, whose holder the question asks for" in trace.fallbacks[0]
    # with room for the place alone the name keeps its place: a part without the other is a second reading
    assert [(link.id, link.alternative) for link in Linker(index, LinkConfig(max_entities=2)).link(question)] == [
        ("m.0pres_pk", False), ("m.0pk", True)]
    # only where the place is the more popular: the university is not read as Texas
    assert [link.id for link in Linker(index).link("where is the university of texas?")] == ["m.0ut"]
    tokens = "the president of pakistan".split()
    found = [(2.3, 1, 4, "m.0pres_pk", 1.0, 0.3, (None, None)), (1.8, 3, 4, "m.0pk", 1.0, 0.6, (None, None)),
             (1.1, 1, 2, "m.0pres", 1.0, 0.4, (None, None))]
    chosen = [Link("m.0pres_pk", "President of Pakistan", "president of pakistan", 2.3, 1.0, 0.3, span=(1, 4))]
    assert [c[3] for c in of_parts(found, chosen, tokens)] == ["m.0pk", "m.0pres"]
    partial = [replace(chosen[0], match=0.9)]  # a chosen name that is not the span's exact name has no parts
    assert of_parts(found, partial, tokens) == []
    # parts_first moves a place and a title only when both are second readings inside the name, either side of "of",
    # and keeps what came after the name in its order
    other = Link("m.0x", "X", "x", 1.0, 1.0, 0.5, span=(5, 6))
    place = Link("m.0pk", "Pakistan", "pakistan", 1.8, 1.0, 0.6, span=(3, 4), alternative=True)
    title = Link("m.0pres", "President", "president", 1.1, 1.0, 0.4, span=(1, 2), alternative=True)
    moved = parts_first([chosen[0], other, place, title], tokens)
    assert [(x.id, x.alternative) for x in moved] == [
        ("m.0pk", False), ("m.0pres", False), ("m.0x", False), ("m.0pres_pk", True)]
    assert parts_first([chosen[0], other, place], tokens) == [chosen[0], other, place]
    elsewhere = replace(title, span=(0, 1))  # not the "A" of "A of B"
    assert parts_first([chosen[0], place, elsewhere], tokens) == [chosen[0], place, elsewhere]
    # a name the question writes as a constraint, after a content word, keeps its place; words of time may stand before
    assert parts_first([chosen[0], place, title], "country president of pakistan".split())[0] == chosen[0]
    assert parts_first([chosen[0], place, title], "current president of pakistan".split())[0] == replace(
        place, alternative=False, of_name="President of Pakistan")
    assert Linker(index).link("which country has a president of pakistan?")[0].id == "m.0pres_pk"
