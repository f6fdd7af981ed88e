"""Run every gold query of a dataset on a knowledge graph and compare with the gold answers.

``check_gold`` answers "does this KG reproduce the gold answers?" and, with
``drop_constraint=True``, "do the constraints of the gold queries matter on this
KG?" (removing one constraint at a time must change some answer sets, or the
KG cannot tell a right query from a sloppy one).

Answer comparison (:func:`answer_key`, :func:`same_answers`):

* an IRI compares by its Freebase local id (``m.06w2sn5``);
* a literal compares by its lexical value, numbers numerically: integers
  exactly, numbers with a point or exponent to 6 significant digits
  (``3`` = ``3.0``), because Virtuoso writes doubles with ``%g``
  (``123456789.123`` comes back as ``1.23457e+08``);
* date-like values (``YYYY``, ``YYYY-MM``, ``YYYY-MM-DD``, each with an
  optional time and zone) compare after dropping a midnight time and a ``Z``
  zone, and two dates match when one is a prefix of the other at a component
  boundary: gold ``2009`` matches ``2009-01-01T00:00:00`` and ``2009-05-03``,
  gold ``1961-08-04`` matches ``1961-08-04T00:00:00`` but not ``1961-08``'s
  sibling ``1961-09-04``. A gold year thus matches any date in that year: a KG
  that pads years to dates (``2009`` -> ``2009-01-01``) still checks out, at the
  price of not telling a year from a day of that year.
"""

from __future__ import annotations

import re
import statistics
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import replace

from memq.datasets import GoldParse, GoldQuestion
from memq.errors import KnowledgeGraphError, SparqlParseError
from memq.kg.base import KnowledgeGraph, Row, Term
from memq.sparql import parse_query, to_standard
from memq.sparql.model import Call, Iri, Literal, Query, Triple, Var, expr_vars, walk_exprs

_DATE = re.compile(r"^(-?\d{4})(?:-(\d{2}))?(?:-(\d{2}))?(?:T(\d{2}:\d{2}:\d{2}(?:\.\d+)?))?(Z|[+-]\d{2}:\d{2})?$")
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
MAX_LISTED = 200


# --------------------------------------------------------------------------- answers


def answer_key(value: Term | str) -> str:
    """The comparable form of one answer: a local id, a date key ``d:...``, a number ``n:...`` or a string."""
    if isinstance(value, Iri):
        return value.local
    text = value.value if isinstance(value, Literal) else str(value)
    date = _DATE.match(text)
    if date:
        year, month, day, clock, _zone = date.groups()
        parts = [year] + [p for p in (month, day) if p]
        if clock and clock.split(".")[0] != "00:00:00":
            parts.append(clock)
        return "d:" + "-".join(parts)
    if _NUMBER.match(text):
        if re.fullmatch(r"[+-]?\d+", text):
            return "n:" + str(int(text))
        return "n:" + f"{float(text):.6g}"
    return text


def answer_keys_match(a: str, b: str) -> bool:
    """Two answer keys name one answer: equal, or two dates, one a prefix of the other at a component boundary."""
    if a == b:
        return True
    if a.startswith("d:") and b.startswith("d:"):
        short, long = sorted((a, b), key=len)
        return long.startswith(short + "-")
    return False


def same_answers(got: Iterable[str], gold: Iterable[str]) -> bool:
    """Set equality of answer keys, with the date-prefix rule of the module docstring."""
    got, gold = set(got), set(gold)
    if got == gold:
        return True
    return (all(any(answer_keys_match(g, r) for r in got) for g in gold)
            and all(any(answer_keys_match(r, g) for g in gold) for r in got))


def result_keys(rows: list[Row], var: str) -> set[str]:
    return {answer_key(row[var]) for row in rows if var in row}


# --------------------------------------------------------------------------- constraints

def _is_language_filter(expr) -> bool:
    ops = {e.op for e in walk_exprs(expr) if isinstance(e, Call)}
    return "langmatches" in ops or ("lang" in ops and "isliteral" in ops)


def _is_not_topic_filter(expr) -> bool:
    if not (isinstance(expr, Call) and expr.op == "!=" and len(expr.args) == 2):
        return False
    kinds = {type(a) for a in expr.args}
    return kinds == {Var, Iri} and any(isinstance(a, Iri) and a.is_entity for a in expr.args)


def _main_path(query: Query, topic: str | None) -> set[int]:
    """Indexes of the top-level triples on a shortest path from the topic entity to the answer."""
    triples = query.where.triples
    answer = query.answer_var
    targets: set = set()
    if answer is not None:
        proj = query.projection[0]
        targets = {answer} | (expr_vars(proj.expr) if proj.expr is not None else set())
    entities = [t for tr in triples for t in (tr.s, tr.o) if isinstance(t, Iri) and t.is_entity]
    start = next((e for e in entities if e.local == topic), entities[0] if entities else None)
    if start is None or not targets:
        return set()
    edges: dict = {}
    for i, tr in enumerate(triples):
        edges.setdefault(tr.s, []).append((tr.o, i))
        edges.setdefault(tr.o, []).append((tr.s, i))
    back: dict = {start: None}
    todo = deque([start])
    while todo:
        node = todo.popleft()
        if node in targets:
            path = set()
            while back[node] is not None:
                node, i = back[node]
                path.add(i)
            return path
        for nxt, i in edges.get(node, ()):
            if nxt not in back:
                back[nxt] = (node, i)
                todo.append(nxt)
    return set()


