"""Split a query graph at CVT nodes into MemQ statements (paper section 4.1).

A query's triple patterns are grouped into *units*: a triple between two
non-CVT nodes, a CVT node with all its edges (a *star*), or a UNION block.
Units are visited from the topic entity along the shortest path to the
answer variable, then outwards; each becomes one statement in canonical form,
oriented so that ``?entity1`` is the side already known when it runs:

* a triple or UNION block -> structure ``"1"``;
* a star with two ends -> structure ``"2"`` (entity -> CVT -> entity);
* a star with more ends -> one structure ``"3"`` statement per extra end
  (``?entity1`` known, ``?entity2`` the extra end, ``?entity3`` assigned).

FILTERs become ``"filter"`` statements and ORDER BY/LIMIT an ``"order"``
statement. The language filter and ``?x != topic`` are *boilerplate*: the
reconstruction adds them by rule, so they are not statements.

Queries in GrailQA's form (:mod:`memq.decompose.forms`) have three more kinds:

* a class constraint ``?x ns:type.object.type ns:architecture.building`` ->
  ``"class"`` (``?entity1`` the node; a CVT node's class stays inside its
  structure-2/3 statements, which never end at a CVT). With no topic entity
  the answer's class starts the query: it finds the members of the class;
* ``(MAX|MIN(?y) AS ?x)`` over the query's own pattern -> ``"superlative"``;
* ``COUNT`` of the answer -> ``"count"``.

Their pairwise ``!=`` filter is boilerplate too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from ..errors import DecompositionError
from ..sparql.model import (
    Call,
    Exists,
    Expr,
    Group,
    Iri,
    Literal,
    Query,
    Term,
    Triple,
    Var,
    expr_vars,
    substitute_expr,
    walk_exprs,
)
from ..sparql.serialize import READABLE
from ..types import Statement
from .cvt import CvtOracle, SchemaCvtOracle
from .forms import is_class_triple, is_distinctness, read_form, superlative
from .layout import distances, main_path, place_classes


@dataclass(frozen=True)
class Bound:
    """A statement as it occurs in one query: canonical variable -> query term.

    ``check`` is True when the assigned end is a constant (the step is a
    check: "Find the gender of ?x ... Make sure it is Male").
    """

    statement: Statement
    binding: dict[str, Term]
    check: bool = False


@dataclass
class Decomposition:
    question_id: str
    query: Query
    bounds: list[Bound]
    boilerplate: list[Expr] = field(default_factory=list)
    topic: Term | None = None


@dataclass
class _Unit:
    kind: str  # "triple", "star", "union"
    triples: tuple[Triple, ...] = ()
    alts: tuple[Group, ...] = ()
    ends: tuple[Term, ...] = ()
    cvts: tuple[Term, ...] = ()
    order: int = 0
    classes: tuple[Triple, ...] = ()  # class constraints on a star's CVT nodes


def statement_id(structure: str, sparql: str) -> str:
    return hashlib.sha1(f"{structure}\n{sparql}".encode()).hexdigest()[:12]


def is_language_filter(expr: Expr) -> bool:
    """``!isLiteral(?x) || lang(?x) = '' || langMatches(lang(?x), 'en')``, in any bracketing."""
    ops = {e.op for e in walk_exprs(expr) if isinstance(e, Call)}
    return "isliteral" in ops and "langmatches" in ops and len(expr_vars(expr)) == 1


def _is_exclusion(expr: Expr, answer: Var | None) -> bool:
    return (isinstance(expr, Call) and expr.op == "!=" and len(expr.args) == 2 and expr.args[0] == answer
            and isinstance(expr.args[1], (Var, Iri)))


def flatten_group(group: Group) -> tuple[list[Triple], list[tuple[Group, ...]], list[Expr]]:
    """Main triples, UNION blocks and filters, with single-alternative nested groups merged in."""
    if group.optionals or group.minus or group.subqueries or group.binds or group.values:
        what = ("OPTIONAL" if group.optionals else "MINUS" if group.minus else
                "a subquery with aggregates" if group.subqueries else "BIND" if group.binds else "VALUES")
        raise DecompositionError(f"{what} is outside MemQ's statement language")
    triples, unions, filters = list(group.triples), [], list(group.filters)
    for union in group.unions:
        if len(union) == 1:
            t, u, f = flatten_group(union[0])
            triples += t
            unions += u
            filters += f
        else:
            unions.append(union)
    return triples, unions, filters


def _nodes(t: Triple) -> tuple[Term, Term]:
    return (t.s, t.o)


def _is_constant(node: Term) -> bool:
    return isinstance(node, (Iri, Literal))


class Decomposer:
    """Turns parsed gold queries into bound statements. Cheap to build; reuse it."""

    def __init__(self, cvt: CvtOracle | None = None) -> None:
        self.cvt = cvt or SchemaCvtOracle()

    # -- units -----------------------------------------------------------
    def _units(self, triples: list[Triple], unions: list[tuple[Group, ...]], keep: set[Term]) -> list[_Unit]:
        for t in triples:
            if not isinstance(t.p, Iri):
                raise DecompositionError(f"variable predicate {t.p} is outside MemQ's statement language")
        touching: dict[Term, list[Triple]] = {}
        for t in triples:
            for n in _nodes(t):
                touching.setdefault(n, []).append(t)
        cvt = {n for n, ts in touching.items()
               if n not in keep and not isinstance(n, Literal) and len(ts) >= 2 and self.cvt.is_cvt(n, ts)}
        # CVT components: CVT nodes joined by CVT-CVT triples form one star.
        parent = {n: n for n in cvt}

        def find(n: Term) -> Term:
            while parent[n] != n:
                n = parent[n]
            return n

        for t in triples:
            if t.s in cvt and t.o in cvt:
                parent[find(t.s)] = find(t.o)
        stars: dict[Term, list[Triple]] = {}
        units: list[_Unit] = []
        for i, t in enumerate(triples):
            root = find(t.s) if t.s in cvt else find(t.o) if t.o in cvt else None
            if root is None:
                units.append(_Unit("triple", (t,), ends=(t.s, t.o), order=i))
            else:
                if root not in stars:
                    stars[root] = []
                    units.append(_Unit("star", order=i, cvts=(root,)))
                stars[root].append(t)
        for u in units:
            if u.kind == "star":
                ts = stars[u.cvts[0]]
                members = tuple(dict.fromkeys(n for t in ts for n in _nodes(t) if n in cvt))
                ends = tuple(dict.fromkeys(n for t in ts for n in _nodes(t) if n not in cvt))
                u.triples, u.cvts, u.ends = tuple(ts), members, ends
        for j, union in enumerate(unions):
            ends_per_alt = []
            for alt in union:
                t, u, _ = flatten_group(alt)
                if u:
                    raise DecompositionError("nested UNION inside a UNION alternative is not supported")
                inner = self._units(t, [], keep)
                ends_per_alt.append({n for iu in inner for n in iu.ends if not isinstance(n, Var) or n in keep})
            shared = set.intersection(*ends_per_alt) if ends_per_alt else set()
            ends = tuple(sorted(shared, key=str))
            if not ends:
                raise DecompositionError("UNION alternatives share no node with each other")
            units.append(_Unit("union", alts=union, ends=ends, order=len(triples) + j))
        return units

    # -- public ----------------------------------------------------------
    def decompose(self, query: Query, question_id: str = "", topics: Sequence[str] = ()) -> Decomposition:
        """Bound statements of ``query`` in execution order.

        ``topics`` are Freebase ids of the topic entities (the first one that is
        in the query starts the main path); without them the first entity
        constant of the query does.
        """
        form = read_form(query)
        query = form.query
        if not form.grail and (query.group_by or query.having or any(p.expr is not None for p in query.projection)):
            raise DecompositionError("aggregates (COUNT, GROUP BY, HAVING) are outside MemQ's statement language")
        answer = form.count or query.answer_var
        if answer is None:
            raise DecompositionError("SELECT * has no answer variable")
        where = query.where
        extremes = [superlative(sub, where) for sub in where.subqueries] if form.grail else []
        triples, unions, filters = flatten_group(replace(where, subqueries=()) if form.grail else where)
        classes = [t for t in triples if is_class_triple(t)] if form.grail else []
        triples = [t for t in triples if t not in classes]
        boiler = [f for f in filters if is_language_filter(f) or _is_exclusion(f, answer)
                  or (form.grail and is_distinctness(f))]
        checks = [f for f in filters if f not in boiler]
        # Nodes that must stay statement ends: the answer and whatever filters, orderings and superlatives look at.
        keep: set[Term] = {answer} | {var for _, var in extremes}
        for f in checks:
            keep |= expr_vars_outside(f, triples)
        for k in query.order_by:
            keep |= expr_vars(k.expr)
        union_vars = {n for union in unions for alt in union for t in alt.all_triples() for n in _nodes(t)}
        keep |= {n for t in triples for n in _nodes(t) if n in union_vars}
        units = self._units(triples, unions, keep)
        class_units = _attach_classes(classes, units)
        if not units and not class_units:
            raise DecompositionError("the query has no triple patterns")
        topic = self._topic(units, topics, answer)
        bounds: list[Bound] = []
        start = topic
        if topic is None and class_units:  # no topic entity: start from the members of the answer's class
            first = next((u for u in class_units if u.ends[0] == answer), class_units[0])
            class_units.remove(first)
            start = first.ends[0]
            bounds.append(self._class(first, check=False))
        bounds += self._orient(units, start, answer)
        bounds = place_classes(bounds, [self._class(u, check=True) for u in class_units])
        for f in checks:
            bounds.append(self._filter(f, triples))
        for op, var in extremes:
            bounds.append(_aggregate("superlative", f"{op}(?entity1)", var))
        if query.order_by or query.limit is not None or query.offset is not None:
            bounds.append(self._order(query))
        if form.count is not None:
            bounds.append(_aggregate("count", "COUNT(DISTINCT ?entity1)", form.count))
        return Decomposition(question_id, query, bounds, boiler, topic)

    def _class(self, unit: _Unit, check: bool) -> Bound:
        """A class constraint as a ``"class"`` statement: ``?entity1 ns:type.object.type ns:<class> .``"""
        t = unit.triples[0]
        sparql = READABLE.triple(Triple(Var("entity1"), t.p, t.o))
        statement = Statement(statement_id("class", sparql), "class", sparql, (t.p.local,))
        return Bound(statement, {"?entity1": t.s}, check)

    def _topic(self, units: list[_Unit], topics: Sequence[str], answer: Var) -> Term | None:
        constants = [n for u in units for n in u.ends if isinstance(n, Iri) and n.is_entity]
        for mid in topics:
            for n in constants:
                if n.local == mid:
                    return n
        reachable = distances(units, answer)
        ranked = [n for n in dict.fromkeys(constants) if n in reachable]
        return ranked[0] if ranked else (constants[0] if constants else None)

    def _orient(self, units: list[_Unit], topic: Term | None, answer: Var) -> list[Bound]:
        main = main_path(units, topic, answer)
        reached: set[Term] = {topic} if topic is not None else set()
        order: list[tuple[_Unit, Term, Term | None]] = []
        for unit, source, target in main:
            order.append((unit, source, target))
            reached |= set(unit.ends)
        rest = [u for u in units if all(u is not m for m, _, _ in main)]
        while rest:
            pick = next((u for u in rest if any(e in reached for e in u.ends)), None)
            if pick is None:
                pick = next((u for u in rest if any(_is_constant(e) for e in u.ends)), rest[0])
                source = next((e for e in pick.ends if _is_constant(e)), pick.ends[0])
            else:
                known = [e for e in pick.ends if e in reached]
                source = next((e for e in known if not _is_constant(e)), known[0])
            order.append((pick, source, None))
            reached |= set(pick.ends)
            rest.remove(pick)
        bounds: list[Bound] = []
        for unit, source, target in order:
            bounds.extend(self._statements(unit, source, target, answer))
        return bounds

    def _statements(self, unit: _Unit, source: Term, target: Term | None, answer: Var) -> list[Bound]:
        others = [e for e in unit.ends if e != source]
        if target is None:
            target = next((e for e in others if isinstance(e, Var)), others[0] if others else source)
        if unit.kind == "union":
            if not others:  # {?x r a} UNION {?x r b}: a check on ?x alone
                return [self._bind(unit, {source: "?entity1"}, "1", check=True)]
            extras = [e for e in others if e != target]
            if len(extras) == 1:
                roles = {source: "?entity1", extras[0]: "?entity2", target: "?entity3"}
                return [self._bind(unit, roles, "3", check=_is_constant(target))]
            return [self._bind(unit, {source: "?entity1", target: "?entity2"}, "1", check=_is_constant(target))]
        if unit.kind == "triple" or len(others) <= 1:
            roles = {source: "?entity1", target: "?entity2"}
            structure = "1" if unit.kind != "star" else "2"
            return [self._bind(unit, roles, structure, check=_is_constant(target))]
        out = []
        for extra in others:
            if extra == target:
                continue
            roles = {source: "?entity1", extra: "?entity2", target: "?entity3"}
            out.append(self._bind(unit, roles, "3", check=_is_constant(target)))
        return out

    def _bind(self, unit: _Unit, roles: dict[Term, str], structure: str, check: bool) -> Bound:
        binding: dict[str, Term] = {name: node for node, name in roles.items()}
        rename: dict[Term, Term] = {node: Var(name[1:]) for node, name in roles.items()}
        cvt_names = iter(["cvt"] + [f"cvt{i}" for i in range(2, 50)])

        def canon(n: Term) -> Term:
            if n in rename:
                return rename[n]
            if isinstance(n, Var) or n in unit.cvts:
                name = next(cvt_names)
                rename[n] = Var(name)
                binding["?" + name] = n
                return rename[n]
            return n

        rank = {"?entity1": 0, "?entity2": 2, "?entity3": 3}

        def lines_of(triples: Iterable[Triple]) -> list[str]:
            canon_triples = [Triple(canon(t.s), t.p, canon(t.o)) for t in triples]
            def key(t: Triple) -> tuple[int, str]:
                r = min((rank.get(str(x), 1) for x in (t.s, t.o)), default=1)
                return (r, READABLE.triple(t))
            return [READABLE.triple(t) for t in sorted(canon_triples, key=key)]

        if unit.kind == "union":
            alts = []
            for alt in unit.alts:
                triples, _, filters = flatten_group(alt)
                body = lines_of(triples)
                body += [f"FILTER({READABLE.expr(substitute_expr(f, canon), top=True)})" for f in filters]
                alts.append("{ " + " ".join(body) + " }")
            sparql = " UNION ".join(sorted(alts))
            relations = sorted({t.p.local for alt in unit.alts for t in alt.all_triples() if isinstance(t.p, Iri)})
        else:
            triples = _star_triples(unit, roles)
            sparql = "\n".join(lines_of(triples))
            relations = [t.p.local for t in triples if isinstance(t.p, Iri)]
        statement = Statement(statement_id(structure, sparql), structure, sparql, tuple(relations))
        return Bound(statement, binding, check)

    def _filter(self, expr: Expr, triples: list[Triple]) -> Bound:
        outside = expr_vars_outside(expr, triples)
        rename: dict[Term, Term] = {}
        binding: dict[str, Term] = {}
        counters = {"entity": 0, "value": 0, "sk": 0}

        def canon(n: Term) -> Term:
            if n in rename:
                return rename[n]
            if isinstance(n, Var):
                kind = "entity" if n in outside else "sk"
            elif isinstance(n, Literal) or (isinstance(n, Iri) and n.is_entity):
                kind = "value"
            else:
                return n
            counters[kind] += 1
            i = counters[kind]
            name = {"entity": f"entity{i}", "value": "value" if i == 1 else f"value{i}", "sk": f"sk{i - 1}"}[kind]
            rename[n] = Var(name)
            binding["?" + name] = n
            return rename[n]

        canon_expr = substitute_expr(expr, canon)
        sparql = f"FILTER({READABLE.expr(canon_expr, top=True)})"
        relations = sorted({t.p.local for e in walk_exprs(expr) if isinstance(e, Exists)
                            for t in e.pattern.all_triples() if isinstance(t.p, Iri)})
        return Bound(Statement(statement_id("filter", sparql), "filter", sparql, tuple(relations)), binding)

    def _order(self, query: Query) -> Bound:
        rename: dict[Term, Term] = {}
        binding: dict[str, Term] = {}

        def canon(n: Term) -> Term:
            if isinstance(n, Var):
                if n not in rename:
                    rename[n] = Var(f"entity{len(rename) + 1}")
                    binding["?" + rename[n].name] = n
                return rename[n]
            return n

        from dataclasses import replace

        shape = Query(where=Group(),
                      order_by=tuple(replace(k, expr=substitute_expr(k.expr, canon)) for k in query.order_by),
                      limit=query.limit, offset=query.offset)
        sparql = " ".join(READABLE.modifier_lines(shape))
        return Bound(Statement(statement_id("order", sparql), "order", sparql, ()), binding)


def expr_vars_outside(expr: Expr, triples: Sequence[Triple]) -> set[Var]:
    """Variables of a filter that belong to the query proper (not local to its EXISTS)."""
    direct = {e for e in walk_exprs(expr) if isinstance(e, Var)}
    in_triples = {n for t in triples for n in _nodes(t) if isinstance(n, Var)}
    return direct | (expr_vars(expr) & in_triples)


def _star_triples(unit: _Unit, roles: dict[Term, str]) -> list[Triple]:
    """The star's triples that touch the chosen ends (and CVT-CVT links), and its CVT nodes' classes."""
    cvts = set(unit.cvts)
    return [t for t in unit.triples if all(n in cvts or n in roles for n in _nodes(t))] + list(unit.classes)


def _attach_classes(classes: list[Triple], units: list[_Unit]) -> list[_Unit]:
    """Class constraints on CVT nodes go into their star; the others become ``"class"`` units, returned."""
    out = []
    for i, t in enumerate(classes):
        star = next((u for u in units if u.kind == "star" and t.s in u.cvts), None)
        if star is not None:
            star.classes += (t,)
        else:
            out.append(_Unit("class", (t,), ends=(t.s,), order=i))
    return out


def _aggregate(structure: str, sparql: str, var: Var) -> Bound:
    """A ``"count"`` or ``"superlative"`` statement on ``var``."""
    return Bound(Statement(statement_id(structure, sparql), structure, sparql, ()), {"?entity1": var})
