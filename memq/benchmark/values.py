"""Literal values for the benchmark KG: how each relation's values are typed, and candidate values.

Every date-like value is an ``xsd:dateTime`` (a year ``2005`` is stored as
``2005-01-01T00:00:00``): Oxigraph never compares an ``xsd:date`` or
``xsd:gYear`` with an ``xsd:dateTime``, and the gold queries compare with
dateTime constants. :func:`memq.kg.check.answer_key` matches a gold year or
date with its padded form. Candidate values for an invented literal start near
the constants its FILTERs mention (one step below and above: a year for dates,
~10% for numbers).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from memq.sparql.model import XSD, Call, Exists, Expr, Literal, Var, walk_exprs

from .eval import (
    FLOAT_RE,
    INT_RE,
    INT_TYPES,
    XSD_BOOLEAN,
    XSD_DATETIME,
    XSD_FLOAT,
    XSD_INTEGER,
    EvalError,
    to_python,
)

if TYPE_CHECKING:
    from .builder_schema import BuilderSchema
    from .shape import Variant

_PAD = re.compile(r"^(-?\d{4})(?:-(\d{2}))?(?:-(\d{2}))?(?:T(\d{2}:\d{2}:\d{2}))?(?:\.\d+)?(?:Z)?$")

TEMPORAL = "temporal"
INTEGER = "integer"
FLOAT = "float"
TEXT = "text"
_CAST_KIND = {XSD_DATETIME: TEMPORAL, XSD + "date": TEMPORAL, XSD_INTEGER: INTEGER, XSD_FLOAT: FLOAT,
              XSD + "double": FLOAT, XSD + "decimal": FLOAT, XSD + "int": INTEGER}
_RANGE_KIND = {"type.datetime": TEMPORAL, "type.int": INTEGER, "type.float": FLOAT}


# --------------------------------------------------------------------------- typing

def literal_for_answer(text: str, kind: str | None) -> Literal:
    """The literal a value answer (``"1841-03-04"``, ``"2005"``, ``"AUD"``) is stored as.

    ``kind`` is the value kind of the relation that reaches it (:data:`TEMPORAL`,
    :data:`INTEGER`, ...), or ``None`` when unknown. Every date-like value becomes
    an ``xsd:dateTime`` (a year ``2005`` -> ``2005-01-01T00:00:00``): Oxigraph
    never compares an ``xsd:date`` or ``xsd:gYear`` with an ``xsd:dateTime``, and
    the gold queries compare against ``xsd:dateTime`` constants.
    :func:`memq.kg.check.answer_key` matches a gold year or date with its padded form.
    """
    if kind in (TEMPORAL, None):
        padded = pad_date(text)
        if padded is not None:
            return Literal(padded, XSD_DATETIME)
    if kind in (INTEGER, None) and INT_RE.match(text):
        return Literal(text, XSD_INTEGER)
    if kind in (FLOAT, None) and FLOAT_RE.match(text):
        return Literal(text, XSD_FLOAT)
    return Literal(text, lang="en") if kind == TEXT else Literal(text)


def pad_date(text: str) -> str | None:
    """``YYYY``, ``YYYY-MM``, ``YYYY-MM-DD`` or a dateTime as an ``xsd:dateTime`` lexical form; else None."""
    m = _PAD.match(text.strip())
    if not m:
        return None
    year, month, day, clock = m[1], m[2] or "01", m[3] or "01", m[4] or "00:00:00"
    return f"{year}-{month}-{day}T{clock}"


def literal_from_raw(text: str, range_type: str | None) -> Literal:
    """Type a literal of a real triple given as bare text (EPR) from its relation's range."""
    if range_type == "type.datetime":
        return literal_for_answer(text, TEMPORAL)
    if range_type == "type.int" and INT_RE.match(text):
        return Literal(text, XSD_INTEGER)
    if range_type == "type.float" and FLOAT_RE.match(text):
        return Literal(text, XSD_FLOAT)
    if range_type == "type.boolean" and text in ("true", "false"):
        return Literal(text, XSD_BOOLEAN)
    if range_type == "type.text":
        return Literal(text, lang="en")
    return Literal(text)


# --------------------------------------------------------------------------- candidates

def value_kind(term: Literal) -> str:
    kind = to_python(term)[0]
    if kind in ("dateTime", "date"):
        return TEMPORAL
    if kind == "num":
        return INTEGER if term.datatype in INT_TYPES else FLOAT
    return TEXT


def make_value(kind: str, x, datatype: str | None) -> Literal:
    """A literal of ``kind`` for the Python value ``x`` (datetime, int or float)."""
    if kind == TEMPORAL:
        return Literal(f"{x.year:04d}-{x.month:02d}-{x.day:02d}T00:00:00", XSD_DATETIME)
    if kind == INTEGER:
        return Literal(str(int(x)), datatype or XSD_INTEGER)
    if kind == FLOAT:
        text = f"{float(x):.6g}"
        if "e" not in text and "." not in text:
            text += ".0"
        return Literal(text, datatype or XSD_FLOAT)
    return Literal(str(x))


