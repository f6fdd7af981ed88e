"""ORDER BY ... LIMIT 1 [OFFSET n]: which answer comes first, and by how much.

The builder gives the gold answer of an ordered gold query a key value that
beats every other candidate the shared graph already holds, and an ORDER BY
distractor a key value just behind it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from memq.sparql import to_standard
from memq.sparql.model import Expr, Query, Var, expr_vars

from .eval import Env, EvalError, evaluate
from .values import FLOAT, INTEGER, TEMPORAL


@dataclass(frozen=True)
class OrderSpec:
    expr: Expr
    descending: bool
    offset: int

    @classmethod
    def of(cls, query: Query) -> OrderSpec | None:
        if not query.order_by:
            return None
        key = query.order_by[0]
        return cls(key.expr, key.descending, query.offset or 0)

    def unlimited_sparql(self, query: Query) -> str:
        """``SELECT *`` over the query's pattern, without ORDER BY / LIMIT / OFFSET."""
        return to_standard(Query(where=query.where, projection=(), distinct=False))

    def key_predicate(self, variant) -> str | None:
        """The relation whose value is the ORDER BY key (``?s p ?key``), if any."""
        names = {v.name for v in expr_vars(self.expr)}
        for t in variant.triples:
            if isinstance(t.o, Var) and t.o.name in names:
                return t.p.value
        return None

    def key_of(self, value):
        """The key the ORDER BY expression gives a value of the key variable."""
        names = sorted(v.name for v in expr_vars(self.expr))
        if len(names) != 1:
            return None
        return gold_key(self, {names[0]: value})

    def constants(self, keys) -> list[tuple[str, object]]:
        out = []
        for k in keys:
            if k is None:
                continue
            kind, v = k
            if kind in ("dateTime", "date"):
                out.append((TEMPORAL, v))
            elif kind == "num":
                out.append((INTEGER if isinstance(v, int) else FLOAT, v))
        return out


def gold_key(spec: OrderSpec, binding: dict):
    """The ORDER BY key of one solution as ``(kind, value)``, None when it errors."""
    try:
        return evaluate(spec.expr, Env(dict(binding), lambda s, p: []))
    except EvalError:
        return None


# ORDER BY and MAX/MIN put an xsd:date and an xsd:dateTime in time order on the checking store (Oxigraph), where a
# FILTER comparison of the two errors (memq.benchmark.eval); a date in a time zone against a dateTime without one is
# indeterminate within 14 hours (XML Schema), so across the two types a key ranks first only by more than a day
ACROSS_TEMPORAL = dt.timedelta(days=1)


def key_better(spec: OrderSpec, key, others) -> bool:
    """Does ``key`` sort strictly before every key of ``others``?

    An unbound or erroring key sorts first ascending (so last descending). A date and a dateTime compare
    in time, by more than :data:`ACROSS_TEMPORAL`.
    """
    if key is None:
        return False
    for other in others:
        if other is None:
            if not spec.descending:
                return False
            continue
        if {other[0], key[0]} == {"date", "dateTime"}:
            if abs(key[1] - other[1]) <= ACROSS_TEMPORAL:
                return False
        elif other[0] != key[0] and not {other[0], key[0]} <= {"num"}:
            return False
        if spec.descending and not key[1] > other[1]:
            return False
        if not spec.descending and not key[1] < other[1]:
            return False
    return True


def competitor_keys(graph, item, spec: OrderSpec) -> list[list]:
    """Keys the gold answer must beat: ``[all competitors, only the protected ones]``.

    A competitor is a solution whose answer is not gold; it is protected when every
    triple of it is needed by some gold query (others can be dropped instead).
    """
    from memq.kg.check import answer_key

    from .paths import instantiate

    var = item.shape.answer.name
    every, protected = [], []
    for row in graph.run(spec.unlimited_sparql(item.query)):
        if var not in row or answer_key(row[var]) in item.gold_keys:
            continue
        key = gold_key(spec, row)
        every.append(key)
        for variant in item.shape.variants:
            keys = [(instantiate(t.s, row), t.p, instantiate(t.o, row)) for t in variant.triples]
            if all(k in graph.info for k in keys):
                if all(graph.info[k].owners for k in keys):
                    protected.append(key)
                break
        else:
            protected.append(key)
    return [every, protected] if len(protected) < len(every) else [every]
