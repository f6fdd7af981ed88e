"""The metrics memq reports, defined once (see README "How memq scores").

* **Hits@1**: 1 when the FIRST answer of memq's deterministically ordered
  answer list is a gold answer, else 0. Not "any answer is gold".
* **F1**: per question, precision/recall/F1 of the answer set against the gold
  set, the best over the question's annotated parses; averaged over ALL
  questions, a failure or exception scoring 0. Empty prediction and empty gold
  score 1 (nothing to find, nothing found); empty prediction with non-empty
  gold scores 0.
* **EHR** (MemQ Eq. 6): the share of the gold query's edges present in the
  reconstructed query. An edge is (relation, subject, object) with variables
  anonymised, constants kept, and a relation and its schema reverse identified
  (``film.actor.film`` from A = ``film.performance.actor`` to A). A variable
  fixed by ``FILTER(?v = const)`` counts as that constant, and so does one
  fixed by its text, ``FILTER(str(?v) = "22")`` (WebQSP's idiom for numbers
  Freebase keeps as text), or by a disjunction of such tests that all name one
  variable and one lexical value (``str(?v) = "22" || ?v = 22``), or by a
  ``VALUES ?v { const }`` of one value (GrailQA's gold queries).
* **GED** (MemQ Table 2): graph edit distance between the two query graphs
  (nodes labelled by their constant or ``var``, edges by relation), exact via
  networkx with a time cap; unit costs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from ..decompose.split import flatten_group
from ..sparql.model import Call, Exists, Iri, Literal, Query, Term, Var


def normalise_answer(value: str) -> str:
    """The comparable key of an answer: ``memq.kg.check.answer_key`` (ids, dates, numbers, strings)."""
    from ..kg.check import answer_key

    return answer_key(value.strip())


def _match(a: str, b: str) -> bool:
    from ..kg.check import answer_keys_match

    return answer_keys_match(a, b)


def hits_at_1(predicted: Sequence[str], gold: Iterable[str]) -> float:
    if not predicted:
        return 0.0
    first = normalise_answer(predicted[0])
    return 1.0 if any(_match(first, normalise_answer(g)) for g in gold) else 0.0


def prf(predicted: Iterable[str], gold: Iterable[str]) -> tuple[float, float, float]:
    """Precision, recall, F1. A date answer matches a gold date it extends (gold ``2005``, answer
    ``2005-01-01``), the rule ``memq kg check`` uses."""
    p = {normalise_answer(x) for x in predicted}
    g = {normalise_answer(x) for x in gold}
    if not p and not g:
        return 1.0, 1.0, 1.0
    if not p or not g:
        return 0.0, 0.0, 0.0
    hit_p = sum(1 for x in p if any(_match(x, y) for y in g))
    hit_g = sum(1 for y in g if any(_match(x, y) for x in p))
    if hit_p == 0:
        return 0.0, 0.0, 0.0
    precision, recall = hit_p / len(p), hit_g / len(g)
    return precision, recall, 2 * precision * recall / (precision + recall)


def best_over_parses(predicted: Sequence[str], golds: Sequence[Iterable[str]]) -> tuple[float, float]:
    """(Hits@1, F1), each the best over the question's parses."""
    if not golds:
        return 0.0, 0.0
    golds = [list(g) for g in golds]
    return max(hits_at_1(predicted, g) for g in golds), max(prf(predicted, g)[2] for g in golds)


