"""Demonyms: "what language do most italians speak?", "greek people" read as the country they are formed from.

:func:`EntityIndex.bases <memq.link.index.EntityIndex.bases>` finds the country of an adjective that starts with its
name ("egyptian": Egypt), and only of a span that names no entity exactly. Many demonyms are formed otherwise
("british", "dutch", "greek", "filipino"), are plural ("italians", "brazilians") or are an entity's exact name too
("maltese"). ``data/demonyms/demonyms.tsv`` lists each country's demonyms (countryinfo's, written by
``scripts/demonyms.py``); a plural, or a singular before "people", reads the most popular entity with the country's
exact name, at ``LinkConfig.demonym_match`` (:func:`countries` says where, from WebQSP's train questions). The
linker's other signals still choose among the span's readings.
"""

from __future__ import annotations

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
              path: str | Path = DEMONYMS) -> list[str]:
    """The ids the span ``tokens[i:j]`` (normalised) reads as a demonym (:func:`country_ids`), only where WebQSP's
    train questions name the country so (:data:`READ`):

    - a plural with no word before it but a stop word (``stop_words``): "what do most nigerians speak?", "what
      sports do canadians like?" (each of the 8 train questions that write one names the country). After another
      word it is part of a people's name: "the seneca indians", "lakota indians", "ethnic russians" (none of 11);
    - a singular before "people": "what language do hungarian people speak?" (11 of 12; "irish people" is the
      people). A singular alone is more often a language or a part of a name ("speak portuguese", "american
      express": 38 of the 87 name the country).
    """
    key = " ".join(tokens[i:j])
    if key not in demonyms(path) or where(tokens, i, j, stop_words, path) not in READ:
        return []
    return country_ids(index, key, path)
