"""Statements from the Freebase schema alone, no gold queries.

The MemQ paper builds its memory from gold queries and names "model the whole
Freebase into a memory" as future work (Limitations). This source does that
from the bundled schema (``data/freebase_schema``):

* structure 1: every relation with a known range, in both directions
  (``?entity1 ns:r ?entity2 .`` and ``?entity2 ns:r ?entity1 .``), relations
  into and out of CVT types included: a gold query whose CVT node carries a
  filter keeps that node, so its two hops are two single triples
  (``?entity1 ns:sports.pro_athlete.teams ?entity2 .``);
* structure 2: for every CVT type (``cvt_types.derived.txt``), every ordered
  pair of its roles (a, b) where a's range is an entity type:
  ``?entity1 ns:rev(a) ?cvt . ?cvt ns:b ?entity2 .`` (``?cvt ns:a ?entity1 .``
  when a has no reverse property); a == b only through a reverse property
  (``people.person.sibling_s`` / ``people.sibling_relationship.sibling``);
* structure 3: every entity-typed role a, with every other role b and a
  third role c: ``... ?cvt ns:b ?entity2 . ?cvt ns:c ?entity3 .``;
* filter: for every relation into ``type.datetime``, WebQSP's two temporal
  checks (``FILTER(NOT EXISTS {?e r ?sk0} || EXISTS {?e r ?sk1 .
  FILTER(xsd:dateTime(?sk1) <= ?value)})`` and the same with ``>=``), made by
  decomposing a one-line query, so their text and id are the decomposer's own.

A role of a CVT type is a relation whose domain is that type and whose range
is not a CVT type. By default only Freebase's commons domains are used; base./
user./freebase./type./common. and a few other non-commons prefixes are left
out (``include_base=True`` keeps base., user. and freebase., where relations
such as ``freebase.linguistic_hint.subject_form``, a people's demonym, live).
Statements are written in the decomposer's canonical form (same line order,
same ids), so a schema statement and a gold statement of the same shape get
the same id.

GrailQA's gold queries give every node its class (``?x ns:type.object.type ns:architecture.building``), and its
decomposition keeps a CVT node's class inside the structure-2/3 statement (:mod:`memq.decompose.split`).
``classes=True`` writes statements of that form: each CVT statement with its CVT's class triple, and a ``class``
statement (``?entity1 ns:type.object.type ns:T .``) for every entity or CVT type a usable relation starts or ends
at. ``domains`` keeps only the relations (and types) of those domains; :func:`grailqa_domains` lists the domains of
GrailQA's ontology (``domain_dict`` in ``data/freebase_schema``), and ``keep`` the non-commons items it lists
(:func:`grailqa_listed`: ``common.image.creation_date``, ``common.topic.subjects``), which a GrailQA bank keeps.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property

from memq.describe.schema import FreebaseSchema, schema
from memq.describe.template import pred
from memq.recall import NON_COMMONS_DATA
from memq.sparql.model import FB, Iri, Triple, Var
from memq.sparql.serialize import READABLE
from memq.types import Statement

NON_COMMONS = ("type.", "common.", "dataworld.", "kg.", "topic_server.", "kp_lw.", "imdb.", "nytimes.")
_RANK = {"entity1": 0, "cvt": 1, "entity2": 2, "entity3": 3}
TYPE = "type.object.type"


@dataclass(frozen=True)
class SchemaSourceConfig:
    include_base: bool = False
    structure3: bool = True
    filters: bool = True
    classes: bool = False  # GrailQA's form: class statements, and CVT statements with their CVT's class
    domains: tuple[str, ...] | None = None  # only these domains (``film``, ``base.schemastaging``); None: all
    # structure 2: each hop also written through the reverse property, where the schema has one (GrailQA's
    # queries take either direction; WebQSP's take the forward one)
    both_directions: bool = False
    # structures 2 and 3 as WebQSP and CWQ also write them: the answer reached through its role's reverse property
    # (``?cvt ns:a ?entity1 . ?entity2 ns:rev(b) ?cvt .``), and a CVT entered through a relation of an entity type
    # that no role of the CVT mirrors (``?entity1 ns:book.magazine.place_of_publication ?cvt .``)
    answer_reverse: bool = True
    entity_entries: bool = True
    # relations and types of the non-commons prefixes kept all the same (in ``domains``): GrailQA's ontology lists
    # common.image.creation_date and common.topic.subjects in its domains (:func:`grailqa_listed`)
    keep: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.domains is not None and not self.domains:
            raise ValueError("SchemaSourceConfig.domains is empty: give at least one domain, or None for all")


def _domain_dict() -> dict[str, list[str]]:
    """GrailQA's ontology by domain: ``data/freebase_schema/domain_dict.gz`` (domain -> its relations and types)."""
    import gzip
    import json

    from memq.datasets import data_path

    with gzip.open(data_path("freebase_schema", "domain_dict.gz"), "rt", encoding="utf-8") as fh:
        return json.load(fh)


