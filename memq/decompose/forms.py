"""GrailQA's query form, read as the plain query its statements describe.

Every GrailQA gold query has the same frame::

    SELECT (?x0 AS ?value) WHERE {            # or (COUNT(?x0) AS ?value)
      SELECT DISTINCT ?x0 WHERE {
        ?x0 :type.object.type :architecture.building .
        VALUES ?x1 { :m.0abc }                # a topic entity (or a literal constant)
        { SELECT (MAX(?y2) AS ?x2) WHERE { ...the same pattern on ?y... } }   # superlatives
        ?x0 :architecture.building.floors ?x2 .
        FILTER ( ?x0 != ?x1 && ?x0 != ?x2 && ?x1 != ?x2 )
      }
    }

:func:`read_form` turns it into what the decomposer splits, without changing what the query answers:

* the wrapper goes: ``SELECT DISTINCT ?x0`` stays, or ``SELECT (COUNT(DISTINCT ?x0) AS ?value)`` for a count
  (``COUNT`` over ``SELECT DISTINCT`` counts distinct values);
* a one-row ``VALUES ?x1 { c }`` is written in: ``c`` takes the place of ``?x1`` everywhere (a VALUES row joins by
  term equality, as a constant in a triple pattern matches);
* a superlative subquery stays, as a member of the group's ``subqueries``; :func:`superlative` checks that it
  aggregates over the query's own pattern, and :func:`same_pattern` is what the round-trip check compares.

Queries not in this form (WebQSP's, CWQ's) come back unchanged with ``grail`` False; the decomposer reads class
constraints, counts and superlatives only in queries of this form, so the decomposition of the other datasets is
what their memories and planners were built from.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from ..errors import DecompositionError
from ..sparql.model import (
    FB,
    Call,
    Expr,
    Group,
    Iri,
    Literal,
    Projection,
    Query,
    Term,
    Triple,
    Var,
    substitute_expr,
    substitute_group,
    walk_exprs,
)

TYPE = Iri(FB + "type.object.type")
EXTREMES = ("MAX", "MIN")


@dataclass(frozen=True)
class Form:
    """A query as the decomposer reads it.

    ``query``: the plain query (wrapper gone, one-row VALUES written in). ``grail``: it came in GrailQA's form.
    ``count``: the variable whose distinct values the query counts, or None.
    """

    query: Query
    grail: bool = False
    count: Var | None = None


def _wrapped(query: Query) -> Query | None:
    """The inner SELECT of ``SELECT (?x AS ?v) / (COUNT(?x) AS ?v) WHERE { SELECT DISTINCT ?x WHERE {...} }``."""
    where = query.where
    if (len(query.projection) != 1 or where != Group(subqueries=where.subqueries) or len(where.subqueries) != 1
            or query.group_by or query.having or query.order_by or query.limit is not None or query.distinct):
        return None
    inner = where.subqueries[0]
    if len(inner.projection) != 1 or inner.projection[0].expr is not None or not inner.distinct:
        return None
    expr = query.projection[0].expr
    x = inner.projection[0].var
    if expr == x or (isinstance(expr, Call) and expr.op == "COUNT" and expr.args == (x,) and not expr.star):
        return inner
    return None


def read_form(query: Query) -> Form:
    """The plain query of a GrailQA-form query; any other query unchanged."""
    inner = _wrapped(query)
    if inner is None:
        return Form(query)
    if inner.group_by or inner.having or inner.order_by or inner.limit is not None or inner.offset is not None:
        raise DecompositionError("GrailQA-form query with modifiers inside its wrapper")
    where = _lift_subqueries(inner.where)
    where = inline_values(where)
    expr = query.projection[0].expr
    if isinstance(expr, Call):
        counted = inner.projection[0].var
        plain = replace(inner, where=where, distinct=False,
                        projection=(Projection(query.projection[0].var, Call("COUNT", (counted,), distinct=True)),))
        return Form(plain, grail=True, count=counted)
    return Form(replace(inner, where=where), grail=True)


def _lift_subqueries(g: Group) -> Group:
    """``{ { SELECT ... } }`` (a group holding only a subquery) as a member of ``g.subqueries``."""
    lifted, unions = list(g.subqueries), []
    for u in g.unions:
        if len(u) == 1 and u[0] == Group(subqueries=u[0].subqueries):
            lifted.extend(u[0].subqueries)
        else:
            unions.append(u)
    return replace(g, unions=tuple(unions), subqueries=tuple(lifted))


def inline_values(g: Group) -> Group:
    """``g`` with each one-variable, one-row ``VALUES`` written into its triples, filters and UNION blocks;
    each subquery the same way with its own VALUES (its variables are its own)."""
    single = [v for v in g.values if len(v.vars) == 1 and len(v.rows) == 1 and v.rows[0][0] is not None]
    subs = tuple(replace(q, where=inline_values(q.where)) for q in g.subqueries)
    if not single:
        return replace(g, subqueries=subs)
    const: dict[Term, Term] = {v.vars[0]: v.rows[0][0] for v in single}

    def sub(n: Term) -> Term:
        return const.get(n, n)

    rest = replace(g, values=tuple(v for v in g.values if v not in single), subqueries=())
    return replace(_substitute(rest, sub), subqueries=subs)


def _substitute(g: Group, f) -> Group:
    """``g`` with ``f`` applied to every term of its triples, filters and UNION blocks."""
    def tt(t: Triple) -> Triple:
        return Triple(f(t.s), t.p, f(t.o))

    return replace(g, triples=tuple(tt(t) for t in g.triples),
                   unions=tuple(tuple(_substitute(a, f) for a in u) for u in g.unions),
                   filters=tuple(substitute_expr(x, f) for x in g.filters))


def is_class_triple(t: Triple) -> bool:
    """``?x ns:type.object.type ns:domain.type``: a class constraint on a node."""
    return t.p == TYPE and isinstance(t.o, Iri) and not t.o.is_entity and not isinstance(t.s, Literal)


def is_distinctness(expr: Expr) -> bool:
    """GrailQA's ``?x0 != ?x1 && ?x0 != ?x2 && ...``: every node of the query differs from every other."""
    calls = [e for e in walk_exprs(expr) if isinstance(e, Call)]
    return bool(calls) and all(
        c.op == "&&" or (c.op == "!=" and len(c.args) == 2 and all(isinstance(a, (Var, Iri, Literal)) for a in c.args))
        for c in calls)


