"""Which nodes of a query graph are CVT (mediator) nodes.

A CVT node (Freebase's compound value type, e.g. a marriage or a
government position held) has no name of its own; MemQ's statements never
start or end at one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..schema import Schema, freebase_schema
from ..sparql.model import FB, Iri, Literal, Term, Triple, Var


class CvtOracle(Protocol):
    def is_cvt(self, node: Term, triples: Sequence[Triple]) -> bool:
        """Whether ``node`` is a CVT node, given the query triples that touch it."""
        ...


class SchemaCvtOracle:
    """Decides from the schema: a node is a CVT if a relation touching it has a
    mediator type as its domain (node is the subject) or range (node is the object).

    The mediator list is ``data/freebase_schema/cvt_types.derived.txt``.
    """

    def __init__(self, schema: Schema | None = None) -> None:
        self._schema = schema

    @property
    def schema(self) -> Schema:
        if self._schema is None:
            self._schema = freebase_schema()
        return self._schema

    def is_cvt(self, node: Term, triples: Sequence[Triple]) -> bool:
        if isinstance(node, Literal):
            return False
        schema = self.schema
        for t in triples:
            if not (isinstance(t.p, Iri) and t.p.is_freebase):
                continue
            rel = t.p.local
            if t.s == node and schema.is_cvt_type(schema.domain(rel)):
                return True
            if t.o == node and schema.is_cvt_type(schema.range(rel)):
                return True
        return False


class KgCvtOracle:
    """Asks a knowledge graph: a constant node without ``type.object.name`` is a CVT.

    Variables cannot be asked about before the query runs, so they go to
    ``fallback`` (the schema by default).
    """

    def __init__(self, kg, fallback: CvtOracle | None = None, timeout: float = 10.0) -> None:
        self.kg = kg
        self.fallback = fallback or SchemaCvtOracle()
        self.timeout = timeout
        self._cache: dict[str, bool] = {}

    def is_cvt(self, node: Term, triples: Sequence[Triple]) -> bool:
        if isinstance(node, Var) or not (isinstance(node, Iri) and node.is_entity):
            return self.fallback.is_cvt(node, triples)
        if node.value not in self._cache:
            from ..sparql.safety import iri_ref

            query = f"SELECT ?n WHERE {{ {iri_ref(node.value)} <{FB}type.object.name> ?n }} LIMIT 1"
            self._cache[node.value] = not self.kg.select(query, timeout=self.timeout)
        return self._cache[node.value]
