"""The Freebase schema as the describers read it: labels as noun phrases, type names.

Built on :func:`memq.schema.freebase_schema` (relation labels, domains,
ranges, CVT types and ``reverse_properties.gz``), adding:

* ``full_reverse_properties.json.gz`` merged into the reverse map (both ways);
* ``fb_roles.gz`` as the domain/range of relations the label file lacks;
* :meth:`FreebaseSchema.label`: a label as a lower-case noun phrase without
  parentheticals (``Spouse (or domestic partner)`` -> ``spouse``; ``From`` ->
  ``start date``);
* :meth:`FreebaseSchema.type_name`: types have no labels in these files, so a
  name is derived from the id (``government.government_position_held`` ->
  ``government position held``; ``type.datetime`` -> ``date``);
* :meth:`FreebaseSchema.class_name`: the name a class statement and a plan give a
  type, told apart from the other types of that name (``film.producer`` ->
  ``film producer`` beside ``music.producer``).
"""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from functools import cached_property, lru_cache

from memq.datasets import data_path
from memq.schema import Relation, freebase_schema

#: Literal ranges and how a description names them.
LITERAL_TYPES = {
    "type.datetime": "date",
    "type.int": "number",
    "type.float": "number",
    "type.text": "text",
    "type.rawstring": "text",
    "type.boolean": "yes/no value",
    "type.uri": "web address",
    "type.enumeration": "code",
    "type.id": "id",
}

# Labels that read badly on their own in "the X of ...", mapped to a noun phrase.
_LABEL_FIXES = {
    "from": "start date",
    "to": "end date",
    "from date": "start date",
    "to date": "end date",
    "start": "start date",
    "end": "end date",
    "number": "number",
}

_SPACE = re.compile(r"\s+")
_PAREN = re.compile(r"\s*\([^)]*\)")


#: A label ending in one of these reads as a verb phrase ("directed by", "contained by").
PREPOSITIONS = frozenset("by from to in into at for with on of as about after before near under within through "
                         "via".split())
#: A label starting like this (after an adverb) reads as a verb ("contains", "partially contains").
VERBS = frozenset("contains includes has have uses owns operates serves comprises represents supports "
                  "produces publishes broadcasts".split())


def label_kind(label: str) -> str:
    """``prep`` (``directed by``), ``verb`` (``contains``) or ``noun`` (``place of birth``)."""
    words = label.split()
    if not words:
        return "noun"
    if words[-1] in PREPOSITIONS and len(words) > 1:
        return "prep"
    if words[0] in VERBS or (len(words) > 1 and words[0].endswith("ly") and words[1] in VERBS):
        return "verb"
    return "noun"


def _words(text: str) -> str:
    """Lower-case a label word by word, keeping acronyms (``TV``, ``ISBN``) as they are."""
    out = []
    text = (_PAREN.sub("", text).strip() or text).replace("_", " ")
    for w in _SPACE.split(text.strip()):
        out.append(w if (len(w) > 1 and w.isupper()) else w.lower())
    return " ".join(out)


def _id_words(segment: str) -> str:
    seg = segment[:-2] + "s" if segment.endswith("_s") else segment
    return seg.replace("_", " ").strip()