def superlative(sub: Query, outer: Group) -> tuple[str, Var]:
    """``(MAX|MIN, ?x)`` of ``{ SELECT (MAX(?y) AS ?x) WHERE { P' } }``, where ``P'`` is the ``outer`` pattern
    (the group the subquery sits in, less its subqueries) with its variables renamed; else DecompositionError."""
    if (len(sub.projection) != 1 or sub.group_by or sub.having or sub.order_by or sub.limit is not None
            or sub.where.subqueries):
        raise DecompositionError("a subquery with aggregates is outside MemQ's statement language")
    p = sub.projection[0]
    if not (isinstance(p.expr, Call) and p.expr.op in EXTREMES and len(p.expr.args) == 1
            and isinstance(p.expr.args[0], Var) and not p.expr.distinct):
        raise DecompositionError("a subquery with aggregates is outside MemQ's statement language")
    if not same_pattern(sub.where, replace(outer, subqueries=()), {p.expr.args[0]: p.var}):
        raise DecompositionError("a superlative over a pattern other than the query's own")
    return p.expr.op, p.var


def same_pattern(inner: Group, outer: Group, fixed: dict[Var, Var]) -> bool:
    """Whether renaming ``inner``'s variables (one to one, extending ``fixed``) gives ``outer``'s triples and
    filters exactly (UNION blocks, OPTIONAL and the like are not allowed in either)."""
    for g in (inner, outer):
        if g.unions or g.optionals or g.minus or g.binds or g.values or g.subqueries:
            return False
    if len(set(inner.triples)) != len(set(outer.triples)) or len(inner.filters) != len(outer.filters):
        return False
    todo = sorted(set(inner.triples), key=lambda t: sum(isinstance(x, Var) for x in (t.s, t.o)))
    targets = set(outer.triples)

    def bind(mapping: dict[Var, Var], a: Term, b: Term) -> dict[Var, Var] | None:
        if isinstance(a, Var):
            if a in mapping:
                return mapping if mapping[a] == b else None
            if not isinstance(b, Var) or b in mapping.values():
                return None
            return {**mapping, a: b}
        return mapping if a == b else None

    def search(i: int, mapping: dict[Var, Var]) -> bool:
        if i == len(todo):
            return _filters_equal(inner.filters, outer.filters, mapping)
        t = todo[i]
        for u in targets:
            if u.p != t.p:
                continue
            m = bind(mapping, t.s, u.s)
            m = bind(m, t.o, u.o) if m is not None else None
            if m is not None and search(i + 1, m):
                return True
        return False

    return search(0, dict(fixed))


def _filters_equal(a: Iterable[Expr], b: Iterable[Expr], mapping: dict[Var, Var]) -> bool:
    def sub(n: Term) -> Term:
        return mapping.get(n, n) if isinstance(n, Var) else n

    from ..sparql.serialize import READABLE

    return sorted(READABLE.expr(substitute_expr(x, sub), top=True) for x in a) == sorted(
        READABLE.expr(x, top=True) for x in b)


def superlative_subquery(op: str, var: Var, pattern: Group, suffix: str = "_all") -> Query:
    """``{ SELECT (MAX(?v_all) AS ?v) WHERE { pattern, every ?x renamed ?x_all } }``: the largest (``op``
    ``MAX``) or smallest (``MIN``) value ``var`` takes over ``pattern`` (its triples, UNION blocks and filters),
    apart from the query's own variables. ReconstructionError if ``pattern`` does not hold ``var``."""
    from ..errors import ReconstructionError

    names: dict[Var, Var] = {}

    def sub(n: Term) -> Term:
        if isinstance(n, Var):
            return names.setdefault(n, Var(n.name + suffix))
        return n

    renamed = substitute_group(Group(triples=pattern.triples, unions=pattern.unions, filters=pattern.filters), sub)
    if var not in names:
        raise ReconstructionError(f"superlative on {var}, which the query's pattern does not hold")
    return Query(where=renamed, projection=(Projection(var, Call(op, (names[var],))),))
