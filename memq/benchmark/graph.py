"""The benchmark graph while it is built: every triple with its provenance and owners.

A triple is *real* (read from a real Freebase source) or *synthetic* (made up
by the builder). Its *owners* are the gold queries that need it to return a
gold answer; an owned triple is never removed to fix another query. Triples
made for a near-miss distractor carry the distractor's id instead. An
in-memory Oxigraph store mirrors the graph so that gold queries can be run on
it at any time.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import pyoxigraph as ox

from memq.kg.oxigraph import lenient_datetime
from memq.sparql.model import FB, XSD, Iri, Literal

TripleKey = tuple[Iri, Iri, Iri | Literal]
# the same Virtuoso-like xsd:dateTime cast as memq.kg.oxigraph.OxigraphStore, so answers agree with it
_CASTS = {ox.NamedNode(XSD + "dateTime"): lenient_datetime}


@dataclass
class TripleInfo:
    real: bool = False
    owners: set[str] = field(default_factory=set)
    distractors: set[str] = field(default_factory=set)
    source: str = ""


def to_ox(term: Iri | Literal):
    if isinstance(term, Iri):
        return ox.NamedNode(term.value)
    if term.lang:
        return ox.Literal(term.value, language=term.lang)
    if term.datatype:
        return ox.Literal(term.value, datatype=ox.NamedNode(term.datatype))
    return ox.Literal(term.value)


def from_ox(term) -> Iri | Literal:
    if isinstance(term, ox.NamedNode):
        return Iri(term.value)
    if isinstance(term, ox.Literal):
        if term.language:
            return Literal(term.value, None, term.language)
        dtp = term.datatype.value
        if dtp in ("http://www.w3.org/2001/XMLSchema#string",
                   "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"):
            return Literal(term.value)
        return Literal(term.value, dtp)
    return Iri("_:" + str(term.value))


def answer_id(term: Iri | Literal) -> str:
    """How a result term compares with a gold answer: a Freebase id, else the IRI or the literal text."""
    if isinstance(term, Iri):
        return term.value[len(FB):] if term.value.startswith(FB) else term.value
    return term.value


class BenchmarkGraph:
    """Triples + provenance + an Oxigraph mirror."""

    def __init__(self, reverse: dict[str, str] | None = None) -> None:
        """``reverse``: relation -> its Freebase reverse property; each triple of such a relation then goes in and
        out with its mirror (``o reverse s``), as Freebase holds both directions (none: one direction only)."""
        self.reverse = reverse or {}
        self.mirrored: set[TripleKey] = set()  # the mirrors in the graph that no source gave by itself
        self.info: dict[TripleKey, TripleInfo] = {}
        self.sp: dict[tuple[Iri, Iri], set] = defaultdict(set)
        self.po: dict[tuple[Iri, object], set] = defaultdict(set)
        self.nodes: dict[Iri, set[TripleKey]] = defaultdict(set)  # node -> the triples it is subject or object of
        self.store = ox.Store()

    def __len__(self) -> int:
        return len(self.info)

    def __contains__(self, key: TripleKey) -> bool:
        return key in self.info

    def add(self, key: TripleKey, *, real: bool = False, owner: str | None = None,
            distractor: str | None = None, source: str = "") -> TripleInfo:
        mirror = self.mirror(key)
        if mirror is not None:
            if mirror not in self.info:
                self.mirrored.add(mirror)
            self._add(mirror, False, owner, distractor, source)  # implied by Freebase, not in the sources: synthetic
        if key in self.mirrored:  # a source gives a triple that was in only as a mirror: it is the source's now
            self.mirrored.discard(key)
            self.info[key].real, self.info[key].source = real, source
        return self._add(key, real, owner, distractor, source)

    def mirror(self, key: TripleKey) -> TripleKey | None:
        """``key`` read the other way (``o reverse s``) when its relation has a reverse, else None."""
        s, p, o = key
        rev = self.reverse.get(p.local) if self.reverse and isinstance(o, Iri) else None
        return (o, Iri(FB + rev), s) if rev else None

    def _add(self, key: TripleKey, real: bool, owner: str | None, distractor: str | None,
             source: str) -> TripleInfo:
        info = self.info.get(key)
        if info is None:
            info = self.info[key] = TripleInfo(real=real, source=source)
            s, p, o = key
            self.sp[(s, p)].add(o)
            self.po[(p, o)].add(s)
            self.nodes[s].add(key)
            if isinstance(o, Iri):
                self.nodes[o].add(key)
            self.store.add(self.quad(key))
        if owner:
            info.owners.add(owner)
        if distractor:
            info.distractors.add(distractor)
        return info

    @staticmethod
    def quad(key: TripleKey) -> ox.Quad:
        s, p, o = key
        return ox.Quad(to_ox(s), to_ox(p), to_ox(o))

    def remove(self, key: TripleKey) -> None:
        mirror = self.mirror(key)
        if mirror is not None:
            self._remove(mirror)
        self._remove(key)

    def _remove(self, key: TripleKey) -> None:
        self.mirrored.discard(key)
        info = self.info.pop(key, None)
        if info is None:
            return
        s, p, o = key
        self.sp[(s, p)].discard(o)
        self.po[(p, o)].discard(s)
        self.nodes[s].discard(key)
        if isinstance(o, Iri):
            self.nodes[o].discard(key)
        self.store.remove(self.quad(key))

    def solid(self, key: TripleKey) -> bool:
        """Real, or needed by a gold query: a triple worth reusing."""
        info = self.info.get(key)
        return info is not None and (info.real or bool(info.owners))

    def around(self, node: Iri) -> list[TripleKey]:
        """The triples ``node`` is the subject or the object of."""
        return list(self.nodes.get(node, ()))

    def relations(self, node: Iri) -> tuple[set[str], set[str]]:
        """The relations (local names) out of and into ``node``."""
        out: set[str] = set()
        into: set[str] = set()
        for s, p, _ in self.nodes.get(node, ()):
            (out if s == node else into).add(p.local)
        return out, into

    def values(self, s, p: str) -> list:
        """Objects of ``(s, p)`` in the graph, sorted."""
        return sorted(self.sp.get((s, Iri(p)), ()), key=_sort_key)

    def run(self, sparql: str) -> list[dict[str, Iri | Literal]]:
        """Rows of a standard SPARQL SELECT, as OxigraphStore would return them."""
        result = self.store.query(sparql, custom_functions=_CASTS)
        names = [v.value for v in result.variables]
        rows = []
        for sol in result:
            row = {}
            for name in names:
                val = sol[name]
                if val is not None:
                    row[name] = from_ox(val)
            rows.append(row)
        return rows


def _sort_key(term) -> tuple:
    if isinstance(term, Iri):
        return (0, term.value, "")
    return (1, term.value, term.datatype or term.lang or "")


def sort_key(term) -> tuple:
    return _sort_key(term)
