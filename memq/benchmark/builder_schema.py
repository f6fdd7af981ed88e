"""The benchmark builder's view of the Freebase schema: relation ranges and domains, and the CVT types.

:class:`BuilderSchema` is what the builder types values and reads query shapes by (is a relation's object a
literal, a CVT node?). It is built from :class:`memq.schema.Schema`, the bundled schema itself (labels,
domains, ranges, reverse properties), with the ranges of numeric relations filled in where the label file
lacks them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from memq.schema import freebase_schema, numeric_ranges

LITERAL_RANGES = frozenset({
    "type.datetime", "type.int", "type.float", "type.text", "type.rawstring", "type.boolean",
    "type.enumeration", "type.uri", "type.id", "type.key",
})


@dataclass(frozen=True)
class BuilderSchema:
    """Ranges and domains of Freebase relations and the CVT (mediator) types."""

    ranges: dict[str, str]
    domains: dict[str, str]
    cvt_types: frozenset[str]

    def range(self, relation: str) -> str | None:
        return self.ranges.get(relation)

    def is_literal_relation(self, relation: str) -> bool:
        return self.ranges.get(relation) in LITERAL_RANGES

    def cvt_range(self, relation: str) -> bool:
        return self.ranges.get(relation) in self.cvt_types

    def cvt_domain(self, relation: str) -> bool:
        return self.domains.get(relation) in self.cvt_types


@lru_cache(maxsize=1)
def load_schema() -> BuilderSchema:
    """The builder's view of :func:`memq.schema.freebase_schema`: ranges (:func:`memq.schema.numeric_ranges`
    fills those the label file lacks), domains and CVT types."""
    base = freebase_schema()
    ranges = {r: v.range for r, v in base.relations.items() if v.range}
    domains = {r: v.domain for r, v in base.relations.items() if v.domain}
    for rel, rng in numeric_ranges().items():
        ranges.setdefault(rel, rng)
    return BuilderSchema(ranges, domains, base.cvt_types)


@lru_cache(maxsize=1)
def reverse_relations() -> dict[str, str]:
    """Each relation with a Freebase reverse property -> that reverse (both ways; the bundled reverse maps, as the
    describers read them), ``type.`` relations aside (``type.object.type`` is read one way only)."""
    from memq.describe.schema import schema

    return {r: rev for r, rev in schema().reverse_of.items()
            if not r.startswith("type.") and not rev.startswith("type.")}