def constraints(query: Query, topic: str | None = None) -> list[tuple[str, str, Query]]:
    """``(kind, description, query without that one constraint)`` for each constraint.

    Kinds: ``filter`` (a top-level FILTER other than the language filter and
    ``?x != topic``), ``triple`` (a top-level triple with a constant entity at
    either end that is not on the shortest topic -> answer path) and ``order``
    (ORDER BY / LIMIT / OFFSET together).
    """
    out = []
    where = query.where
    for i, f in enumerate(where.filters):
        if _is_language_filter(f) or _is_not_topic_filter(f):
            continue
        filters = where.filters[:i] + where.filters[i + 1:]
        out.append(("filter", f"filter {i}", replace(query, where=replace(where, filters=filters))))
    on_path = _main_path(query, topic)
    for i, tr in enumerate(where.triples):
        if i in on_path or not any(isinstance(t, Iri) and t.is_entity for t in (tr.s, tr.o)):
            continue
        triples = where.triples[:i] + where.triples[i + 1:]
        out.append(("triple", _describe(tr), replace(query, where=replace(where, triples=triples))))
    if query.order_by or query.limit is not None or query.offset is not None:
        out.append(("order", "ORDER BY/LIMIT", replace(query, order_by=(), limit=None, offset=None)))
    return out


def _describe(tr: Triple) -> str:
    return " ".join(t.local if isinstance(t, Iri) else str(t) for t in tr.terms())


# --------------------------------------------------------------------------- the check

def _gold_items(questions: Iterable[GoldQuestion]) -> list[tuple[GoldQuestion, GoldParse]]:
    return [(q, p) for q in questions for p in q.parses if p.answers is not None]


def parse_ident(question: GoldQuestion, parse: GoldParse) -> str:
    """How ``check_gold`` names a parse in ``inexact`` and ``errors``: its id, prefixed by the question's
    when it does not already start with it."""
    return parse.parse_id if parse.parse_id.startswith(question.id) else f"{question.id}/{parse.parse_id}"


def check_gold(kg: KnowledgeGraph, questions: Iterable[GoldQuestion], *, drop_constraint: bool = False,
               timeout: float | None = 60.0, progress: bool = False, max_listed: int | None = MAX_LISTED) -> dict:
    """Run every gold parse that has answers; a JSON-able summary.

    Keys: ``queries`` (parses with gold answers), ``executed`` (ran without
    error), ``exact`` (answer set equal to gold), ``nonempty``, ``questions``,
    ``questions_exact`` (some parse exact), ``errors`` (``{id, reason}``),
    ``inexact`` (ids, the first ``max_listed``; ``None``: all), ``seconds``,
    ``latency_ms`` (p50/p95).
    With ``drop_constraint`` also ``constraint_pairs``, ``changed`` and
    ``by_kind`` (pairs/changed per constraint kind), ``drop_errors``.
    """
    items = _gold_items(questions)
    if progress:
        from tqdm import tqdm
        items = tqdm(items, desc="gold queries", unit="q")
    summary: dict = {"queries": 0, "executed": 0, "exact": 0, "nonempty": 0, "questions": 0,
                     "questions_exact": 0, "errors": [], "inexact": []}
    if drop_constraint:
        summary.update(constraint_pairs=0, changed=0, drop_errors=[],
                       by_kind={k: {"pairs": 0, "changed": 0} for k in ("filter", "triple", "order")})
    seen_questions: dict[str, bool] = {}
    latencies: list[float] = []
    started = time.perf_counter()
    for question, parse in items:
        summary["queries"] += 1
        ident = parse_ident(question, parse)
        seen_questions.setdefault(question.id, False)
        try:
            query = parse_query(parse.sparql)
            var = query.answer_var.name if query.answer_var else None
            if var is None:
                raise SparqlParseError("gold query projects no variable", query=parse.sparql)
            t0 = time.perf_counter()
            rows = kg.select(to_standard(query), timeout=timeout)
            latencies.append(time.perf_counter() - t0)
        except (KnowledgeGraphError, SparqlParseError) as exc:
            summary["errors"].append({"id": ident, "reason": str(exc)[:500]})
            continue
        summary["executed"] += 1
        got = result_keys(rows, var)
        summary["nonempty"] += bool(got)
        if same_answers(got, (answer_key(a) for a, _ in parse.answers or ())):
            summary["exact"] += 1
            seen_questions[question.id] = True
        elif max_listed is None or len(summary["inexact"]) < max_listed:
            summary["inexact"].append(ident)
        if drop_constraint:
            topic = parse.topic_entities[0][0] if parse.topic_entities else None
            _drop_each(kg, query, var, got, topic, ident, timeout, summary)
    summary["questions"] = len(seen_questions)
    summary["questions_exact"] = sum(seen_questions.values())
    summary["seconds"] = round(time.perf_counter() - started, 3)
    summary["latency_ms"] = _percentiles(latencies)
    return summary


def _drop_each(kg: KnowledgeGraph, query: Query, var: str, got: set[str], topic: str | None,
               ident: str, timeout: float | None, summary: dict) -> None:
    for kind, what, loose in constraints(query, topic):
        try:
            loose_rows = kg.select(to_standard(loose), timeout=timeout)
        except (KnowledgeGraphError, SparqlParseError) as exc:
            summary["drop_errors"].append({"id": ident, "constraint": what, "reason": str(exc)[:300]})
            continue
        changed = not same_answers(result_keys(loose_rows, var), got)
        summary["constraint_pairs"] += 1
        summary["changed"] += changed
        summary["by_kind"][kind]["pairs"] += 1
        summary["by_kind"][kind]["changed"] += changed


def _percentiles(values: list[float]) -> dict:
    if not values:
        return {"p50": None, "p95": None}
    ms = sorted(v * 1000 for v in values)
    p95 = ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))]
    return {"p50": round(statistics.median(ms), 3), "p95": round(p95, 3)}
