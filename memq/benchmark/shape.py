"""What a gold query asks for, in the terms the benchmark builder needs.

:func:`analyse` turns a parsed :class:`~memq.sparql.model.Query` into a
:class:`Shape`: the answer variable, the basic graph patterns (one
:class:`Variant` per choice of UNION alternatives), which variables hold
literal values, which are CVT nodes, the topic entity and the main path from
the topic to the answer (the constraints themselves are those of
:func:`memq.kg.check.constraints`).

A query outside what the builder can materialise gets ``Shape.unsupported``
set to a reason instead (GROUP BY, aggregates, OPTIONAL, ...).
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field

from memq.sparql.model import Call, Exists, Expr, Group, Iri, Literal, Query, Triple, Var, expr_vars

from .builder_schema import BuilderSchema

AttrKey = tuple[object, str]
"""An attribute: (subject: Var or Iri, predicate IRI)."""


@dataclass(frozen=True)
class Variant:
    """One way through the UNIONs: a basic graph pattern and its FILTERs."""

    triples: tuple[Triple, ...]
    filters: tuple[Expr, ...]


@dataclass
class Shape:
    query: Query
    answer: Var | None = None
    variants: list[Variant] = field(default_factory=list)
    literal_vars: set[str] = field(default_factory=set)
    cvt_vars: set[str] = field(default_factory=set)
    topic: Iri | None = None
    path_triples: frozenset[Triple] = frozenset()
    unsupported: str | None = None

    @property
    def ordered(self) -> bool:
        return bool(self.query.order_by)


def _is_lang_filter(e: Expr) -> bool:
    ops = {c.op for c in _calls(e)}
    return "lang" in ops and ("isliteral" in ops or "langmatches" in ops)


def _is_not_topic_filter(e: Expr) -> bool:
    return (isinstance(e, Call) and e.op == "!=" and len(e.args) == 2
            and all(isinstance(a, (Var, Iri)) for a in e.args))


def trivial_filter(e: Expr) -> bool:
    """The language filter and ``?x != topic``: present in almost every gold query, never a constraint."""
    return _is_lang_filter(e) or _is_not_topic_filter(e)


def _calls(e):
    if isinstance(e, Call):
        yield e
        for a in e.args:
            yield from _calls(a)


def value_vars(exprs) -> set[str]:
    """Variables used as values: cast, compared with a literal or another value, str(), year(), arithmetic."""
    out: set[str] = set()

    def valued(e) -> bool:
        return isinstance(e, (Literal, Call)) and not (isinstance(e, Call) and e.op in ("lang",))

    def visit(e, ctx: bool):
        if isinstance(e, Var):
            if ctx:
                out.add(e.name)
        elif isinstance(e, Exists):
            for f in e.pattern.filters:
                visit(f, False)
        elif isinstance(e, Call):
            op = e.op
            if op in ("lang", "isliteral", "isiri", "isuri", "bound", "langmatches", "sameterm"):
                return
            if op in ("=", "!="):
                a, b = e.args
                visit(a, ctx or valued(b) and not isinstance(b, Iri))
                visit(b, ctx or valued(a) and not isinstance(a, Iri))
                return
            if op in ("||", "&&", "!"):
                for a in e.args:
                    visit(a, False)
                return
            for a in e.args:
                visit(a, True)

    for e in exprs:
        visit(e, False)
    return out


def _expand(g: Group) -> list[Variant]:
    """Every combination of UNION alternatives of ``g`` as a flat pattern."""
    alts_per_union = [[v for alt in union for v in _expand(alt)] for union in g.unions]
    out = []
    for combo in itertools.product(*alts_per_union) if alts_per_union else [()]:
        triples = list(g.triples)
        filters = list(g.filters)
        for v in combo:
            triples.extend(v.triples)
            filters.extend(v.filters)
        out.append(Variant(tuple(triples), tuple(filters)))
    return out


def _unsupported(q: Query) -> str | None:
    g = q.where
    if q.group_by or q.having:
        return "GROUP BY / HAVING (aggregate query)"
    if any(p.expr is not None for p in q.projection):
        return "projected expression or aggregate"
    if not q.projection:
        return "SELECT * (no answer column)"

    def walk(grp: Group) -> str | None:
        if grp.optionals:
            return "OPTIONAL"
        if grp.subqueries:
            return "subquery"
        if grp.minus:
            return "MINUS"
        if grp.binds:
            return "BIND"
        if grp.values:
            return "VALUES"
        for t in grp.triples:
            if not isinstance(t.p, Iri):
                return "variable predicate"
            if isinstance(t.s, Literal):
                return "literal subject"
        for union in grp.unions:
            for alt in union:
                r = walk(alt)
                if r:
                    return r
        return None

    return walk(g)


def analyse(q: Query, schema: BuilderSchema) -> Shape:
    shape = Shape(q)
    shape.unsupported = _unsupported(q)
    if shape.unsupported:
        return shape
    shape.answer = q.answer_var
    shape.variants = _expand(q.where)
    if len(shape.variants) > 8:
        shape.unsupported = f"{len(shape.variants)} UNION combinations"
        return shape
    exprs = [f for v in shape.variants for f in v.filters] + [k.expr for k in q.order_by]
    lit = value_vars(exprs)
    for v in shape.variants:
        for t in v.triples:
            if isinstance(t.o, Var) and schema.is_literal_relation(t.p.local):
                lit.add(t.o.name)
            elif isinstance(t.o, Var) and t.p.local == "type.object.name":
                lit.add(t.o.name)
            if isinstance(t.o, Var) and (schema.cvt_range(t.p.local)):
                shape.cvt_vars.add(t.o.name)
            if isinstance(t.s, Var) and schema.cvt_domain(t.p.local):
                shape.cvt_vars.add(t.s.name)
    for k in q.order_by:
        lit |= {v.name for v in expr_vars(k.expr)}
    lit.discard(shape.answer.name)
    shape.literal_vars = lit
    shape.cvt_vars -= lit
    subjects = {t.s.name for v in shape.variants for t in v.triples if isinstance(t.s, Var)}
    bad = lit & subjects
    if bad:
        shape.unsupported = f"variable used both as a value and as a node: {sorted(bad)}"
        return shape
    shape.topic = _topic(q, shape)
    shape.path_triples = _main_path(shape.variants[0].triples, shape.topic, shape.answer)
    return shape


def _topic(q: Query, shape: Shape) -> Iri | None:
    bgp = shape.variants[0].triples
    consts = []
    for t in bgp:
        for x in (t.s, t.o):
            if isinstance(x, Iri) and x.is_entity and x not in consts:
                consts.append(x)
    for f in q.where.filters:
        if _is_not_topic_filter(f):
            for a in f.args:
                if isinstance(a, Iri) and a in consts:
                    return a
    if not consts:
        return None
    dist = _distances(bgp, shape.answer)
    return max(consts, key=lambda c: (dist.get(c, -1), -consts.index(c)))


def _adjacency(bgp):
    adj: dict[object, list[tuple[object, Triple]]] = {}
    for t in bgp:
        adj.setdefault(t.s, []).append((t.o, t))
        adj.setdefault(t.o, []).append((t.s, t))
    return adj


def _distances(bgp, start) -> dict:
    adj = _adjacency(bgp)
    dist = {start: 0}
    todo = deque([start])
    while todo:
        n = todo.popleft()
        for m, _ in adj.get(n, ()):
            if m not in dist and not isinstance(m, Literal):
                dist[m] = dist[n] + 1
                todo.append(m)
    return dist


def _main_path(bgp, topic, answer) -> frozenset[Triple]:
    if topic is None or answer is None:
        return frozenset()
    adj = _adjacency(bgp)
    prev: dict[object, tuple[object, Triple] | None] = {topic: None}
    todo = deque([topic])
    while todo:
        n = todo.popleft()
        if n == answer:
            break
        for m, t in adj.get(n, ()):
            if m not in prev and not isinstance(m, Literal) and (isinstance(m, Var) or m == answer):
                prev[m] = (n, t)
                todo.append(m)
    if answer not in prev:
        return frozenset()
    out = set()
    node = answer
    while prev[node] is not None:
        node, t = prev[node]
        out.add(t)
    return frozenset(out)
