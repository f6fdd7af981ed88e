"""Demonyms: "what language do most italians speak?", "greek people" read as the country they are formed from; and a
language or its country, by what the question asks for.

:func:`EntityIndex.bases <memq.link.index.EntityIndex.bases>` finds the country of an adjective that starts with its
name ("egyptian": Egypt), and only of a span that names no entity exactly. Many demonyms are formed otherwise
("british", "dutch", "greek", "filipino"), are plural ("italians", "brazilians") or are an entity's exact name too
("maltese"). ``data/demonyms/demonyms.tsv`` lists each country's demonyms (countryinfo's, written by
``scripts/demonyms.py``); a plural, or a singular before "people", reads the most popular entity with the country's
exact name, at ``LinkConfig.demonym_match`` (:func:`countries` says where, from WebQSP's train questions). The
linker's other signals still choose among the span's readings.

**A language or its country, by the class asked for** (:func:`asked_other`; ``LinkConfig.asked_other``): "german"
reads both *German Language* and, as a demonym, *Germany*, and the mention prior prefers the country by about 0.5.
Where the question asks for a country ("what countries ... speak german?", "which nation ... turkish?"), the entity
it names is the language, and where it asks for a language ("what language do portuguese people speak?"), the
country: on CWQ dev, 68 questions that ask for a country have such a span and the language as a gold entity (the
country was read first in 40 of them), and 4 that ask for a language have the country; none the other way. So the
reading of the other class gains ``asked_other``. A question asking what someone speaks in any words asks for a
language (``LinkConfig.speech_asked``: "what do portuguese people speak?"), and a singular demonym that names who
speaks reads its country there (:func:`speakers`: "what language is spoken in greek?").
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from .index import EntityIndex, normalize

DEMONYMS = Path(__file__).resolve().parent.parent.parent / "data" / "demonyms" / "demonyms.tsv"
# a demonym ending so is its own plural ("the portuguese", "the british", "the dutch", "the swiss")
NO_PLURAL = ("ese", "sh", "ch", "ss")


def plural(demonym: str) -> str:
    """The plural of a (normalised) demonym: "italian" -> "italians", "new zealander" -> "new zealanders",
    "portuguese" -> "portuguese"."""
    return demonym if demonym.endswith(NO_PLURAL) else demonym + "s"


@lru_cache(maxsize=4)
def demonyms(path: str | Path = DEMONYMS) -> dict[str, tuple[str, ...]]:
    """Each normalised demonym and its plural -> the normalised names of the countries it is formed from ("french":
    France, and the lands whose demonym countryinfo gives as French too)."""
    out: dict[str, list[str]] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        name, sep, forms = line.partition("\t")
        if not sep or not forms:
            raise ValueError(f"{path}: a line is COUNTRY<TAB>DEMONYM[,DEMONYM...], got {line!r}")
        country = normalize(name)
        for form in forms.split(","):
            key = normalize(form)
            for written in (key, plural(key)):
                if key and country not in out.setdefault(written, []):
                    out[written].append(country)
    return {key: tuple(names) for key, names in out.items()}


@lru_cache(maxsize=4)
def plurals(path: str | Path = DEMONYMS) -> frozenset[str]:
    """The forms of :func:`demonyms` that are only plurals ("italians", not "portuguese")."""
    table = demonyms(path)
    return frozenset(plural(form) for form in table if plural(form) != form and plural(form) in table)


# where a demonym stands in a question (:func:`where`; benchmarks/demonyms_train.py counts each in WebQSP train)
PLACES = ("plural after a stop word or at the start", "plural after another word", "singular before \"people\"",
          "singular otherwise")
READ = (PLACES[0], PLACES[2])  # the places where a demonym reads its country (:func:`countries`)


def where(tokens: list[str], i: int, j: int, stop_words: frozenset[str] = frozenset(),
          path: str | Path = DEMONYMS) -> str:
    """Which of :data:`PLACES` the demonym ``tokens[i:j]`` (normalised) stands in."""
    if " ".join(tokens[i:j]) in plurals(path):
        return PLACES[1] if i and tokens[i - 1] not in stop_words else PLACES[0]
    return PLACES[2] if tokens[j:j + 1] == ["people"] else PLACES[3]


def country_ids(index: EntityIndex, key: str, path: str | Path = DEMONYMS) -> list[str]:
    """For each country the demonym ``key`` is formed from, the most popular entity with the country's exact name."""
    return [found[0] for name in demonyms(path).get(key, ()) if (found := index.exact(name))]


