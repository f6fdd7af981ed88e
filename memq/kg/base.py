"""What every knowledge graph backend offers: SELECT rows of typed terms, and names.

A row is a ``dict`` from variable name (no ``?``) to a term of
:mod:`memq.sparql.model`: :class:`~memq.sparql.model.Iri` or
:class:`~memq.sparql.model.Literal`. Unbound variables are left out of the row.

Literal conventions, the same for every backend so that results compare equal:

* a simple literal (``"x"`` or ``"x"^^xsd:string``) has ``datatype=None``;
* a language-tagged literal has ``lang`` set (lower case) and ``datatype=None``;
* any other literal keeps its datatype IRI; ``xsd:boolean`` ``1``/``0`` (as
  Virtuoso writes them) become ``true``/``false``.

Virtuoso writes ``xsd:double`` values with 6 significant digits
(``1.23457e+08``); that precision is lost before memq sees it.

Blank nodes (Freebase has none) come back as ``Iri("_:label")``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from memq.errors import KnowledgeGraphError
from memq.sparql.model import FB, XSD, Iri, Literal

Term = Iri | Literal
Row = dict[str, Term]

NAME_PREDICATE = FB + "type.object.name"
XSD_STRING = XSD + "string"
XSD_BOOLEAN = XSD + "boolean"
RDF_LANG_STRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"
_NAME_BATCH = 200
_ID = re.compile(r"^[A-Za-z0-9_.\-]+$")


@runtime_checkable
class KnowledgeGraph(Protocol):
    """A store or endpoint that answers SPARQL SELECT queries."""

    def select(self, query: str, timeout: float | None = None) -> list[Row]:
        """Run a SELECT query (WebQSP/CWQ Virtuoso dialect or standard SPARQL 1.1).

        Raises :class:`~memq.errors.KnowledgeGraphError` naming the query when it
        is malformed, fails, or runs longer than ``timeout`` seconds.
        """
        ...

    def names(self, ids: Iterable[str]) -> dict[str, str]:
        """English ``type.object.name`` of Freebase ids (``m.06w2sn5``); ids without one are left out."""
        ...


def make_literal(value: str, datatype: str | None = None, lang: str | None = None) -> Literal:
    """A :class:`Literal` normalised to the conventions of this module."""
    if lang:
        return Literal(value, None, lang.lower())
    if datatype in (None, "", XSD_STRING, RDF_LANG_STRING):
        return Literal(value)
    if datatype == XSD_BOOLEAN and value in ("0", "1"):
        value = "true" if value == "1" else "false"
    return Literal(value, datatype)


def short_query(query: str, limit: int = 400) -> str:
    """A query on one line, cut to ``limit`` characters, for error messages."""
    flat = " ".join(query.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


# --------------------------------------------------------------------------- names

def check_ids(ids: Iterable[str]) -> list[str]:
    """Freebase ids without repeats, in order; raises ``ValueError`` naming a bad one."""
    out: dict[str, None] = {}
    for i in ids:
        if isinstance(i, Iri):
            i = i.local
        if not isinstance(i, str) or not _ID.fullmatch(i):
            raise ValueError(f"not a Freebase id: {i!r} (expected e.g. 'm.06w2sn5')")
        out.setdefault(i, None)
    return list(out)


def names_query(ids: list[str]) -> str:
    """Standard SPARQL listing every ``type.object.name`` of ``ids``."""
    values = " ".join(f"<{FB}{i}>" for i in ids)
    return (f"SELECT ?s ?n WHERE {{ VALUES ?s {{ {values} }} "
            f"?s <{NAME_PREDICATE}> ?n . }}")


def pick_names(rows: Iterable[Row]) -> dict[str, str]:
    """One name per id: ``@en`` first, then an untagged literal, then any other tag."""
    best: dict[str, tuple[int, str]] = {}
    for row in rows:
        s, n = row.get("s"), row.get("n")
        if not isinstance(s, Iri) or not isinstance(n, Literal):
            continue
        rank = 0 if n.lang == "en" else 1 if n.lang is None else 2
        key = s.local
        if key not in best or (rank, n.value) < best[key]:
            best[key] = (rank, n.value)
    return {k: v for k, (_, v) in best.items()}


def lookup_names(run, ids: Iterable[str]) -> dict[str, str]:
    """Names of ``ids`` using ``run(standard_query) -> rows``, in batches."""
    todo = check_ids(ids)
    out: dict[str, str] = {}
    for start in range(0, len(todo), _NAME_BATCH):
        out.update(pick_names(run(names_query(todo[start:start + _NAME_BATCH]))))
    return out


def query_error(what: str, query: str, reason: object) -> KnowledgeGraphError:
    """A :class:`KnowledgeGraphError` naming ``what`` failed, why, and the query."""
    return KnowledgeGraphError(f"{what}: {short_query(str(reason), 300)} | query: {short_query(query)}")
