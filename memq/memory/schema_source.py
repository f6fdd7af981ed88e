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
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from memq.describe.schema import FreebaseSchema, schema
from memq.describe.template import pred
from memq.recall import NON_COMMONS_DATA
from memq.sparql.model import FB, Iri, Triple, Var
from memq.sparql.serialize import READABLE
from memq.types import Statement

NON_COMMONS = ("type.", "common.", "dataworld.", "kg.", "topic_server.", "kp_lw.", "imdb.", "nytimes.")
_RANK = {"entity1": 0, "cvt": 1, "entity2": 2, "entity3": 3}


@dataclass(frozen=True)
class SchemaSourceConfig:
    include_base: bool = False
    structure3: bool = True
    filters: bool = True


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


class _SchemaStatements:
    def __init__(self, fb: FreebaseSchema, config: SchemaSourceConfig) -> None:
        self.fb = fb
        self.config = config

    def usable(self, rel: str) -> bool:
        if rel.startswith(NON_COMMONS):
            return False
        return self.config.include_base or not rel.startswith(NON_COMMONS_DATA)

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
        rev = self.fb.reverse(role)
        if rev and self.fb.domain(rev) and not self.fb.is_cvt(self.fb.domain(rev)):
            return Triple(e1, _rel(rev), cvt)
        return Triple(cvt, _rel(role), e1)

    def structure2_3(self) -> tuple[list[Statement], list[Statement]]:
        cvt, e2, e3 = Var("cvt"), Var("entity2"), Var("entity3")
        s2, s3 = [], []
        for _, rs in sorted(self.roles().items()):
            entity_roles = [r for r in rs if not self.fb.is_literal(self.fb.range(r))]
            for a in entity_roles:
                first = self._known(a)
                for b in rs:
                    if a != b or pred(first) != a:
                        s2.append(_make("2", [first, Triple(cvt, _rel(b), e2)]))
                    if not self.config.structure3 or a == b:
                        continue
                    for c in rs:
                        if c not in (a, b):
                            s3.append(_make("3", [first, Triple(cvt, _rel(b), e2), Triple(cvt, _rel(c), e3)]))
        return s2, s3

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


def schema_statements(config: SchemaSourceConfig = SchemaSourceConfig(),
                      fb: FreebaseSchema | None = None) -> list[Statement]:
    """Every schema statement (structures 1, 2, 3 and time filters), deduplicated by id, in a stable order."""
    maker = _SchemaStatements(fb or schema(), config)
    s2, s3 = maker.structure2_3()
    out: dict[str, Statement] = {}
    filters = maker.time_filters() if config.filters else []
    for s in maker.structure1() + s2 + s3 + filters:
        out.setdefault(s.id, s)
    return list(out.values())
