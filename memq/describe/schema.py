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
  ``government position held``; ``type.datetime`` -> ``date``).
"""

from __future__ import annotations

import gzip
import json
import re
from functools import lru_cache

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
