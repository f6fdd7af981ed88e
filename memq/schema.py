"""The Freebase schema bundled in ``data/freebase_schema``: labels, domains, ranges, CVT types.

The one loader of these files, lazily, once per process: :func:`freebase_schema`
(the label file, the CVT types, the reverse properties) and
:func:`numeric_ranges`. The describers (:mod:`memq.describe.schema`) and the
benchmark-KG builder (:func:`memq.benchmark.builder_schema.load_schema`) build their
views on it.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from functools import lru_cache

from .datasets import data_path


@dataclass(frozen=True)
class Relation:
    id: str
    label: str
    domain: str
    range: str


class Schema:
    """Relation metadata and the set of CVT (mediator) types."""

    def __init__(self, relations: dict[str, Relation], cvt_types: frozenset[str],
                 reverse: dict[str, str]) -> None:
        self.relations = relations
        self.cvt_types = cvt_types
        self.reverse = reverse

    def relation(self, rel: str) -> Relation | None:
        return self.relations.get(rel)

    def domain(self, rel: str) -> str | None:
        r = self.relations.get(rel)
        return r.domain if r else None

    def range(self, rel: str) -> str | None:
        r = self.relations.get(rel)
        return r.range if r else None

    def is_cvt_type(self, type_id: str | None) -> bool:
        return type_id in self.cvt_types

    def reverse_of(self, rel: str) -> str | None:
        """The relation that points the other way (``film.film.starring`` <-> ``film.performance.film``)."""
        return self.reverse.get(rel)


@lru_cache(maxsize=1)
def freebase_schema() -> Schema:
    """The bundled Freebase schema (relations, CVT types, reverse relations)."""
    with gzip.open(data_path("freebase_schema", "fb_relations_domain_range_label.json.gz"), "rt",
                   encoding="utf-8") as fh:
        raw = json.load(fh)
    relations = {
        rel: Relation(rel, info.get("label") or rel.rsplit(".", 1)[-1].replace("_", " "),
                      info.get("domain") or "", info.get("range") or "")
        for rel, info in raw.items()
    }
    with open(data_path("freebase_schema", "cvt_types.derived.txt"), encoding="utf-8") as fh:
        cvt = frozenset(line.strip() for line in fh if line.strip() and not line.startswith("#"))
    reverse: dict[str, str] = {}
    for a, b in _pairs("reverse_properties.gz"):
        reverse.setdefault(a, b)
        reverse.setdefault(b, a)
    return Schema(relations, cvt, reverse)


@lru_cache(maxsize=1)
def numeric_ranges() -> dict[str, str]:
    """``numeric_properties.txt.gz``: relation -> numeric literal type (``type.int``, ...); the first line wins."""
    out: dict[str, str] = {}
    for rel, kind in _pairs("numeric_properties.txt.gz"):
        out.setdefault(rel, kind)
    return out


def _pairs(name: str):
    """The lines of two whitespace-separated fields of a gzipped schema file, as pairs (other lines skipped)."""
    with gzip.open(data_path("freebase_schema", name), "rt", encoding="utf-8") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) == 2:
                yield parts[0], parts[1]
