"""The query-graph model: what a parsed SPARQL SELECT query is made of.

Terms are frozen and hashable. IRIs are always stored in full
(``http://rdf.freebase.com/ns/people.person.gender``); the ``ns:`` form is only
a way of writing them (see :mod:`memq.sparql.serialize`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

FB = "http://rdf.freebase.com/ns/"
XSD = "http://www.w3.org/2001/XMLSchema#"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"


@dataclass(frozen=True, order=True)
class Var:
    """A variable, ``name`` without the leading ``?``."""

    name: str

    def __str__(self) -> str:
        return f"?{self.name}"


@dataclass(frozen=True, order=True)
class Iri:
    """An IRI, always in full."""

    value: str

    @property
    def is_freebase(self) -> bool:
        return self.value.startswith(FB)

    @property
    def local(self) -> str:
        """The Freebase id (``m.06w2sn5``, ``people.person.gender``) or the full IRI."""
        return self.value[len(FB):] if self.is_freebase else self.value

    @property
    def is_entity(self) -> bool:
        """A Freebase machine id (``m.``) or graph id (``g.``)."""
        return self.is_freebase and self.local[:2] in ("m.", "g.")


@dataclass(frozen=True, order=True)
class Literal:
    """A literal: its lexical form and either a datatype IRI or a language tag."""

    value: str
    datatype: str | None = None
    lang: str | None = None


Term = Var | Iri | Literal


@dataclass(frozen=True)
class Triple:
    s: Term
    p: Term
    o: Term

    def terms(self) -> tuple[Term, Term, Term]:
        return (self.s, self.p, self.o)


@dataclass(frozen=True)
class Call:
    """An operator or function application.

    ``op`` is an operator (``||`` ``&&`` ``!`` ``=`` ``!=`` ``<`` ``<=`` ``>``
    ``>=`` ``+`` ``-`` ``*`` ``/``, unary minus is ``neg``), a built-in in lower
    case (``lang``, ``langmatches``, ``isliteral``, ``str``, ``year`` ...), an
    aggregate in upper case (``COUNT``, ``MAX``, ...) or, for a cast or other
    IRI function, the full IRI (``http://www.w3.org/2001/XMLSchema#dateTime``).
    ``distinct`` applies to aggregates; ``star`` is ``COUNT(*)``.
    """

    op: str
    args: tuple[Expr, ...] = ()
    distinct: bool = False
    star: bool = False


@dataclass(frozen=True)
class Exists:
    """``EXISTS { ... }`` or, with ``negated``, ``NOT EXISTS { ... }``."""

    pattern: Group
    negated: bool = False


Expr = Var | Iri | Literal | Call | Exists


@dataclass(frozen=True)
class Bind:
    expr: Expr
    var: Var


@dataclass(frozen=True)
class Values:
    vars: tuple[Var, ...]
    rows: tuple[tuple[Term | None, ...], ...]


@dataclass(frozen=True)
class Group:
    """A group graph pattern ``{ ... }``.

    ``triples`` are the basic graph pattern; each entry of ``unions`` is one
    ``{A} UNION {B} UNION ...`` block (its alternatives); ``filters`` apply to
    the whole group.
    """

    triples: tuple[Triple, ...] = ()
    unions: tuple[tuple[Group, ...], ...] = ()
    filters: tuple[Expr, ...] = ()
    optionals: tuple[Group, ...] = ()
    minus: tuple[Group, ...] = ()
    subqueries: tuple[Query, ...] = ()
    binds: tuple[Bind, ...] = ()
    values: tuple[Values, ...] = ()

    def all_triples(self) -> list[Triple]:
        """Every triple of the group, its UNION alternatives, OPTIONALs and subqueries."""
        out = list(self.triples)
        for union in self.unions:
            for alt in union:
                out.extend(alt.all_triples())
        for opt in self.optionals:
            out.extend(opt.all_triples())
        for sub in self.subqueries:
            out.extend(sub.where.all_triples())
        return out


@dataclass(frozen=True)
class Projection:
    """One projected column: a plain variable, or ``(expr AS ?var)``."""

    var: Var
    expr: Expr | None = None


@dataclass(frozen=True)
class OrderKey:
    expr: Expr
    descending: bool = False


@dataclass(frozen=True)
class Query:
    """A SELECT query. An empty ``projection`` means ``SELECT *``."""

    where: Group
    projection: tuple[Projection, ...] = ()
    distinct: bool = False
    reduced: bool = False
    group_by: tuple[Expr, ...] = ()
    having: tuple[Expr, ...] = ()
    order_by: tuple[OrderKey, ...] = ()
    limit: int | None = None
    offset: int | None = None
    prefixes: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    @property
    def answer_var(self) -> Var | None:
        """The first projected variable (the answer column of a gold query)."""
        return self.projection[0].var if self.projection else None


MIRRORED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}
"""Each comparison with its operands swapped: ``a < b`` is ``b > a``."""


def depth(node: Query | Group | Expr) -> int:
    """How deeply ``node`` nests: one level for each query, group, expression call, EXISTS and operand on the
    way down (triples and VALUES rows are not counted). Iterative, so a tree too deep to recurse on is measured
    too; a chain ``a || b || c`` is left-nested, so it counts one level per operator."""
    stack: list[tuple[object, int]] = [(node, 1)]
    deepest = 0
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(item, Call):
            children: tuple = item.args
        elif isinstance(item, Exists):
            children = (item.pattern,)
        elif isinstance(item, Group):
            children = (*item.filters, *item.optionals, *item.minus, *item.subqueries,
                        *(b.expr for b in item.binds), *(g for alts in item.unions for g in alts))
        elif isinstance(item, Query):
            children = (item.where, *(p.expr for p in item.projection if p.expr is not None), *item.group_by,
                        *item.having, *(k.expr for k in item.order_by))
        else:
            continue
        stack.extend((child, level + 1) for child in children)
    return deepest


def walk_exprs(expr: Expr, into_exists: bool = False):
    """Yield ``expr`` and every sub-expression; with ``into_exists``, also those of EXISTS patterns' filters."""
    yield expr
    if isinstance(expr, Call):
        for arg in expr.args:
            yield from walk_exprs(arg, into_exists)
    elif into_exists and isinstance(expr, Exists):
        for f in expr.pattern.filters:
            yield from walk_exprs(f, into_exists)


def expr_vars(expr: Expr) -> set[Var]:
    """Variables an expression mentions, EXISTS patterns included."""
    out: set[Var] = set()
    for e in walk_exprs(expr):
        if isinstance(e, Var):
            out.add(e)
        elif isinstance(e, Exists):
            for t in e.pattern.all_triples():
                out.update(x for x in t.terms() if isinstance(x, Var))
            for f in e.pattern.filters:
                out |= expr_vars(f)
    return out


def substitute_expr(expr: Expr, f) -> Expr:
    """``expr`` with ``f`` applied to each of its terms (variables, IRIs, literals), inside EXISTS too."""
    if isinstance(expr, (Var, Iri, Literal)):
        return f(expr)
    if isinstance(expr, Call):
        return replace(expr, args=tuple(substitute_expr(a, f) for a in expr.args))
    if isinstance(expr, Exists):
        return Exists(substitute_group(expr.pattern, f), expr.negated)
    return expr


def substitute_group(g: Group, f) -> Group:
    """``g`` with ``f`` applied to the variables and entities of its triples, UNIONs and filters."""
    def tt(t: Triple) -> Triple:
        return Triple(f(t.s) if not isinstance(t.s, Iri) or t.s.is_entity else t.s, t.p,
                      f(t.o) if not isinstance(t.o, Iri) or t.o.is_entity else t.o)

    return replace(g, triples=tuple(tt(t) for t in g.triples),
                   unions=tuple(tuple(substitute_group(a, f) for a in u) for u in g.unions),
                   filters=tuple(substitute_expr(x, f) for x in g.filters))
