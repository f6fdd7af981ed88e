"""Inputs of the benchmark KG: Freebase schema hints, real triples, English names.

Everything is read from the repository's ``data/`` folder:

* ``freebase_schema/``: relation ranges and domains, the derived CVT-type list;
* ``freebase_subgraph/``: REAL Freebase triples (GoG gold-path triples for
  WebQSP-test and CWQ-test, EPR's retrieved WebQSP-train neighbourhoods);
* ``fb15k237/``: REAL Freebase triples of FB15k-237 among its 14,541 entities,
  its 144 CVT-path relations expanded through a CVT node (:func:`load_fb15k237`);
* ``freebase_names/`` and the GoG raw files: mid -> English name.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache

from memq.datasets import data_path, mid_names
from memq.sparql.model import FB, Iri, Literal

from .builder_schema import LITERAL_RANGES, BuilderSchema
from .values import literal_for_answer, literal_from_raw

_MID = re.compile(r"^[mg]\.[0-9a-z_]+$")
_TYPE_ID = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")
NAME = FB + "type.object.name"
# the CVT nodes of FB15k-237's CVT-path relations: real facts, but Freebase's own CVT mid is not in the data
FB15K_CVT = "http://memq.dev/fb15k237/cvt_"
# EPR relations that are not Freebase facts or that carry mangled values
_EPR_SKIP = {"type.object.name", "en", "common.topic.description"}


def fb(local: str) -> Iri:
    return Iri(FB + local)


@dataclass
class RealTriples:
    """Real Freebase triples with the source file of each."""

    triples: dict[tuple[Iri, Iri, Iri | Literal], str] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)

    def add(self, h: str, r: str, t: str, source: str, schema: BuilderSchema, kind_of=None) -> None:
        if not _MID.match(h) or not _TYPE_ID.match(r):
            self.skipped["bad head or relation"] = self.skipped.get("bad head or relation", 0) + 1
            return
        if _MID.match(t) or (r == "type.object.type" and _TYPE_ID.match(t)):
            obj: Iri | Literal = fb(t)
        elif r in _EPR_SKIP:
            self.skipped[f"relation {r}"] = self.skipped.get(f"relation {r}", 0) + 1
            return
        elif schema.range(r) not in LITERAL_RANGES and _TYPE_ID.match(t) and schema.range(r) is not None:
            obj = fb(t)  # an id-valued object such as a type or a property
        elif schema.range(r) is None and kind_of is not None and kind_of(r) is not None:
            obj = literal_for_answer(t, kind_of(r))  # no schema range: the gold queries' usage decides
        else:
            obj = literal_from_raw(t, schema.range(r))
        self.triples.setdefault((fb(h), fb(r), obj), source)


def load_real_triples(schema: BuilderSchema, kind_of=None) -> RealTriples:
    """The GoG gold-path triples (WebQSP test, CWQ test) and EPR's WebQSP-train subgraphs.

    ``kind_of(relation)`` types EPR's bare literals of relations the schema has no range for.
    """
    out = RealTriples()
    for name in ("gog_webqsp_test_triples.tsv.gz", "gog_cwq_test_triples.tsv.gz"):
        with gzip.open(data_path("freebase_subgraph", name), "rt", encoding="utf-8") as fh:
            next(fh)
            for line in fh:
                h, r, t = line.rstrip("\n").split("\t")[:3]
                out.add(h, r, t, name, schema, kind_of)
    name = "epr_webqsp_dev_simple.jsonl.gz"
    with gzip.open(data_path("freebase_subgraph", name), "rt", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            for h, r, t in rec["subgraph"]["tuples"]:
                out.add(h, r, t, name, schema, kind_of)
    return out


@lru_cache(maxsize=1)
def gog_names() -> dict[str, str]:
    """mid -> name read off the GoG raw files (``crucial_triples`` aligned with ``mid_crucial_triples``)."""
    out: dict[str, str] = {}
    raw = data_path("freebase_subgraph", "raw")
    for path in sorted(raw.glob("gog_*.json.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            records = json.load(fh)
        for rec in records:
            for mids, named in zip(rec.get("mid_crucial_triples") or (), rec.get("crucial_triples") or (),
                                   strict=False):
                for i in (0, 2):
                    mid, name = mids[i], named[i]
                    if _MID.match(mid) and name and name != mid and not _MID.match(name):
                        out.setdefault(mid, name)
    return out


class Names:
    """English names: gold annotations first, then the bundled mid2name map, then GoG."""

    def __init__(self) -> None:
        self.gold: dict[str, str] = {}
        self._dict = mid_names()
        self._gog = gog_names()

    def note_gold(self, mid: str, name: str) -> None:
        if _MID.match(mid) and name and name != mid:
            self.gold.setdefault(mid, name)

    def get(self, mid: str) -> str | None:
        return self.gold.get(mid) or self._dict.get(mid) or self._gog.get(mid)


def is_mid(text: str) -> bool:
    return bool(_MID.match(text))


def fb15k_relation(path: str) -> tuple[str, ...]:
    """An FB15k-237 relation as Freebase relations: ``/a/b/c`` -> ``("a.b.c",)``.

    A CVT path ``/film/film/release_date_s./film/film_regional_release_date/film_release_region``
    gives its two relations, subject -> CVT and CVT -> object.
    """
    parts = tuple(p.strip("/").replace("/", ".") for p in path.split("./"))
    if not 1 <= len(parts) <= 2 or not all(_TYPE_ID.match(p) for p in parts):
        raise ValueError(f"not an FB15k-237 relation: {path!r}")
    return parts


def fb15k_cvt(head: str, path: str, tail: str) -> Iri:
    """The deterministic CVT node of one CVT-path triple."""
    digest = hashlib.sha1("\x1f".join((head, path, tail)).encode("utf-8")).hexdigest()[:16]
    return Iri(FB15K_CVT + digest)


def load_fb15k237(folder=None) -> dict[tuple[Iri, Iri, Iri], str]:
    """Every FB15k-237 triple (train, valid, test) as Freebase triples -> the FB15k-237 relation it came from.

    ``/m/0abc`` becomes ``m.0abc``; a CVT-path triple becomes two triples through
    :func:`fb15k_cvt`'s node. ``folder`` defaults to ``data/fb15k237``.
    """
    folder = folder or data_path("fb15k237")

    def lines(name: str):
        with gzip.open(folder / name, "rt", encoding="utf-8") as fh:
            next(fh)  # the count
            for line in fh:
                if line.strip():
                    yield line.split()

    entities = {int(i): m.strip("/").replace("/", ".") for m, i in lines("entity2id.txt.gz")}
    relations = {int(i): r for r, i in lines("relation2id.txt.gz")}
    out: dict[tuple[Iri, Iri, Iri], str] = {}
    for split in ("train2id.txt.gz", "valid2id.txt.gz", "test2id.txt.gz"):
        for h, t, r in lines(split):
            head, tail, path = entities[int(h)], entities[int(t)], relations[int(r)]
            rels = fb15k_relation(path)
            if len(rels) == 1:
                out.setdefault((fb(head), fb(rels[0]), fb(tail)), path)
            else:
                cvt = fb15k_cvt(head, path, tail)
                out.setdefault((fb(head), fb(rels[0]), cvt), path)
                out.setdefault((cvt, fb(rels[1]), fb(tail)), path)
    return out


def is_fb15k_cvt(term) -> bool:
    return isinstance(term, Iri) and term.value.startswith(FB15K_CVT)


def __getattr__(name: str):
    """``Schema`` and ``load_schema`` moved to :mod:`memq.benchmark.builder_schema` (Schema as BuilderSchema);
    the old names still resolve here for one release, with a DeprecationWarning."""
    moved = {"Schema": "BuilderSchema", "load_schema": "load_schema"}
    if name not in moved:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import warnings

    from . import builder_schema

    warnings.warn(f"memq.benchmark.sources.{name} moved to memq.benchmark.builder_schema.{moved[name]}",
                  DeprecationWarning, stacklevel=2)
    return getattr(builder_schema, moved[name])