def countries(index: EntityIndex, tokens: list[str], i: int, j: int, stop_words: frozenset[str] = frozenset(),
              speech: bool = False, path: str | Path = DEMONYMS) -> list[str]:
    """The ids the span ``tokens[i:j]`` (normalised) reads as a demonym (:func:`country_ids`), only where WebQSP's
    train questions name the country so (:data:`READ`):

    - a plural with no word before it but a stop word (``stop_words``): "what do most nigerians speak?", "what
      sports do canadians like?" (each of the 8 train questions that write one names the country). After another
      word it is part of a people's name: "the seneca indians", "lakota indians", "ethnic russians" (none of 11);
    - a singular before "people": "what language do hungarian people speak?" (11 of 12; "irish people" is the
      people). A singular alone is more often a language or a part of a name ("speak portuguese", "american
      express": 38 of the 87 name the country);
    - with ``speech`` (``LinkConfig.speech_asked``), a singular in a question asking for a language that names who
      speaks it (:func:`memq.link.demonyms.speakers`): "what language do haitian speak?", "what language do they
      speak in thai?" (4 of the 6 train questions that write one name the country; the other 2 a people: "what kind
      of language do irish speak?").
    """
    key = " ".join(tokens[i:j])
    if key not in demonyms(path):
        return []
    place = where(tokens, i, j, stop_words, path)
    if place not in READ and not (speech and place == PLACES[3] and j == i + 1 and speakers(tokens, i)):
        return []
    return country_ids(index, key, path)


# the question asks for a country, or for a language (not its family or group)
ASKS_COUNTRY = re.compile(r"\b(?:what|which)\s+(?:countr(?:y|ies)|nations?)\b|\bin what countr")
ASKS_LANGUAGE = re.compile(r"\b(?:what|which)\s+(?:\w+\s+)?languages?\b(?!\s+(?:family|group))")


# a question asking what is spoken, in any words ("what do portuguese people speak?", "what kind of language do
# egyptian speak?"); it asks for a language too where LinkConfig.speech_asked is on
ASKS_SPEECH = re.compile(r"\b(?:what|which)\b.*\b(?:speak|speaks|spoke|talk|talks)\b"
                         r"(?!\s+(?:about|to|at|with|on|of)\b)")
# a form of "speak" right before a span ("speak turkish") or right after it ("turkish speaking", "turkish is spoken")
SPEAK_BEFORE = frozenset("speak speaks spoke speaking".split())
SPEAK_AFTER = frozenset("speaking spoken speaker speakers".split())


def spoken(tokens: list[str], i: int) -> bool:
    """Whether the one-word span ``tokens[i]`` is said to be spoken: a form of "speak" right before it, or
    "speaking", "spoken" or "speakers" right after it (after "is" or "are" too)."""
    after = tokens[i + 1:i + 3]
    if after[:1] and after[0] in ("is", "are"):
        after = after[1:]
    return (i > 0 and tokens[i - 1] in SPEAK_BEFORE) or bool(after[:1]) and after[0] in SPEAK_AFTER


def asks_language(text: str, speech: bool = False) -> bool:
    """Whether the (normalised) question ``text`` asks for a language: "what language ...?", and with ``speech``
    what someone speaks in any words (:data:`ASKS_SPEECH`) where it does not ask for a country ("what country speaks
    italian and german?" asks what speaks)."""
    return bool(ASKS_LANGUAGE.search(text)
                or speech and ASKS_SPEECH.search(text) and not ASKS_COUNTRY.search(text))


def speakers(tokens: list[str], i: int) -> bool:
    """Whether the one-word span ``tokens[i]`` names who speaks in a question asking for a language
    (``LinkConfig.speech_asked``): "british" of "what language do british speak?", "greek" of "what language is
    spoken in greek?"; not a span said to be spoken (:func:`spoken`: "speak portuguese"), nor one before "language"
    ("where is portuguese language spoken?")."""
    return (tokens[i + 1:i + 2] != ["language"] and not spoken(tokens, i)
            and asks_language(" ".join(tokens), speech=True))


def asked_other(index, found: list, tokens: list[str], weight: float, speech: bool = False,
                asked: bool = False) -> list:
    """``found`` (:meth:`memq.link.linker.Linker.candidates`' tuples) with ``weight`` added, on each one-word span
    that reads both a language (an entity named "<span> Language") and the country the span is a demonym or an
    adjective of, to the language where the question asks for a country, and to the country where it asks for a
    language; as it is where it asks for both or neither. With ``speech``, a span said to be spoken (:func:`spoken`:
    "where do they speak turkish?", "what turkish speaking country ...?") reads the language however the question
    asks; with ``asked``, a question asking what someone speaks in any words asks for a language
    (:func:`asks_language`: "what do portuguese people speak?")."""
    text = " ".join(tokens)
    country, language = bool(ASKS_COUNTRY.search(text)), asks_language(text, asked)
    said = {i for i in range(len(tokens)) if spoken(tokens, i)} if speech else set()
    if country == language and not said:
        return found
    lift: dict[tuple[int, str], float] = {}
    for i in sorted({c[1] for c in found if c[2] - c[1] == 1}):
        key = tokens[i]
        readings = {c[3] for c in found if (c[1], c[2]) == (i, i + 1)}
        languages = {m for m in readings if normalize(index.name(m) or "") == f"{key} language"}
        countries = readings & {*country_ids(index, key), *(m for n in index.bases(key) for m in index.exact(n)[:1])}
        if languages and countries and (i in said or country != language):
            lift.update(((i, m), weight) for m in (languages if country or i in said else countries))
    if not lift:
        return found
    return [(c[0] + lift.get((c[1], c[3]), 0.0), *c[1:]) if c[2] - c[1] == 1 else c for c in found]