def grailqa_domains() -> tuple[str, ...]:
    """The domains of GrailQA's ontology (the keys of ``data/freebase_schema/domain_dict.gz``), sorted."""
    return tuple(sorted(_domain_dict()))


def grailqa_listed() -> tuple[str, ...]:
    """The relations and types of the non-commons prefixes (``common.``, ``dataworld.``) that GrailQA's ontology
    lists in its domains, the schema's own (``type.``) aside, sorted: ``common.image.creation_date``, ``common.topic``,
    ... GrailQA's train queries use 6 of them (dev: 2)."""
    listed = {item for items in _domain_dict().values() for item in items}
    return tuple(sorted(i for i in listed if i.startswith(NON_COMMONS) and not i.startswith("type.")))


def _statement_id(structure: str, sparql: str) -> str:
    from memq.decompose import statement_id

    return statement_id(structure, sparql)


def _make(structure: str, triples: list[Triple]) -> Statement:
    """A statement in the decomposer's canonical layout: lines sorted by (variable rank, text)."""
    def key(t: Triple) -> tuple[int, str]:
        r = min((_RANK.get(x.name, 1) for x in (t.s, t.o) if isinstance(x, Var)), default=1)
        return (r, READABLE.triple(t))

    ordered = sorted(triples, key=key)
    sparql = "\n".join(READABLE.triple(t) for t in ordered)
    return Statement(_statement_id(structure, sparql), structure, sparql, tuple(pred(t) for t in triples))


def _rel(r: str) -> Iri:
    return Iri(FB + r)


def ontology_types() -> tuple[str, ...]:
    """Every type the bundled ontology lists (``data/freebase_schema/fb_types.gz``: ``type meta.subclassOf
    supertype``), sorted. It has types that no relation starts or ends at (``music.bassist``,
    ``measurement_unit.common_dimension``), which GrailQA's queries still name as classes."""
    import gzip

    from memq.datasets import data_path

    with gzip.open(data_path("freebase_schema", "fb_types.gz"), "rt", encoding="utf-8") as fh:
        return tuple(sorted({p[0] for p in (line.split() for line in fh) if len(p) >= 3 and p[1] == "meta.subclassOf"}))


