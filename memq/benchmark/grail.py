"""GrailQA's query form, as the benchmark builder materialises it.

A GrailQA gold query (see :mod:`memq.decompose.forms`) wraps a plain pattern:
``SELECT (?x0 AS ?value)`` or ``(COUNT(?x0) AS ?value)`` around ``SELECT DISTINCT ?x0``,
``VALUES`` rows for its constants, class constraints (``?x0 type.object.type C``),
literal comparisons, every-node-differs filters, and a ``MAX``/``MIN`` subquery for a
superlative. :func:`builder_form` gives the builder a query of the shape it already
materialises, with the same answers on a graph the builder makes:

* the wrapper goes and one-row ``VALUES`` are written in (:func:`~memq.decompose.forms.read_form`);
* the every-node-differs filters go: the builder binds each node variable to its own node;
* a superlative ``{ SELECT (MAX(?y) AS ?x) ... } ?s p ?x`` becomes ``ORDER BY DESC(?x) LIMIT k``
  (k gold answers): the builder gives the gold answers a key that beats every other
  candidate on the graph, and the ORDER BY distractor a runner-up just behind them;
* a count becomes a list of ``n`` synthetic answers (``n`` the gold count), which the
  builder materialises and keeps exact as any other answers, so that the count comes out ``n``.

The check (``memq kg check``) runs the original query, not this one.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

from memq.decompose.forms import is_distinctness, read_form, superlative
from memq.errors import DecompositionError
from memq.sparql.model import OrderKey, Projection, Query

from .paths import SYN

MAX_COUNT = 5000
"""A gold count above this is not materialised (that many synthetic answers would dwarf the graph)."""


@dataclass(frozen=True)
class BuilderForm:
    """What the builder materialises for one GrailQA query: ``query`` and its ``answers`` (``(id, name)``)."""

    query: Query
    answers: tuple[tuple[str, str], ...]
    function: str  # "none", "count" or "superlative"


def count_answer(key: str, i: int) -> str:
    """The ``i``-th synthetic answer of a count question (an IRI in the synthetic namespace)."""
    digest = hashlib.sha1(f"{key}\x1fcount\x1f{i}".encode()).hexdigest()[:16]
    return f"{SYN}ent_{digest}"


def builder_form(query: Query, answers: tuple[tuple[str, str], ...], key: str) -> BuilderForm | str | None:
    """The builder's form of a GrailQA query; ``None`` for a query of another form, a string when it cannot be."""
    try:
        form = read_form(query)
    except DecompositionError as exc:
        return f"GrailQA form: {exc}"
    if not form.grail:
        return None
    q = form.query
    where = q.where
    where = replace(where, filters=tuple(f for f in where.filters if not is_distinctness(f)))
    function = "none"
    if where.subqueries:
        if len(where.subqueries) != 1:
            return "GrailQA form: several superlative subqueries"
        try:
            op, var = superlative(where.subqueries[0], q.where)
        except DecompositionError as exc:
            return f"GrailQA form: {exc}"
        where = replace(where, subqueries=())
        q = replace(q, order_by=(OrderKey(var, descending=op == "MAX"),), limit=max(1, len(answers)))
        function = "superlative"
    if form.count is not None:
        try:
            n = int(answers[0][0]) if len(answers) == 1 else -1
        except ValueError:
            n = -1
        if not 0 <= n <= MAX_COUNT:
            return f"GrailQA count: gold answer {answers!r} is not a count up to {MAX_COUNT}"
        answers = tuple((count_answer(key, i), "") for i in range(n))
        q = replace(q, projection=(Projection(form.count),), distinct=True)
        function = "count"
    return BuilderForm(replace(q, where=where), answers, function)
