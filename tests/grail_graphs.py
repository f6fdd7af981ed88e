"""Small random graphs for GrailQA gold queries, to check that two queries answer alike (pyoxigraph)."""

from __future__ import annotations

import random

import pytest

from memq.decompose.forms import read_form
from memq.sparql import to_standard
from memq.sparql.model import FB, XSD, Iri, Literal, Triple, Var, walk_exprs


def _literal_like(lit: Literal | None, rng: random.Random) -> Literal:
    """A random literal of ``lit``'s type near its value (an integer if there is none)."""
    if lit is None or lit.datatype in (None, XSD + "integer"):
        base = int(lit.value) if lit is not None and lit.value.lstrip("-").isdigit() else 5
        return Literal(str(base + rng.randint(-3, 3)), XSD + "integer")
    if lit.datatype in (XSD + "float", XSD + "double", XSD + "decimal"):
        return Literal(f"{float(lit.value) + rng.randint(-3, 3) * 0.5:.1f}", lit.datatype)
    year = int(lit.value[:4]) + rng.randint(-2, 2) if lit.value[:4].isdigit() else 2000
    return Literal(f"{year:04d}" + lit.value[4:], lit.datatype)


def random_graph(query, rng: random.Random) -> list[Triple]:
    """The query's own pattern planted a few times on a small pool of nodes, plus noise on its predicates.

    Values that filters compare or superlatives aggregate are literals of the filter's type, close to its
    threshold, so comparisons and extremes go both ways."""
    form = read_form(query).query
    where = form.where
    triples = list(where.triples)
    literal_of = {}
    for f in where.filters:
        vals = [e for e in walk_exprs(f) if isinstance(e, Literal)]
        for v in (e for e in walk_exprs(f) if isinstance(e, Var)):
            if vals:
                literal_of[v] = vals[0]
    valued = set(literal_of) | {s.projection[0].var for s in where.subqueries}
    const_lits = [x for t in triples for x in (t.s, t.o) if isinstance(x, Literal)]
    for t in triples:  # a variable in the place of a literal constant elsewhere is valued too
        if isinstance(t.o, Var) and t.o not in literal_of and const_lits and t.p in {u.p for u in triples
                                                                                   if isinstance(u.o, Literal)}:
            literal_of[t.o] = const_lits[0]
    pool = [Iri(FB + f"m.memq_{i}") for i in range(4)]
    entities = sorted({x for t in triples for x in (t.s, t.o) if isinstance(x, Iri) and x.is_entity}, key=str)
    variables = sorted({x for t in triples for x in (t.s, t.o) if isinstance(x, Var)}, key=str)
    out: list[Triple] = []
    for _ in range(rng.randint(1, 4)):
        assign = {v: (_literal_like(literal_of.get(v), rng) if v in valued or v in literal_of
                      else rng.choice(pool + entities)) for v in variables}
        for t in triples:
            if rng.random() < 0.9:
                out.append(Triple(assign.get(t.s, t.s), t.p, assign.get(t.o, t.o)))
    for t in triples:
        for _ in range(2):
            s = rng.choice(pool + entities) if not isinstance(t.s, Literal) else t.s
            o = t.o if isinstance(t.o, Iri) and not t.o.is_entity else (
                _literal_like(literal_of.get(t.o), rng)
                if t.o in valued or t.o in literal_of or isinstance(t.o, Literal)
                else rng.choice(pool + entities))
            out.append(Triple(s, t.p, o))
    return out


def answers(store, query) -> list[str]:
    rows = store.query(to_standard(query))
    return sorted(str(row[0]) for row in rows)


def store(triples):
    pyoxigraph = pytest.importorskip("pyoxigraph")
    store = pyoxigraph.Store()

    def node(x):
        if isinstance(x, Iri):
            return pyoxigraph.NamedNode(x.value)
        return pyoxigraph.Literal(x.value, datatype=pyoxigraph.NamedNode(x.datatype)) if x.datatype else \
            pyoxigraph.Literal(x.value)

    for t in triples:
        if not isinstance(t.s, Literal):
            store.add(pyoxigraph.Quad(node(t.s), node(t.p), node(t.o)))
    return store