class _SchemaStatements:
    def __init__(self, fb: FreebaseSchema, config: SchemaSourceConfig, types: tuple[str, ...] = ()) -> None:
        self.fb = fb
        self.config = config
        self.types = types  # the ontology's types besides those its relations start or end at

    def usable(self, rel: str) -> bool:
        if self.non_commons(rel):
            return False
        if self.config.domains is not None and not self.in_domains(rel.rpartition(".")[0]):
            return False
        return self.config.include_base or not rel.startswith(NON_COMMONS_DATA)

    def non_commons(self, item: str) -> bool:
        """``item`` (a relation or type) is of a non-commons prefix (``type.``, ``common.``, ...) and not kept."""
        return item.startswith(NON_COMMONS) and item not in self.config.keep

    def in_domains(self, type_id: str) -> bool:
        """``type_id`` (``film.film``, ``base.x.y``) is of one of ``config.domains`` (all when None)."""
        domains = self.config.domains
        return domains is None or any(type_id.startswith(d + ".") for d in domains)

    def cvt_class(self, cvt_type: str) -> list[Triple]:
        """``?cvt ns:type.object.type ns:<cvt_type> .`` when statements carry classes, else nothing."""
        return [Triple(Var("cvt"), _rel(TYPE), _rel(cvt_type))] if self.config.classes else []

    def class_statements(self) -> list[Statement]:
        """A ``class`` statement for every entity or CVT type that a usable relation starts or ends at, and for
        every type the ontology lists (``types``) in the configured domains."""
        if not self.config.classes:
            return []
        types = {t for t in self.types if not self.non_commons(t) and self.in_domains(t)
                 and (self.config.include_base or not t.startswith(NON_COMMONS_DATA))}
        for rel in self.fb.relations:
            if self.usable(rel) and self.fb.range(rel):
                types.update(t for t in (self.fb.domain(rel), self.fb.range(rel))
                             if not self.fb.is_literal(t) and not self.non_commons(t) and self.in_domains(t))
        return [_make("class", [Triple(Var("entity1"), _rel(TYPE), _rel(t))]) for t in sorted(types)]

    def structure1(self) -> list[Statement]:
        e1, e2 = Var("entity1"), Var("entity2")
        out = []
        for rel in sorted(self.fb.relations):
            if not self.usable(rel):
                continue
            if not self.fb.range(rel):
                continue
            out.append(_make("1", [Triple(e1, _rel(rel), e2)]))
            out.append(_make("1", [Triple(e2, _rel(rel), e1)]))
        return out

    def roles(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = defaultdict(list)
        for rel in sorted(self.fb.relations):
            dom, rng = self.fb.domain(rel), self.fb.range(rel)
            if self.usable(rel) and self.fb.is_cvt(dom) and rng and not self.fb.is_cvt(rng):
                out[dom].append(rel)
        return out

    def _known(self, role: str) -> Triple:
        cvt, e1 = Var("cvt"), Var("entity1")
        rev = self._reverse(role)
        return Triple(e1, _rel(rev), cvt) if rev else Triple(cvt, _rel(role), e1)

    def _reverse(self, role: str) -> str | None:
        """The reverse property of a CVT role, from the entity side, if the schema has one."""
        rev = self.fb.reverse(role)
        return rev if rev and self.fb.domain(rev) and not self.fb.is_cvt(self.fb.domain(rev)) else None

    def _hops(self, role: str, end: Var) -> list[Triple]:
        """The triple between ``?cvt`` and ``end`` through ``role``; with ``both_directions``, also through its
        reverse property."""
        cvt = Var("cvt")
        out = [Triple(cvt, _rel(role), end)]
        rev = self._reverse(role) if self.config.both_directions else None
        return out + [Triple(end, _rel(rev), cvt)] if rev else out

    def entries(self, cvt_type: str, roles: list[str]) -> list[tuple[Triple, str | None]]:
        """How a statement enters a CVT of ``cvt_type`` from ``?entity1``, each with the role it stands for (None
        for a relation that no role mirrors): every entity-typed role, through its reverse property where the
        schema has one; with ``entity_entries``, every usable relation of an entity type whose range is the CVT
        type."""
        out = [(self._known(a), a) for a in roles if not self.fb.is_literal(self.fb.range(a))]
        if self.config.entity_entries:
            seen = {pred(t) for t, _ in out}
            for rel in self.into_cvt.get(cvt_type, ()):
                if rel not in seen:
                    out.append((Triple(Var("entity1"), _rel(rel), Var("cvt")), None))
        return out

    @cached_property
    def into_cvt(self) -> dict[str, list[str]]:
        """CVT type -> the usable relations from an entity type into it, sorted."""
        into: dict[str, list[str]] = defaultdict(list)
        for rel in sorted(self.fb.relations):
            dom, rng = self.fb.domain(rel), self.fb.range(rel)
            if self.usable(rel) and rng and self.fb.is_cvt(rng) and not self.fb.is_cvt(dom):
                into[rng].append(rel)
        return into

    def structure2_3(self) -> tuple[list[Statement], list[Statement]]:
        cvt, e1, e2, e3 = Var("cvt"), Var("entity1"), Var("entity2"), Var("entity3")
        s2, s3 = [], []
        for cvt_type, rs in sorted(self.roles().items()):
            typed = self.cvt_class(cvt_type)
            for first, a in self.entries(cvt_type, rs):
                # a role repeats only where the statement enters through its reverse property (two spouses of one
                # marriage, two siblings of one sibling relationship)
                repeat = a is None or pred(first) != a
                firsts = self._hops(a, e1) if a and self.config.both_directions else [first]
                for b in rs:
                    for one in firsts:
                        for two in self._hops(b, e2):
                            if a != b or pred(one) != pred(two):
                                s2.append(_make("2", [one, two, *typed]))
                    if not self.config.structure3 or (a == b and not repeat):
                        continue
                    for c in rs:
                        if c != b and (c != a or repeat) and not (a == b == c):
                            s3.append(_make("3", [first, Triple(cvt, _rel(b), e2), Triple(cvt, _rel(c), e3),
                                                  *typed]))
            if self.config.answer_reverse:
                self._answer_reverse(cvt_type, rs, typed, s2, s3)
        return s2, s3

    def _answer_reverse(self, cvt_type: str, rs: list[str], typed: list[Triple], s2: list, s3: list) -> None:
        """The answer through its role's reverse property, the known entity through the CVT's own role:
        ``?cvt ns:a ?entity1 . ?entity2 ns:rev(b) ?cvt .`` and ``?cvt ns:a ?entity1 . ?cvt ns:b ?entity2 .
        ?entity3 ns:rev(c) ?cvt .``."""
        cvt, e1, e2, e3 = Var("cvt"), Var("entity1"), Var("entity2"), Var("entity3")
        for a in rs:
            for b in rs:
                rev_b = self._reverse(b)
                if rev_b and b != a:
                    s2.append(_make("2", [Triple(cvt, _rel(a), e1), Triple(e2, _rel(rev_b), cvt), *typed]))
                if not self.config.structure3 or b == a:
                    continue
                for c in rs:
                    rev_c = self._reverse(c)
                    if rev_c and c not in (a, b):
                        s3.append(_make("3", [Triple(cvt, _rel(a), e1), Triple(cvt, _rel(b), e2),
                                              Triple(e3, _rel(rev_c), cvt), *typed]))

    def time_filters(self) -> list[Statement]:
        from memq.decompose import decompose_query
        from memq.sparql import parse_query

        out = []
        for rel in sorted(self.fb.relations):
            if not self.usable(rel) or self.fb.range(rel) != "type.datetime":
                continue
            for op in ("<=", ">="):
                query = (f"PREFIX ns: <{FB}>\nSELECT DISTINCT ?x WHERE {{ ns:m.0 ns:{rel} ?x .\n"
                         f"FILTER(NOT EXISTS {{?x ns:{rel} ?sk0}} || EXISTS {{?x ns:{rel} ?sk1 . "
                         f'FILTER(xsd:datetime(?sk1) {op} "2015-08-10"^^xsd:dateTime) }}) }}')
                d = decompose_query(parse_query(query), "", ["m.0"])
                out.extend(b.statement for b in d.bounds if b.statement.structure == "filter")
        return out


def schema_statements(config: SchemaSourceConfig = SchemaSourceConfig(), fb: FreebaseSchema | None = None,
                      types: tuple[str, ...] | None = None) -> list[Statement]:
    """Every schema statement (structures 1, 2, 3, time filters and, with ``classes``, class statements),
    deduplicated by id, in a stable order. ``types``: the ontology's type list for class statements; by default
    the bundled one (:func:`ontology_types`) with the bundled schema, none with a given ``fb``."""
    if types is None:
        types = ontology_types() if fb is None and config.classes else ()
    maker = _SchemaStatements(fb or schema(), config, types)
    s2, s3 = maker.structure2_3()
    out: dict[str, Statement] = {}
    filters = maker.time_filters() if config.filters else []
    for s in maker.structure1() + s2 + s3 + filters + maker.class_statements():
        out.setdefault(s.id, s)
    return list(out.values())
