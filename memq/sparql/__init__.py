"""SPARQL layer: parse gold queries (Virtuoso dialect), model them, write them back.

>>> q = parse_query("PREFIX ns: <http://rdf.freebase.com/ns/> SELECT ?x WHERE { ns:m.1 ns:a.b.c ?x }")
>>> print(to_standard(q).splitlines()[1])
  <http://rdf.freebase.com/ns/m.1> <http://rdf.freebase.com/ns/a.b.c> ?x .
"""

from __future__ import annotations

from .model import Query
from .parser import parse_query
from .serialize import READABLE, STANDARD, Writer


def _as_query(query: Query | str) -> Query:
    return parse_query(query) if isinstance(query, str) else query


def to_standard(query: Query | str) -> str:
    """Standard SPARQL 1.1 with full IRIs, accepted by pyoxigraph, rdflib and Virtuoso."""
    return STANDARD.query(_as_query(query))


def to_readable(query: Query | str) -> str:
    """The readable ``PREFIX ns:`` form."""
    return READABLE.query(_as_query(query))


__all__ = ["Query", "Writer", "parse_query", "to_readable", "to_standard"]
