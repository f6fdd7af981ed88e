"""Schema-true distractors: every node the gold queries touch gets the relations its types carry in Freebase.

Real Freebase gives an entity dozens of relations; a graph built from the gold
paths alone gives it a handful, and a wrong plan step then still finds the gold
relation because little else is there. This step makes the neighbourhood of
the gold queries as dense as Freebase:

* **Schema fill.** A node's types are read off the relations around it (the
  domain of a relation out of it, the range of one into it, in the graph and in
  the gold queries). Each type's relations in the Freebase schema become
  candidates, near misses first (a relation whose range is of the same family,
  by the schema's subclass links, as that of a relation the node has:
  ``people.person.nationality`` beside ``people.person.place_of_birth``),
  then by how often Freebase uses them. A relation the node already has in that
  direction is never added again. Each new edge goes to a fresh synthetic node
  of the relation's range (named ``Synthetic <type> <hash>``), a synthetic CVT
  node with one role filler, or an invented literal of the range's kind.
* **Sibling CVTs.** A CVT node reached from an entity gets a sibling of the
  same type from the same entity, with other role fillers and shifted dates and
  numbers: another marriage, another government position, another performance.

Every edge group is a distractor (id ``dense|...``): the repair that follows
(:func:`memq.benchmark.repair.verify`) removes each one that adds an answer to
a gold query, before any other distractor, so the gold answers stay exact.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
from collections import Counter, defaultdict
from functools import lru_cache

from memq.datasets import data_path
from memq.sparql.model import FB, Iri, Literal

from .builder_schema import LITERAL_RANGES, BuilderSchema
from .eval import FLOAT_RE, INT_RE
from .paths import SYN, synthetic
from .sources import NAME, is_fb15k_cvt, is_mid
from .state import BuildState, synthetic_name, triple_sort
from .values import FLOAT, INTEGER, TEMPORAL, TEXT, make_value, shift, to_python, value_kind

DENSE = "dense"
# fill up to this many distinct relations (in and out) per role; a CVT node gets at most CVT_EXTRA new ones
TARGET = {"topic": 32, "entity": 12}
CVT_EXTRA = 4
# domains that are not Freebase commons, or are bookkeeping rather than facts
_SKIP_DOMAINS = ("base.", "user.", "freebase.", "type.", "common.", "kg.", "dataworld.", "m.", "g.", "key.",
                 "pipeline.", "topic_server.", "imdb.", "authority.", "source.", "wikipedia.")
_VALUE_KINDS = {"type.datetime": TEMPORAL, "type.int": INTEGER, "type.float": FLOAT, "type.text": TEXT,
                "type.rawstring": TEXT}


class Roles:
    """The Freebase schema by type: the relations out of a type (its domain) and into it (its range)."""

    def __init__(self, schema: BuilderSchema) -> None:
        self.schema = schema
        self.freq = relation_freq()
        self.out: dict[str, list[str]] = defaultdict(list)
        self.into: dict[str, list[str]] = defaultdict(list)
        for rel in sorted(schema.domains):
            dom, rng = schema.domains[rel], schema.ranges.get(rel)
            if rng is None or rel.startswith(_SKIP_DOMAINS) or dom.startswith(_SKIP_DOMAINS):
                continue
            if rng in LITERAL_RANGES and rng not in _VALUE_KINDS:
                continue
            self.out[dom].append(rel)
            if rng not in LITERAL_RANGES:
                self.into[rng].append(rel)

    def rank(self, rel: str) -> tuple:
        return (-self.freq.get(rel, 0), rel)


@lru_cache(maxsize=1)
def supertypes() -> dict[str, tuple[str, ...]]:
    """type -> the Freebase types it is a subclass of (``sports.pro_athlete`` -> ``people.person``, ...)."""
    out: dict[str, set[str]] = defaultdict(set)
    with gzip.open(data_path("freebase_schema", "fb_types.gz"), "rt", encoding="utf-8") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) >= 3 and parts[1] == "meta.subclassOf" and not parts[2].startswith(_SKIP_DOMAINS):
                out[parts[0]].add(parts[2])
    return {t: tuple(sorted(sup)) for t, sup in out.items()}


@lru_cache(maxsize=1)
def relation_freq() -> dict[str, int]:
    with gzip.open(data_path("freebase_schema", "relation_freq.json.gz"), "rt", encoding="utf-8") as fh:
        return json.load(fh)


def _family(type_id: str | None) -> set[str]:
    """A type and its supertypes: a country and a city town are both locations."""
    if not type_id:
        return set()
    return {type_id, *supertypes().get(type_id, ())}


def _plain_number(term: Literal) -> tuple[str, float] | None:
    """An untyped literal that reads as a number (``"1200"``, ``"-3.5"``): its kind and value; else None."""
    if term.datatype is not None or term.lang:
        return None
    if INT_RE.match(term.value):
        return INTEGER, int(term.value)
    if FLOAT_RE.match(term.value):
        return FLOAT, float(term.value)
    return None


def _digest(*parts: str) -> int:
    return int(hashlib.sha1("\x1f".join(parts).encode("utf-8")).hexdigest()[:8], 16)


def touched_nodes(state: BuildState) -> dict[Iri, str]:
    """Every node a materialised gold query needs, and every topic entity: node -> role (topic, cvt, entity)."""
    schema = state.schema
    roles: dict[Iri, str] = {}
    topics: set[Iri] = set()
    for item in state.items:
        topics.update(Iri(FB + m) for m, _ in item.parse.topic_entities if is_mid(m))
    for item in state.ok_items():
        for s, p, o in item.owned:
            if p.value == NAME:
                continue
            if schema.cvt_domain(p.local):
                roles[s] = "cvt"
            if isinstance(o, Iri) and schema.cvt_range(p.local):
                roles[o] = "cvt"
            for node in (s, o):
                if isinstance(node, Iri):
                    roles.setdefault(node, "entity")
    for node in topics:
        roles[node] = "topic"
    return roles


def node_types(state: BuildState, node: Iri, cvt: bool, query_votes: Counter) -> list[str]:
    """The node's types, most attested first: domains of its out-relations, ranges of its in-relations,
    each followed by its supertypes in the schema."""
    schema = state.schema
    votes = Counter(query_votes)
    for s, p, _ in state.graph.around(node):
        t = schema.domains.get(p.local) if s == node else schema.ranges.get(p.local)
        if t:
            votes[t] += 1
    keep = [t for t, _ in sorted(votes.items(), key=lambda kv: (-kv[1], kv[0]))
            if not t.startswith(_SKIP_DOMAINS) and t not in LITERAL_RANGES and (t in schema.cvt_types) == cvt]
    if cvt:
        return keep[:1]
    out: list[str] = []
    for t in keep[:4]:  # and what they are subclasses of: a pro athlete is a person
        for u in (t, *supertypes().get(t, ())):
            if u not in out:
                out.append(u)
    return out[:8]


def _query_votes(state: BuildState) -> dict[Iri, Counter]:
    """Type votes from the gold queries' constant subjects and objects (a topic may have no edge yet)."""
    schema = state.schema
    votes: dict[Iri, Counter] = defaultdict(Counter)
    for item in state.items:
        if item.query is None:
            continue
        for t in item.query.where.all_triples():
            if not isinstance(t.p, Iri):
                continue
            rel = t.p.local
            if isinstance(t.s, Iri) and t.s.is_entity and schema.domains.get(rel):
                votes[t.s][schema.domains[rel]] += 1
            if isinstance(t.o, Iri) and t.o.is_entity and schema.ranges.get(rel):
                votes[t.o][schema.ranges[rel]] += 1
    return votes


