"""Put bound statements back together into one query, and check round trips.

Assembly is the inverse of :mod:`memq.decompose.split`: every statement's
canonical fragment is parsed, its canonical variables are replaced with the
terms it was bound to, and the pieces are joined in order. The round-trip
check compares the result with the original query: the same triple patterns,
UNION blocks, filters, ordering and limits, the same projection (a count), and
superlative subqueries over the query's own pattern (GrailQA's form, read as
:func:`memq.decompose.forms.read_form` reads it).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from ..errors import DecompositionError, ReconstructionError
from ..sparql.model import (
    Call,
    Expr,
    Group,
    Iri,
    OrderKey,
    Projection,
    Query,
    Term,
    Triple,
    Var,
    substitute_expr,
    substitute_group,
)
from ..sparql.parser import parse_query
from ..sparql.serialize import READABLE
from ..types import Statement
from .forms import superlative, superlative_subquery
from .split import Bound, Decomposition, flatten_group

AGGREGATES = ("count", "superlative")
"""Statement kinds whose fragment is an aggregate of ``?entity1`` (``COUNT(DISTINCT ?entity1)``, ``MAX(?entity1)``)."""


@lru_cache(maxsize=65536)
def fragment(statement_sparql: str, structure: str) -> Query:
    """The statement's canonical fragment as a (partial) query model."""
    if structure == "order":
        return parse_query(f"SELECT * WHERE {{ }} {statement_sparql}")
    if structure in AGGREGATES:
        return parse_query(f"SELECT ({statement_sparql} AS ?value) WHERE {{ }}")
    return parse_query(f"SELECT * WHERE {{ {statement_sparql} }}")


def instantiate(statement: Statement, binding: dict[str, Term]) -> Query:
    """The statement's fragment with canonical variables replaced as ``binding`` says."""
    def sub(n: Term) -> Term:
        if isinstance(n, Var):
            return binding.get("?" + n.name, n)
        return n

    frag = fragment(statement.sparql, statement.structure)
    try:
        where = substitute_group(frag.where, sub)
    except Exception as exc:  # pragma: no cover - defensive: fragments are memq's own text
        raise ReconstructionError(f"cannot instantiate statement {statement.id}: {exc}") from exc
    order = tuple(replace(k, expr=substitute_expr(k.expr, sub)) for k in frag.order_by)
    projection = tuple(replace(p, expr=substitute_expr(p.expr, sub)) if p.expr is not None else p
                       for p in frag.projection)
    return replace(frag, where=where, order_by=order, projection=projection)


def assemble(bounds: list[Bound], template: Query, boilerplate: list[Expr] = ()) -> Query:
    """Join instantiated statements into one query shaped like ``template`` (its plain projected variables,
    DISTINCT). A ``"count"`` statement makes the projection ``(COUNT(DISTINCT ?x) AS ?value)``; each
    ``"superlative"`` statement adds ``{ SELECT (MAX(?x_all) AS ?x) WHERE { the pattern, renamed } }``."""
    triples: list[Triple] = []
    unions: list = []
    filters: list[Expr] = list(boilerplate)
    order: tuple[OrderKey, ...] = ()
    limit = offset = None
    count: Expr | None = None
    extremes: list[Call] = []
    for b in bounds:
        part = instantiate(b.statement, b.binding)
        if b.statement.structure == "count":
            count = part.projection[0].expr
            continue
        if b.statement.structure == "superlative":
            extremes.append(part.projection[0].expr)
            continue
        for t in part.where.triples:
            if t not in triples:
                triples.append(t)
        unions.extend(u for u in part.where.unions if u not in unions)
        filters.extend(f for f in part.where.filters if f not in filters)
        if b.statement.structure == "order":
            order, limit, offset = part.order_by, part.limit, part.offset
    where = Group(triples=tuple(triples), unions=tuple(unions), filters=tuple(filters))
    where = replace(where, subqueries=tuple(superlative_subquery(c.op, c.args[0], where) for c in extremes))
    if count is not None:
        projection = (Projection(template.answer_var or Var("value"), count),)
    else:
        projection = tuple(p for p in template.projection if p.expr is None)
    return replace(template, where=where, projection=projection, distinct=template.distinct and count is None,
                   order_by=order, limit=limit, offset=offset, group_by=(), having=())


def shape(query: Query) -> dict:
    """What a round trip must preserve, in comparable form."""
    triples, unions, filters = flatten_group(replace(query.where, subqueries=()))

    def alt_key(g: Group) -> frozenset:
        t, u, f = flatten_group(g)
        return frozenset([READABLE.triple(x) for x in t] + [READABLE.expr(x, top=True) for x in f])

    return {
        "triples": frozenset(READABLE.triple(t) for t in triples),
        "unions": frozenset(frozenset(alt_key(a) for a in u) for u in unions),
        "filters": frozenset(READABLE.expr(f, top=True) for f in filters),
        "order": tuple(READABLE.modifier_lines(replace(query, group_by=(), having=()))),
        "answer": query.answer_var,
        "projection": tuple(str(p.var) if p.expr is None else f"{READABLE.expr(p.expr, top=True)} AS {p.var}"
                            for p in query.projection),
        "superlatives": frozenset(_subquery_key(s, query.where) for s in query.where.subqueries),
    }


def _subquery_key(sub: Query, where: Group) -> str:
    """A superlative subquery as ``MAX -> ?x`` when it aggregates over ``where``'s own pattern, else its text."""
    try:
        op, var = superlative(sub, where)
    except DecompositionError:
        return " ".join(READABLE.select_lines(sub))
    return f"{op} -> {var}"


def roundtrip_diff(d: Decomposition) -> str | None:
    """None if the bound statements re-assemble into the original query, else what differs."""
    rebuilt = assemble(d.bounds, d.query, d.boilerplate)
    a, b = shape(d.query), shape(rebuilt)
    for key in a:
        if a[key] != b[key]:
            if isinstance(a[key], frozenset):
                missing = sorted(map(str, a[key] - b[key]))[:2]
                extra = sorted(map(str, b[key] - a[key]))[:2]
                return f"{key} differ: missing {missing}, extra {extra}"
            return f"{key} differ: {a[key]} vs {b[key]}"
    return None


def entity_of(term: Term) -> str | None:
    return term.local if isinstance(term, Iri) and term.is_entity else None