class FreebaseSchema:
    """Lookups over the bundled schema files; use :func:`schema` for the shared instance."""

    def __init__(self, relations: dict[str, Relation], reverse: dict[str, str], cvt_types: frozenset[str]):
        self.relations = relations
        self.reverse_of = reverse
        self.cvt_types = cvt_types

    # ------------------------------------------------------------------ relations
    def relation(self, rel: str) -> Relation:
        """The relation, or one made up from its id when the schema lacks it."""
        found = self.relations.get(rel)
        if found is not None:
            return found
        head, _, last = rel.rpartition(".")
        return Relation(rel, _id_words(last), head, "")

    def label(self, rel: str) -> str:
        """A noun phrase for the relation (``people.marriage.from`` -> ``start date``)."""
        r = self.relation(rel)
        last = rel.rpartition(".")[2]
        # memq.schema fills a missing label with the id's last part; read that part our way.
        text = _words(r.label) if r.label and r.label != last.replace("_", " ") else _id_words(last)
        return _LABEL_FIXES.get(text, text)

    def reverse(self, rel: str) -> str | None:
        return self.reverse_of.get(rel)

    def domain(self, rel: str) -> str:
        return self.relation(rel).domain or rel.rpartition(".")[0]

    def range(self, rel: str) -> str:
        return self.relation(rel).range

    # ------------------------------------------------------------------ types
    def is_cvt(self, type_id: str) -> bool:
        return type_id in self.cvt_types

    def is_literal(self, type_id: str) -> bool:
        return type_id in LITERAL_TYPES

    def type_name(self, type_id: str) -> str:
        """``people.person`` -> ``person``; literal types -> ``date``/``number``/...; unknown -> ``entity``."""
        if not type_id:
            return "entity"
        if type_id in LITERAL_TYPES:
            return LITERAL_TYPES[type_id]
        if type_id == "common.topic" or type_id == "type.object":
            return "topic"
        return _id_words(type_id.rpartition(".")[2]) or "entity"

    def class_name(self, type_id: str) -> str:
        """:meth:`type_name`, told apart from the schema's other types of that name: a commons type that shares it
        with another commons type is named with its domain (``film.producer`` -> ``film producer``, beside
        ``music.producer`` and ``broadcast.producer``); a user, base or freebase type that shares it with any type
        is named with the segment before its own (``base.lightweight.radio_station`` -> ``lightweight radio
        station``); a commons type that shares it only with those keeps it (``broadcast.radio_station`` -> ``radio
        station``). Without this a plan's "Find every producer" named three classes and bound whichever came first."""
        name = self.type_name(type_id)
        others = [t for t in self._types_named.get(name, ()) if t != type_id]
        if not others or not _type_id(type_id) or type_id == "common.topic":
            return name
        head = type_id.rpartition(".")[0]
        if _commons(type_id):
            if not any(_commons(t) for t in others):
                return name
            qualifier = type_id.partition(".")[0]
        else:
            qualifier = head.rpartition(".")[2]
        return f"{_id_words(qualifier)} {name}"

    def names_type(self, name: str) -> bool:
        """Whether ``name``, in any case, is what :meth:`type_name` or :meth:`class_name` calls a commons type, or that
        name after its domain's: "Super Bowl" (``american_football.super_bowl``), "Country" (``location.country``),
        "Film actor" (``film.actor``); not "Governor" or "President of the United States", which name offices, nor
        "Tirana"."""
        return " ".join(name.lower().split()) in self._commons_type_names

    @cached_property
    def _commons_type_names(self) -> frozenset[str]:
        return frozenset(n for types in self._types_named.values() for t in types if _commons(t)
                         for n in (self.type_name(t), self.class_name(t),
                                   f"{_id_words(t.partition('.')[0])} {self.type_name(t)}"))

    @cached_property
    def _types_named(self) -> dict[str, set[str]]:
        """Each type name -> the types (domains, ranges and CVT types of the schema's relations) that have it."""
        types = {t for r in self.relations.values() for t in (r.domain, r.range)} | set(self.cvt_types)
        named: dict[str, set[str]] = defaultdict(set)
        for t in types:
            if _type_id(t):
                named[self.type_name(t)].add(t)
        return named


#: The first segments of Freebase types outside its commons, and how many segments their types have
#: (``base.lightweight.radio_station``, ``user.jamie.default_domain.invention``); freebase's own vary.
NOT_COMMONS = {"user": 4, "base": 3, "freebase": 0}


def _commons(type_id: str) -> bool:
    return type_id.partition(".")[0] not in NOT_COMMONS


def _type_id(t: str) -> bool:
    """Whether ``t`` reads as a type's id (the schema files' ranges hold some relation ids:
    ``film.content_rating.film``): two segments in the commons (``film.producer``), as many as :data:`NOT_COMMONS`
    says elsewhere."""
    if not t or t in LITERAL_TYPES or t.startswith("type."):
        return False
    segments = t.count(".") + 1
    if _commons(t):
        return segments == 2
    return NOT_COMMONS[t.partition(".")[0]] in (0, segments)


def _roles() -> dict[str, tuple[str, str]]:
    """``fb_roles.gz``: relation -> (domain, range). Two upstream lines are glued
    together, so the file is read as a flat sequence of triples."""
    with gzip.open(data_path("freebase_schema", "fb_roles.gz"), "rt", encoding="utf-8") as fh:
        tokens = fh.read().split()
    roles: dict[str, tuple[str, str]] = {}
    for i in range(0, len(tokens) - 2, 3):
        dom, rel, rng = tokens[i:i + 3]
        roles.setdefault(rel, (dom, rng))
    return roles


@lru_cache(maxsize=1)
def schema() -> FreebaseSchema:
    """The describers' view of the bundled schema, built once per process."""
    base = freebase_schema()
    roles = _roles()
    relations = {}
    for rel, r in base.relations.items():
        dom, rng = roles.get(rel, ("", ""))
        relations[rel] = Relation(rel, r.label, r.domain or dom, r.range or rng)
    for rel, (dom, rng) in roles.items():
        relations.setdefault(rel, Relation(rel, "", dom, rng))
    reverse = dict(base.reverse)
    with gzip.open(data_path("freebase_schema", "full_reverse_properties.json.gz"), "rt",
                   encoding="utf-8") as fh:
        for a, b in json.load(fh).items():
            reverse.setdefault(a, b)
            reverse.setdefault(b, a)
    return FreebaseSchema(relations, reverse, base.cvt_types)