class Densifier:
    """Adds the schema fill and the sibling CVTs as ``dense|...`` distractors."""

    def __init__(self, state: BuildState) -> None:
        self.state = state
        self.schema = state.schema
        self.roles = Roles(state.schema)
        self.made: Counter = Counter()

    def run(self) -> None:
        touched = touched_nodes(self.state)
        votes = _query_votes(self.state)
        for node in self.state.bar(sorted(touched, key=lambda n: n.value), "density"):
            role = touched[node]
            if role == "cvt":
                self.sibling(node)
            self.fill(node, role, votes.get(node, Counter()))
        self.state.stats["dense_groups"] = dict(sorted(self.made.items()))

    # ------------------------------------------------------------------ schema fill
    def candidates(self, node: Iri, types: list[str], out: set[str], into: set[str]) -> list[tuple[str, str]]:
        """(direction, relation) pairs the node's types carry and it lacks: near misses first, then by use."""
        ranges = set().union(*(_family(self.schema.ranges.get(r)) for r in out))
        domains = set().union(*(_family(self.schema.domains.get(r)) for r in into))
        seen: set[tuple[str, str]] = set()
        ranked = []
        for t in types:
            for rel in self.roles.out.get(t, ()):
                if rel not in out and ("out", rel) not in seen:
                    seen.add(("out", rel))
                    near = bool(_family(self.schema.ranges.get(rel)) & ranges)
                    ranked.append((not near, self.roles.rank(rel), "out", rel))
            for rel in self.roles.into.get(t, ()):
                if rel not in into and ("in", rel) not in seen:
                    seen.add(("in", rel))
                    near = bool(_family(self.schema.domains.get(rel)) & domains)
                    ranked.append((not near, self.roles.rank(rel), "in", rel))
        ranked.sort()
        return [(d, r) for _, _, d, r in ranked]

    def fill(self, node: Iri, role: str, votes: Counter) -> None:
        cvt = role == "cvt"
        out, into = self.state.graph.relations(node)
        types = node_types(self.state, node, cvt, votes)
        if not types:
            return
        have = len(out | into)
        room = CVT_EXTRA if cvt else max(0, TARGET[role] - have)
        for direction, rel in self.candidates(node, types, out, into)[:room]:
            if cvt and direction == "in":
                continue
            did = f"{DENSE}|{node.value}|{direction}|{rel}"
            keys = self.edge(node, direction, rel)
            if keys:
                self._commit(did, keys, "fill")

    def edge(self, node: Iri, direction: str, rel: str) -> list:
        """The triples of one new edge: the edge, and the name or role filler of its fresh end."""
        r = Iri(FB + rel)
        if direction == "out":
            rng = self.schema.ranges.get(rel)
            if rng in _VALUE_KINDS:
                return [(node, r, self.value(_VALUE_KINDS[rng], node.value, rel))]
            other = self.fresh(rng, node.value, rel)
            return [(node, r, other[0][0])] + other
        dom = self.schema.domains.get(rel)
        other = self.fresh(dom, node.value, "in", rel)
        return [(other[0][0], r, node)] + other

    def fresh(self, type_id: str | None, *salt: str) -> list:
        """A fresh synthetic node of ``type_id``: its name, or for a CVT type one role filler.

        The first triple's subject is the node itself.
        """
        if type_id in self.schema.cvt_types:
            cvt = synthetic("cvt", DENSE, *salt)
            for rel in self.roles.out.get(type_id, ()):
                rng = self.schema.ranges.get(rel)
                if rng and rng not in LITERAL_RANGES and rng not in self.schema.cvt_types:
                    ent = synthetic("ent", DENSE, *salt, rel)
                    return [(cvt, Iri(FB + rel), ent), (ent, Iri(NAME), self.name(ent, rng))]
            return [(cvt, Iri(FB + "type.object.type"), Iri(FB + type_id))]
        ent = synthetic("ent", DENSE, *salt)
        return [(ent, Iri(NAME), self.name(ent, type_id or ""))]

    @staticmethod
    def name(node: Iri, type_id: str) -> Literal:
        return Literal(synthetic_name(node, type_id), lang="en")

    @staticmethod
    def value(kind: str, *salt: str) -> Literal:
        """An invented literal: a date between 1900 and 2014, a number, or a neutral text."""
        h = _digest(*salt)
        if kind == TEMPORAL:
            return make_value(TEMPORAL, dt.datetime(1900 + h % 115, 1 + h % 12, 1 + h % 28), None)
        if kind == INTEGER:
            return make_value(INTEGER, 1 + h % 5000, None)
        if kind == FLOAT:
            return make_value(FLOAT, (h % 100000) / 100, None)
        return Literal(f"Synthetic text {h % 16**6:06x}")

    # ------------------------------------------------------------------ sibling CVTs
    def sibling(self, cvt: Iri) -> None:
        """Another CVT of the same type from the same entity, with other role fillers."""
        around = sorted(self.state.graph.around(cvt), key=triple_sort)
        anchors = [(s, p) for s, p, o in around if o == cvt and s != cvt and not self._is_cvt(s)]
        if not anchors:
            return
        anchor, via = anchors[0]
        twin = synthetic("cvt", DENSE, "sibling", cvt.value)
        keys = [(anchor, via, twin)]
        for s, p, o in around:
            if p.value == NAME or (s, p) == (anchor, via):
                continue
            if s == cvt:  # an out-edge: the anchor stays, other fillers are new
                keys.append((twin, p, o if o == anchor else self._other(o, p, cvt)))
            elif not self._is_cvt(s):
                filler = synthetic("ent", DENSE, "sibling", cvt.value, p.local, s.value)
                keys += [(filler, p, twin),
                         (filler, Iri(NAME), self.name(filler, self.schema.domains.get(p.local) or ""))]
        if len(keys) > 1:
            self._commit(f"{DENSE}|{cvt.value}|sibling", keys, "sibling")

    def _other(self, term, p: Iri, cvt: Iri):
        """Another value of ``term``'s kind: a shifted date or number, a fresh named entity."""
        if isinstance(term, Literal):
            kind = value_kind(term)
            steps = 2 + _digest(cvt.value, p.value) % 5
            if kind in (TEMPORAL, INTEGER, FLOAT):
                return make_value(kind, shift(kind, to_python(term)[1], steps), term.datatype)
            plain = _plain_number(term)
            if plain is not None:  # an untyped "1200": another number, untyped too (a cast must not fail)
                kind, x = plain
                return Literal(make_value(kind, shift(kind, x, steps), None).value)
            range_kind = _VALUE_KINDS.get(self.schema.ranges.get(p.local))
            if range_kind in (TEMPORAL, INTEGER, FLOAT):
                return self.value(range_kind, cvt.value, p.value)
            return Literal(f"Synthetic text {_digest(cvt.value, p.value) % 16**6:06x}", term.datatype, term.lang)
        return synthetic("ent", DENSE, "sibling", cvt.value, p.local)

    def _is_cvt(self, node) -> bool:
        if not isinstance(node, Iri):
            return False
        if node.value.startswith(SYN + "cvt_") or is_fb15k_cvt(node):
            return True
        return any(self.schema.cvt_domain(p.local) for s, p, _ in self.state.graph.around(node) if s == node)

    # ------------------------------------------------------------------ bookkeeping
    def _commit(self, did: str, keys: list, kind: str) -> None:
        graph = self.state.graph
        # names for fresh sibling fillers that got none above
        named = {s for s, p, _ in keys if p.value == NAME}
        for _, p, o in list(keys):
            if isinstance(o, Iri) and o.value.startswith(SYN + "ent_") and o not in named \
                    and not graph.values(o, NAME):
                keys.append((o, Iri(NAME), self.name(o, self.schema.ranges.get(p.local) or "")))
                named.add(o)
        tagged = set()
        for key in keys:
            graph.add(key, distractor=did)
            tagged.add(key)
        self.state.distractors[did] = tagged
        self.made[kind] += 1


def add_density(state: BuildState) -> None:
    """The schema fill and the sibling CVTs around every node the gold queries touch (see the module)."""
    Densifier(state).run()
