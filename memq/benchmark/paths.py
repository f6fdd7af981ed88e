"""Materialise one solution of a gold query's graph pattern.

:class:`Binder` instantiates a :class:`~memq.benchmark.shape.Variant` for
one answer: the answer variable gets the gold answer (or, for a near-miss
distractor, a fresh entity), every other node variable a real node found in
the graph's real triples (``reuse``) or a fresh synthetic node, and every
literal variable a value found by :mod:`memq.benchmark.values` that makes
the FILTERs come out as wanted.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from memq.sparql.model import Exists, Expr, Iri, Literal, Triple, Var, expr_vars, walk_exprs
from memq.sparql.serialize import STANDARD

from .builder_schema import BuilderSchema
from .eval import XSD_DATETIME, Env, holds
from .graph import BenchmarkGraph, TripleKey, sort_key
from .shape import Shape, Variant
from .sources import is_mid
from .values import (
    TEMPORAL,
    TEXT,
    RelationTypes,
    between,
    candidates,
    constants_of,
    literal_for_answer,
    make_value,
)

SYN = "http://memq.dev/synthetic/"
NAME = "http://rdf.freebase.com/ns/type.object.name"
_YEAR = re.compile(r"(?<![\d-])(1[0-9]{3}|20[0-2][0-9])(?![\d-])")


def synthetic(kind: str, *parts: str) -> Iri:
    digest = hashlib.sha1("\x1f".join(parts).encode("utf-8")).hexdigest()[:16]
    return Iri(f"{SYN}{kind}_{digest}")


def is_synthetic(term) -> bool:
    return isinstance(term, Iri) and term.value.startswith(SYN)


@dataclass
class Attr:
    subject: object  # the bound subject term
    predicate: str
    vars: list[str]
    required: bool
    fresh: bool
    domain: list[tuple[str, object]] = field(default_factory=list)


@dataclass
class Binding:
    """One instantiated solution: its triples and the fresh nodes it made."""

    triples: list[TripleKey]
    fresh: dict[Iri, tuple[str, str]]  # node -> ("cvt" | "ent", label)
    values: dict[str, Iri | Literal]
    replaces: list[TripleKey] = field(default_factory=list)  # unneeded old values to delete first


@dataclass(frozen=True)
class Want:
    """What the FILTERs must do: all hold, or (distractor) filter ``broken`` fails and the rest hold."""

    broken: int | None = None
    extra: Callable[[dict, dict], bool] | None = None  # (binding, {(subject, predicate): value})
    extra_vars: tuple[str, ...] = ()
    extra_constants: tuple = ()


class Binder:
    def __init__(self, graph: BenchmarkGraph, schema: BuilderSchema, types: RelationTypes,
                 swap: Callable[[list[TripleKey], TripleKey], bool] | None = None) -> None:
        self.graph = graph
        self.schema = schema
        self.types = types
        self.swap = swap  # may the synthetic triples ``olds`` (owned by gold queries) become ``new``?
        # also try values between every threshold the gold queries compare a relation with (GrailQA builds:
        # many questions compare one relation of the same entities with different thresholds)
        self.thresholds = False

    # ------------------------------------------------------------------ nodes
    def answer_term(self, shape: Shape, variant: Variant, answer: str) -> Iri | Literal:
        if is_mid(answer):
            return Iri("http://rdf.freebase.com/ns/" + answer)
        if answer.startswith(SYN):  # a count question's synthetic member (memq.benchmark.grail)
            return Iri(answer)
        rel = next((t.p.local for t in variant.triples if t.o == shape.answer), None)
        return literal_for_answer(answer, self.types.kind(rel) if rel else None)

    def bind(self, key: str, shape: Shape, variant: Variant, answer_term, *, reuse: bool, salt: str,
             want: Want = Want(), skip: frozenset[Triple] = frozenset(),
             same_as_answer: frozenset[str] = frozenset(), mutate: bool = True) -> Binding | str:
        """Instantiate ``variant`` with ``answer_term``; a string is the reason it failed.

        ``skip`` leaves triples out; the node variables in ``same_as_answer`` get the
        answer itself (a distractor that violates ``FILTER(?x != ?c)``); without
        ``mutate`` no value already in the graph is replaced (distractors only add).
        """
        triples = [t for t in variant.triples if t not in skip]
        ans = shape.answer.name
        node_vars = sorted({x.name for t in triples for x in (t.s, t.o) if isinstance(x, Var)}
                           - shape.literal_vars - {ans})
        nodes: dict[str, Iri | Literal] = {ans: answer_term}
        for v in same_as_answer:
            nodes[v] = answer_term
        if reuse:
            self._reuse(triples, node_vars, nodes, shape.cvt_vars)
        fresh: dict[Iri, tuple[str, str]] = {}
        for v in node_vars:
            if v not in nodes:
                kind = "cvt" if v in shape.cvt_vars else "ent"
                node = synthetic(kind, key, salt, v, _term_text(answer_term))
                nodes[v] = node
                fresh[node] = (kind, self._label(v, triples))
        if isinstance(answer_term, Iri) and is_synthetic(answer_term):
            fresh[answer_term] = ("ent", self._label(ans, triples))
        attrs = self._attrs(shape, variant, triples, nodes, fresh)
        if isinstance(attrs, str):
            return attrs
        values = self._solve(shape, variant, nodes, attrs, want, mutate)
        if values is None:
            return "no literal values satisfy the FILTERs" if want.broken is None else "filter cannot be violated alone"
        out: list[TripleKey] = []
        for t in triples:
            s, o = _sub(t.s, values), _sub(t.o, values)
            if s is None or o is None:
                return f"unbound term in {t}"
            if isinstance(s, Literal):
                return f"a literal would be the subject of {t.p.local}"
            out.append((s, t.p, o))
        for a in attrs:
            if not a.required and (a.subject, a.predicate) in values["__attr__"]:
                val = values["__attr__"][(a.subject, a.predicate)]
                if val is not None:
                    out.append((a.subject, Iri(a.predicate), val))
        plain = {k: v for k, v in values.items() if k not in ("__attr__", "__replace__")}
        return Binding(out, fresh, plain, values["__replace__"])

    def _reuse(self, triples, node_vars, nodes, cvt_vars) -> None:
        """Bind node variables to nodes the graph already links the way the pattern asks.

        Only real triples and triples some gold query needs count; a variable is
        bound when every pattern edge to an already bound neighbour exists, real
        nodes preferred.
        """
        g = self.graph
        used = set(nodes.values())
        changed = True
        while changed:
            changed = False
            for v in node_vars:
                if v in nodes:
                    continue
                cands: set | None = None
                for t in triples:
                    if t.s == Var(v) and (other := _sub(t.o, nodes)) is not None:
                        found = {n for n in g.po.get((t.p, other), ()) if g.solid((n, t.p, other))}
                    elif t.o == Var(v) and (other := _sub(t.s, nodes)) is not None:
                        found = {n for n in g.sp.get((other, t.p), ()) if g.solid((other, t.p, n))}
                    else:
                        continue
                    found = {n for n in found if isinstance(n, Iri)}
                    cands = found if cands is None else cands & found
                if cands and v in cvt_vars:  # a CVT carries the dates: share only real ones
                    cands = {n for n in cands if not is_synthetic(n)}
                if cands:
                    pick = sorted(cands - used, key=lambda n: (is_synthetic(n), sort_key(n)))
                    if pick:
                        nodes[v] = pick[0]
                        used.add(pick[0])
                        changed = True

    def _label(self, var: str, triples) -> str:
        for t in triples:
            if t.o == Var(var):
                rng = self.schema.range(t.p.local)
                if rng:
                    return rng
        for t in triples:
            if t.s == Var(var):
                dom = self.schema.domains.get(t.p.local)
                if dom:
                    return dom
        return "entity"

    # ------------------------------------------------------------------ literals
    def _attrs(self, shape, variant, triples, nodes, fresh) -> list[Attr] | str:
        attrs: dict[tuple, Attr] = {}
        for t in triples:
            if isinstance(t.o, Var) and t.o.name in shape.literal_vars:
                s = _sub(t.s, nodes)
                if s is None:
                    return f"literal variable ?{t.o.name} hangs off a literal"
                k = (s, t.p.value)
                a = attrs.setdefault(k, Attr(s, t.p.value, [], True, s in fresh))
                a.vars.append(t.o.name)
                a.required = True
        for f in variant.filters:
            for e in walk_exprs(f, into_exists=True):
                if isinstance(e, Exists):
                    for t in e.pattern.triples:
                        s = _sub(t.s, nodes)
                        if s is None or not isinstance(t.p, Iri):
                            return "EXISTS pattern on an unbound subject"
                        k = (s, t.p.value)
                        a = attrs.setdefault(k, Attr(s, t.p.value, [], False, s in fresh))
                        if isinstance(t.o, Var):
                            a.vars.append(t.o.name)
        return list(attrs.values())

    def _domain(self, a: Attr, filters, want: Want, mutate: bool = True) -> list[tuple[str, object]]:
        """The choices for one attribute, preferred first.

        ``fixed``: keep a value the graph already has (a shared node); ``new``: add
        a value; ``absent``: no value (only inside EXISTS); ``replace``: swap
        values that no gold query needs (an unowned real or synthetic triple) for
        a new one; ``swap``: change a synthetic value other gold queries own, when
        :attr:`Binder.swap` says they all still hold with the new one.
        """
        g = self.graph
        existing = g.values(a.subject, a.predicate)
        rel = a.predicate.rsplit("/", 1)[-1]
        kind, dtp = self.types.kind(rel), self.types.datatype(rel)
        rel_filters = [f for f in filters if _mentions(f, a)]
        consts = constants_of(rel_filters) + list(want.extra_constants)
        if kind == TEXT:
            texts = [c.value for f in rel_filters for c in _literals(f) if isinstance(c.value, str)]
            vals = [Literal(x) for x in dict.fromkeys(texts + ["unspecified"])]
        else:
            cands = candidates(kind, consts)
            if self.thresholds:
                cands += [c for c in between(kind, self.types.compared.get(rel, ())) if c not in cands]
            vals = [make_value(kind, c, dtp) for c in self._hinted(a, kind, cands)]
        if existing and not a.fresh:
            dom = [("fixed", v) for v in existing] if a.required else [("fixed*", None)]
            pred = Iri(a.predicate)
            infos = [g.info.get((a.subject, pred, v)) for v in existing]
            if not mutate:
                return dom
            if all(i is not None and not i.owners and not i.distractors for i in infos):
                dom += ([] if a.required else [("replace", None)]) + [("replace", v) for v in vals]
            elif self.swap is not None and all(i is not None and not i.real and not i.distractors for i in infos):
                dom += [("swap", v) for v in vals]  # a synthetic value other queries set: ask them
            return dom
        dom = [("new", v) for v in vals]
        if not a.required:
            dom = dom + [("absent", None)] if a.fresh else [("absent", None)] + dom
        return dom

    def _hinted(self, a: Attr, kind: str, values: list) -> list:
        """Dates of an entity whose name holds a year (``2014 World Series``) fall in that year first."""
        if kind != TEMPORAL or not isinstance(a.subject, Iri):
            return values
        years = {int(m) for n in self.graph.values(a.subject, NAME) for m in _YEAR.findall(n.value)}
        if len(years) != 1:
            return values
        year = years.pop()
        hinted = [v.replace(year=year, day=min(v.day, 28)) for v in values]
        return list(dict.fromkeys(hinted + values))

    def _solve(self, shape, variant, nodes, attrs: list[Attr], want: Want, mutate: bool = True):
        g = self.graph
        filters = list(variant.filters)
        for a in attrs:
            a.domain = self._domain(a, filters, want, mutate)
        var_attr = {v: a for a in attrs for v in a.vars}
        deps = [_filter_attrs(f, attrs, var_attr) for f in filters]
        assignment: dict[int, tuple[str, object]] = {}

        def lookup(s, p):
            for i, a in enumerate(attrs):
                if a.subject == s and a.predicate == p and i in assignment:
                    tag, val = assignment[i]
                    if tag == "fixed*":
                        return g.values(s, p)
                    return [] if val is None else [val]
            return g.values(s, p)

        def env() -> Env:
            b = {k: v for k, v in nodes.items()}
            for i, a in enumerate(attrs):
                if i in assignment and a.required:
                    for v in a.vars:
                        b[v] = assignment[i][1]
            return Env(b, lookup)

        def ok(indices) -> bool:
            e = env()
            for fi in indices:
                res = holds(filters[fi], e)
                if res != (fi != want.broken):
                    return False
            return True

        order = list(range(len(attrs)))
        ready = {k: [fi for fi, d in enumerate(deps) if d is not None and max(d, default=-1) == k] for k in order}
        pre = [fi for fi, d in enumerate(deps) if d is not None and not d]
        if any(d is None for d in deps):
            return None
        if not ok(pre):
            return None

        def search(k: int) -> bool:
            if k == len(order):
                if want.extra is not None:
                    values = {(a.subject, a.predicate): assignment[i][1] for i, a in enumerate(attrs)}
                    return want.extra(env().binding, values)
                return True
            a = attrs[k]
            for choice in a.domain:
                assignment[k] = choice
                if not ok(ready[k]):
                    continue
                if choice[0] == "swap":
                    olds = [(a.subject, Iri(a.predicate), v) for v in g.values(a.subject, a.predicate)]
                    if not self.swap(olds, (a.subject, Iri(a.predicate), choice[1])):
                        continue
                if search(k + 1):
                    return True
            del assignment[k]
            return False

        if not search(0):
            return None
        values = dict(env().binding)
        changed = ("new", "replace", "swap")
        values["__attr__"] = {(a.subject, a.predicate): (assignment[i][1] if assignment[i][0] in changed else None)
                              for i, a in enumerate(attrs)}
        values["__replace__"] = [(a.subject, Iri(a.predicate), v) for i, a in enumerate(attrs)
                                 if assignment[i][0] in ("replace", "swap") for v in g.values(a.subject, a.predicate)]
        return values


def _literals(e):
    for x in walk_exprs(e, into_exists=True):
        if isinstance(x, Literal):
            yield x


def _mentions(f: Expr, a: Attr) -> bool:
    names = {v.name for v in expr_vars(f)}
    return bool(names & set(a.vars))


def _filter_attrs(f: Expr, attrs: list[Attr], var_attr: dict[str, Attr]) -> set[int] | None:
    """Indices of the attributes a filter depends on (None: an unbound variable)."""
    out = set()
    for v in expr_vars(f):
        a = var_attr.get(v.name)
        if a is not None:
            out.add(attrs.index(a))
    return out


def instantiate(term, binding):
    """``term`` with its variable replaced from ``binding``, literals as the standard query sends them."""
    return _sub(term, binding)


def _sub(term, binding):
    if isinstance(term, Var):
        return binding.get(term.name)
    if isinstance(term, Literal) and term.datatype == XSD_DATETIME:
        return as_sent(term)
    return term


def as_sent(lit: Literal) -> Literal:
    """A dateTime constant as :func:`memq.sparql.to_standard` writes it (date-only values get ``T00:00:00``).

    The graph must hold the very literal the standard query asks for.
    """
    text = STANDARD.literal(lit)
    return Literal(text[1:text.rindex('"^^')], lit.datatype)


def _term_text(term) -> str:
    if isinstance(term, Iri):
        return term.value
    return f"{term.value}|{term.datatype}|{term.lang}"