def shift(kind: str, x, steps: int):
    """``x`` moved by ``steps`` units: a year for dates, ~10% (>= 1) for numbers."""
    if kind == TEMPORAL:
        year = min(max(x.year + steps, 1), 9998)
        day = min(x.day, 28) if x.month == 2 else x.day
        return x.replace(year=year, day=day)
    if kind == INTEGER:
        return int(x) + steps * max(1, abs(int(x)) // 10)
    return float(x) + steps * max(1.0, abs(float(x)) / 10)


DEFAULT_BASE = {TEMPORAL: dt.datetime(2000, 1, 1), INTEGER: 100, FLOAT: 100.0}


def constants_of(exprs: Iterable[Expr]) -> list[tuple[str, object]]:
    """The comparable constants (dates, numbers) that occur in ``exprs``, EXISTS included."""
    out: list[tuple[str, object]] = []

    def visit(e):
        if isinstance(e, Literal):
            try:
                kind, v = to_python(e)
            except EvalError:
                return
            if kind in ("dateTime", "date"):
                out.append((TEMPORAL, v))
            elif kind == "num":
                out.append((INTEGER if isinstance(v, int) else FLOAT, v))
            elif kind == "str" and INT_RE.match(v.strip()):
                out.append((INTEGER, int(v)))
        elif isinstance(e, Call):
            for a in e.args:
                visit(a)
        elif isinstance(e, Exists):
            for f in e.pattern.filters:
                visit(f)
            for t in e.pattern.triples:
                visit(t.o)

    for e in exprs:
        visit(e)
    return out


def candidates(kind: str, constants: list[tuple[str, object]]) -> list:
    """Candidate Python values of ``kind``, nearest the constants first, deterministic."""
    numeric = (INTEGER, FLOAT)
    base = [v for k, v in constants if k == kind or (kind in numeric and k in numeric)]
    if kind == INTEGER:
        base = [int(v) for v in base]
    elif kind == FLOAT:
        base = [float(v) for v in base]
    out: list = []
    for v in base:
        for step in (-1, 1, 0, -3, 3):
            c = shift(kind, v, step)
            if c not in out:
                out.append(c)
    for step in (0, 10, -10):
        c = shift(kind, DEFAULT_BASE[kind], step) if kind in DEFAULT_BASE else None
        if c is not None and c not in out:
            out.append(c)
    return out


def between(kind: str, constants: Iterable[tuple[str, object]]) -> list:
    """Values of ``kind`` in every gap of ``constants`` (each constant, the midpoint of each pair of
    neighbours, and one step beyond both ends), for a relation many gold queries compare with different
    thresholds: an answer that one query wants below 54.5 and another above 50 gets a value in between."""
    numeric = (INTEGER, FLOAT)
    base = sorted({v for k, v in constants if k == kind or (kind in numeric and k in numeric)})
    if not base:
        return []
    if kind == INTEGER:
        base = sorted({int(v) for v in base})
    mids = [a + (b - a) / 2 if kind != INTEGER else a + (b - a) // 2 for a, b in zip(base, base[1:], strict=False)]
    return [shift(kind, base[0], -1), *base, *mids, shift(kind, base[-1], 1)]


class RelationTypes:
    """Which kind of value (date, integer, float, text) and datatype each relation's literals get.

    Decided once over all gold queries: a cast or a compared constant wins over the
    schema range. Dates are always ``xsd:dateTime`` (Oxigraph never compares a date
    with a dateTime, and the gold queries compare with dateTime constants).
    """

    def __init__(self, schema: BuilderSchema) -> None:
        self.schema = schema
        self.hints: dict[str, set[str]] = {}
        # relation -> the constants any gold query compares its values with (see :func:`between`)
        self.compared: dict[str, set[tuple[str, object]]] = {}

    def observe(self, variant: Variant, order_exprs: tuple[Expr, ...] = ()) -> None:
        owner: dict[str, str] = {}
        for t in variant.triples:
            if isinstance(t.o, Var):
                owner.setdefault(t.o.name, t.p.local)
        for f in variant.filters:
            for e in walk_exprs(f):
                if isinstance(e, Exists):
                    for t in e.pattern.triples:
                        if isinstance(t.o, Var):
                            owner.setdefault(t.o.name, t.p.local)
        for e in [x for f in variant.filters for x in walk_exprs(f, into_exists=True)] + list(order_exprs):
            if not hasattr(e, "op"):
                continue
            if ":" in e.op and e.args and isinstance(e.args[0], Var):
                rel = owner.get(e.args[0].name)
                if rel and e.op in _CAST_KIND:
                    self.hints.setdefault(rel, set()).add("cast:" + _CAST_KIND[e.op])
            if e.op in ("<", "<=", ">", ">=", "=", "!=") and len(e.args) == 2:
                for a, b in (e.args, e.args[::-1]):
                    if isinstance(a, Var) and a.name in owner and isinstance(b, Literal):
                        rel = owner[a.name]
                        try:
                            kind = to_python(b)[0]
                        except EvalError:
                            continue
                        self.hints.setdefault(rel, set()).add("raw:" + kind)
                        self.compared.setdefault(rel, set()).update(constants_of([b]))

    def kind(self, relation: str) -> str:
        hints = self.hints.get(relation, set())
        for k in (TEMPORAL, INTEGER, FLOAT):
            if "cast:" + k in hints:
                return k
        if hints & {"raw:dateTime", "raw:date"}:
            return TEMPORAL
        if "raw:num" in hints:
            rng = self.schema.range(relation)
            return FLOAT if rng == "type.float" else INTEGER
        return _RANGE_KIND.get(self.schema.range(relation) or "", TEXT)

    def hinted_kind(self, relation: str) -> str | None:
        """The kind when some gold query casts or compares the relation's values, else None."""
        return self.kind(relation) if self.hints.get(relation) else None

    def datatype(self, relation: str) -> str | None:
        kind = self.kind(relation)
        if kind == TEMPORAL:
            return XSD_DATETIME
        return {INTEGER: XSD_INTEGER, FLOAT: XSD_FLOAT}.get(kind)
