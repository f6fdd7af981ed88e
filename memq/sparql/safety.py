"""Put ids and names into SPARQL text safely.

Nothing from a user reaches a query string except through these functions:
ids are validated against a strict pattern, IRIs against the IRIREF grammar,
and strings are escaped.
"""

from __future__ import annotations

import re

from .model import FB

FREEBASE_ID = re.compile(r"^[mg]\.[0-9a-z_]{1,40}$")
RELATION_ID = re.compile(r"^[a-z0-9_]+(?:\.[a-z0-9_]+){1,5}$")
_IRIREF_BAD = re.compile(r'[<>"{}|^`\\\x00-\x20]')


def check_entity_id(value: object) -> str:
    """Return ``value`` if it is a Freebase entity id (``m.06w2sn5``), else raise ValueError naming it."""
    if not isinstance(value, str) or not FREEBASE_ID.fullmatch(value):
        raise ValueError(f"not a Freebase entity id (expected m.xxx or g.xxx): {value!r}")
    return value


def entity_iri(mid: str) -> str:
    """``m.06w2sn5`` -> ``<http://rdf.freebase.com/ns/m.06w2sn5>`` after validation."""
    return f"<{FB}{check_entity_id(mid)}>"


def relation_iri(rel: str) -> str:
    """``people.person.gender`` -> its full IRI in angle brackets, after validation."""
    if not isinstance(rel, str) or not RELATION_ID.fullmatch(rel):
        raise ValueError(f"not a Freebase relation id: {rel!r}")
    return f"<{FB}{rel}>"


def iri_ref(iri: str) -> str:
    """Any absolute IRI in angle brackets; raises ValueError if it could break out of ``<...>``."""
    if not isinstance(iri, str) or not iri or _IRIREF_BAD.search(iri) or ":" not in iri:
        raise ValueError(f"not a safe absolute IRI: {iri!r}")
    return f"<{iri}>"


def string_literal(text: str, lang: str | None = None) -> str:
    """A quoted, escaped SPARQL string literal (optionally with a language tag)."""
    if not isinstance(text, str):
        raise ValueError(f"not a string: {text!r}")
    body = (text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
            .replace("\r", "\\r").replace("\t", "\\t"))
    if lang is not None:
        if not re.fullmatch(r"[A-Za-z]{1,8}(?:-[A-Za-z0-9]{1,8})*", lang):
            raise ValueError(f"not a language tag: {lang!r}")
        return f'"{body}"@{lang}'
    return f'"{body}"'