def mean(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0


# -- structure ---------------------------------------------------------------------------

def _reverse_map():
    from ..schema import freebase_schema

    return freebase_schema().reverse


def _node(term: Term, fixed: dict[Term, Term]) -> str:
    term = fixed.get(term, term)
    if isinstance(term, Var):
        return "var"
    if isinstance(term, Iri):
        return term.local
    if isinstance(term, Literal):
        return f'"{term.value}"'
    return str(term)


def _pin(expr) -> tuple[Var, Iri | Literal] | None:
    """(?v, const) when ``expr`` holds only for ?v equal to const: ``?v = c``, ``str(?v) = c``, or an ``||``
    of such tests naming one variable and one lexical value (case aside), a test of ?v's name included
    (``EXISTS { ?v ns:type.object.name ?n FILTER(lcase(str(?n)) = "c") }``, memq.reconstruct.filters)."""
    if isinstance(expr, Exists):
        return _name_pin(expr)
    if not isinstance(expr, Call) or len(expr.args) != 2:
        return None
    if expr.op == "||":
        pins = [_pin(a) for a in expr.args]
        if None in pins:
            return None
        (var, const), (var2, const2) = pins
        same = var == var2 and _lexical(const).lower() == _lexical(const2).lower()
        return (var, const) if same else None
    if expr.op != "=":
        return None
    a, b = expr.args
    if isinstance(a, (Iri, Literal)):
        a, b = b, a
    if isinstance(a, Call) and a.op == "str" and len(a.args) == 1:
        a = a.args[0]
    return (a, b) if isinstance(a, Var) and isinstance(b, (Iri, Literal)) else None


def _name_pin(expr: Exists) -> tuple[Var, Literal] | None:
    """(?v, "c") for ``EXISTS { ?v ns:type.object.name ?n FILTER(lcase(str(?n)) = "c") }``."""
    pattern = expr.pattern
    if expr.negated or len(pattern.triples) != 1 or len(pattern.filters) != 1 or pattern.unions:
        return None
    [t], [f] = pattern.triples, pattern.filters
    if not (isinstance(t.s, Var) and isinstance(t.p, Iri) and t.p.local == "type.object.name"):
        return None
    if not (isinstance(f, Call) and f.op == "=" and f.args[0] == Call("lcase", (Call("str", (t.o,)),))
            and isinstance(f.args[1], Literal)):
        return None
    return t.s, f.args[1]


def _lexical(term: Iri | Literal) -> str:
    return term.value if isinstance(term, Literal) else term.local


def _equalities(query: Query) -> dict[Term, Term]:
    fixed: dict[Term, Term] = dict(_values_pins(query.where))
    _, _, filters = _flatten_safe(query)
    for f in filters:
        pin = _pin(f)
        if pin is not None:
            fixed[pin[0]] = pin[1]
    return fixed


def _values_pins(group) -> list[tuple[Var, Term]]:
    """(?v, const) for each ``VALUES ?v { const }`` of one variable and one value, in ``group`` or the groups and
    subqueries inside it: GrailQA's gold queries name their topic entities and literal values so, where WebQSP's
    write the constant or a FILTER."""
    out = [(v.vars[0], v.rows[0][0]) for v in group.values
           if len(v.vars) == 1 and len(v.rows) == 1 and v.rows[0][0] is not None]
    for inner in [*group.optionals, *(alt for union in group.unions for alt in union)]:
        out += _values_pins(inner)
    for sub in group.subqueries:
        out += _values_pins(sub.where)
    return out


def _flatten_safe(query: Query):
    try:
        return flatten_group(query.where)
    except Exception:  # noqa: BLE001 - structure metrics also cover queries outside the statement language
        return list(query.where.all_triples()), [], list(query.where.filters)


def query_edges(query: Query) -> list[tuple[str, str, str, str, str]]:
    """Edges (relation, subject label, object label, subject key, object key), directions normalised."""
    reverse = _reverse_map()
    fixed = _equalities(query)
    out = []
    for t in query.where.all_triples():
        if not isinstance(t.p, Iri):
            continue
        rel, s, o = t.p.local, t.s, t.o
        rev = reverse.get(rel)
        if rev and rev < rel:
            rel, s, o = rev, o, s
        sk, ok = fixed.get(s, s), fixed.get(o, o)
        out.append((rel, _node(s, fixed), _node(o, fixed), str(sk), str(ok)))
    return out


def edge_set(query: Query) -> set[tuple[str, str, str]]:
    """The edges EHR compares: (relation, subject label, object label), each once."""
    return {e[:3] for e in query_edges(query)}


def ehr(predicted: Query | None, gold: Query) -> float:
    """Share of gold edges (relation with constant endpoints kept) found in the prediction."""
    gold_edges = edge_set(gold)
    if not gold_edges:
        return 0.0
    if predicted is None:
        return 0.0
    return len(gold_edges & edge_set(predicted)) / len(gold_edges)


def _graph(query: Query):
    import networkx as nx

    g = nx.DiGraph()
    for rel, sl, ol, sk, ok in query_edges(query):
        g.add_node(sk, label=sl)
        g.add_node(ok, label=ol)
        if g.has_edge(sk, ok):
            g.edges[sk, ok]["label"] = tuple(sorted(set(g.edges[sk, ok]["label"]) | {rel}))
        else:
            g.add_edge(sk, ok, label=(rel,))
    return g


def ged(predicted: Query | None, gold: Query, timeout: float = 2.0) -> float:
    """Graph edit distance between the query graphs (an empty prediction costs the whole gold graph)."""
    import networkx as nx

    g_gold = _graph(gold)
    if predicted is None:
        return float(g_gold.number_of_nodes() + g_gold.number_of_edges())
    g_pred = _graph(predicted)
    value = nx.graph_edit_distance(
        g_pred, g_gold,
        node_match=lambda a, b: a["label"] == b["label"] or (a["label"] == "var" and b["label"] == "var"),
        edge_match=lambda a, b: a["label"] == b["label"],
        timeout=timeout,
    )
    return float(value if value is not None else g_gold.number_of_nodes() + g_gold.number_of_edges())


def p95(values) -> float:
    """The 95th percentile by nearest rank (the smallest value with at least 95% of them at or below it); 0.0
    for none. Small samples: the largest of 2 to 20 values (never below the median)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)] if ordered else 0.0
