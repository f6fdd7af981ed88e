"""A small evaluator of gold-query FILTER expressions, with the semantics of the checking store.

The benchmark builder has to invent literal values that make a gold query's
FILTERs true for its gold answers and false for its near-miss distractors, so it
evaluates the FILTER expressions of :mod:`memq.sparql.model` in Python the way
:class:`memq.kg.oxigraph.OxigraphStore` does: ``xsd:dateTime`` casts pad years
and months as Virtuoso does, a raw date never compares with a dateTime, an error
inside ``||`` is rescued by a true operand, and a FILTER that errors is false.
Whatever it decides is verified afterwards by running the real query on
Oxigraph, so a divergence costs a failed query, never a wrong claim.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass

from memq.sparql.model import XSD, Exists, Expr, Group, Iri, Literal, Var

XSD_DATETIME = XSD + "dateTime"
XSD_DATE = XSD + "date"
XSD_INTEGER = XSD + "integer"
XSD_FLOAT = XSD + "float"
XSD_DOUBLE = XSD + "double"
XSD_DECIMAL = XSD + "decimal"
XSD_STRING = XSD + "string"
XSD_BOOLEAN = XSD + "boolean"

INT_TYPES = {XSD_INTEGER, XSD + "int", XSD + "long", XSD + "short", XSD + "nonNegativeInteger",
             XSD + "positiveInteger"}
FLOAT_TYPES = {XSD_FLOAT, XSD_DOUBLE, XSD_DECIMAL}
INT_RE = re.compile(r"^[+-]?\d+$")
FLOAT_RE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_DATE_RE = re.compile(r"^(-?\d{4,})-(\d{2})-(\d{2})$")
# an xsd:date may carry a time zone ("2007-01-19-08:00", as every date of GrailQA's queries does); it is read without it
_DATE_TZ_RE = re.compile(r"^(-?\d{4,})-(\d{2})-(\d{2})(Z|[+-]\d{2}:\d{2})?$")
_DATETIME_RE = re.compile(r"^(-?\d{4,})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(Z|[+-]\d{2}:\d{2})?$")
_DATEISH = re.compile(r"^(\d{4})(?:-(\d{2}))?(?:-(\d{2}))?(?:T(\d{2}:\d{2}:\d{2})(?:\.\d+)?)?(Z|[+-]\d{2}:\d{2})?$")


class EvalError(Exception):
    """A SPARQL expression error (type error, unbound variable)."""


@dataclass(frozen=True)
class Duration:
    days: float


# --------------------------------------------------------------------------- python values

def to_python(term: Iri | Literal | None):
    """A comparable Python value of a term: ``(kind, value)``; raises EvalError when unbound."""
    if term is None:
        raise EvalError("unbound")
    if isinstance(term, Iri):
        return ("iri", term.value)
    dtp, v = term.datatype, term.value
    if term.lang is not None:
        return ("lang", v)
    if dtp is None or dtp == XSD_STRING:
        return ("str", v)
    try:
        if dtp in INT_TYPES:
            return ("num", int(v))
        if dtp in FLOAT_TYPES:
            return ("num", float(v))
        if dtp == XSD_DATETIME:
            return ("dateTime", _parse_datetime(v))
        if dtp == XSD_DATE:
            m = _DATE_TZ_RE.match(v)
            if not m:
                raise EvalError(f"bad date {v!r}")
            return ("date", dt.datetime(int(m[1]), int(m[2]), int(m[3])))
        if dtp == XSD_BOOLEAN:
            return ("bool", v == "true")
    except (ValueError, OverflowError) as exc:
        raise EvalError(str(exc)) from exc
    return ("other:" + dtp, v)


def _parse_datetime(v: str) -> dt.datetime:
    m = _DATETIME_RE.match(v)
    if m:
        return dt.datetime(int(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5]), int(m[6]))
    m = _DATE_RE.match(v)  # a date-only dateTime constant: the writer appends T00:00:00
    if m:
        return dt.datetime(int(m[1]), int(m[2]), int(m[3]))
    raise EvalError(f"bad dateTime {v!r}")


def _cast(iri: str, val):
    kind, v = val
    if iri == XSD_DATETIME:  # Virtuoso-like, as memq.kg.oxigraph.lenient_datetime: years are padded
        if kind in ("dateTime", "date"):
            return ("dateTime", v)
        if kind in ("str", "lang") or kind.startswith("other:"):
            m = _DATEISH.match(v.strip())
            if m:
                year, month, day, clock = m[1], m[2] or "01", m[3] or "01", m[4] or "00:00:00"
                try:
                    return ("dateTime", dt.datetime.fromisoformat(f"{year}-{month}-{day}T{clock[:8]}"))
                except ValueError as exc:
                    raise EvalError(str(exc)) from exc
        raise EvalError(f"cannot cast {kind} to dateTime")
    if iri == XSD_DATE:
        if kind in ("dateTime", "date"):
            return ("date", dt.datetime(v.year, v.month, v.day))
        raise EvalError(f"cannot cast {kind} to date")
    if iri in INT_TYPES:
        if kind == "num":
            return ("num", int(v))
        if kind == "str" and INT_RE.match(v.strip()):
            return ("num", int(v))
        raise EvalError(f"cannot cast {kind} {v!r} to integer")
    if iri in FLOAT_TYPES:
        if kind == "num":
            return ("num", float(v))
        if kind == "str" and FLOAT_RE.match(v.strip()):
            return ("num", float(v))
        raise EvalError(f"cannot cast {kind} {v!r} to float")
    if iri == XSD_STRING:
        return ("str", _lexical(val))
    raise EvalError(f"unsupported cast {iri}")


def _lexical(val) -> str:
    kind, v = val
    if kind in ("iri", "str", "lang") or kind.startswith("other:"):
        return v
    if kind == "num":
        return str(v)
    if kind == "dateTime":
        return v.strftime("%Y-%m-%dT%H:%M:%S")
    if kind == "date":
        return v.strftime("%Y-%m-%d")
    if kind == "bool":
        return "true" if v else "false"
    raise EvalError(f"no lexical form for {kind}")


def _compare(op: str, a, b) -> bool:
    ka, kb = a[0], b[0]
    if ka != kb:
        if op in ("=", "!=") and "iri" in (ka, kb):
            return op == "!="  # an IRI never equals a literal
        raise EvalError(f"cannot compare {ka} with {kb}")
    if ka in ("iri", "lang", "bool") and op not in ("=", "!="):
        raise EvalError(f"cannot order {ka}")
    x, y = a[1], b[1]
    return {"=": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]


# --------------------------------------------------------------------------- evaluator

AttrLookup = Callable[[object, str], list[Literal | Iri]]
"""``lookup(subject_term, predicate_iri) -> values`` for the EXISTS patterns."""


@dataclass
class Env:
    """Variable bindings of one solution and the attribute lookup for EXISTS."""

    binding: dict[str, Iri | Literal]
    lookup: AttrLookup

    def term(self, t):
        if isinstance(t, Var):
            return self.binding.get(t.name)
        return t


def holds(expr: Expr, env: Env) -> bool:
    """The effective boolean value of a FILTER; an error is false."""
    try:
        return _ebv(evaluate(expr, env))
    except EvalError:
        return False


def _ebv(val) -> bool:
    kind, v = val
    if kind == "bool":
        return v
    if kind == "num":
        return v != 0
    if kind in ("str", "lang"):
        return v != ""
    raise EvalError(f"no boolean value for {kind}")


def evaluate(e: Expr, env: Env):
    if isinstance(e, Var):
        return to_python(env.binding.get(e.name))
    if isinstance(e, (Iri, Literal)):
        return to_python(e)
    if isinstance(e, Exists):
        found = _exists(e.pattern, env)
        return ("bool", found != e.negated)
    op, args = e.op, e.args
    if op == "||":
        errs = 0
        for a in args:
            try:
                if _ebv(evaluate(a, env)):
                    return ("bool", True)
            except EvalError:
                errs += 1
        if errs:
            raise EvalError("error in ||")
        return ("bool", False)
    if op == "&&":
        errs = 0
        for a in args:
            try:
                if not _ebv(evaluate(a, env)):
                    return ("bool", False)
            except EvalError:
                errs += 1
        if errs:
            raise EvalError("error in &&")
        return ("bool", True)
    if op == "!":
        return ("bool", not _ebv(evaluate(args[0], env)))
    if op in ("=", "!=", "<", "<=", ">", ">="):
        return ("bool", _compare(op, evaluate(args[0], env), evaluate(args[1], env)))
    if op in ("+", "-", "*", "/"):
        return _arith(op, evaluate(args[0], env), evaluate(args[1], env))
    if op == "neg":
        kind, v = evaluate(args[0], env)
        if kind != "num":
            raise EvalError("neg of non-number")
        return ("num", -v)
    if op in ("in", "notin"):
        head = evaluate(args[0], env)
        hit = any(_compare("=", head, evaluate(a, env)) for a in args[1:])
        return ("bool", hit == (op == "in"))
    if op == "isliteral":
        t = env.term(args[0]) if isinstance(args[0], Var) else None
        if isinstance(args[0], Var):
            if t is None:
                raise EvalError("unbound")
            return ("bool", isinstance(t, Literal))
        return ("bool", evaluate(args[0], env)[0] != "iri")
    if op in ("isiri", "isuri"):
        return ("bool", evaluate(args[0], env)[0] == "iri")
    if op == "lang":
        if isinstance(args[0], Var):
            t = env.term(args[0])
            if t is None:
                raise EvalError("unbound")
            if isinstance(t, Iri):
                raise EvalError("lang of an IRI")
            return ("str", t.lang or "")
        raise EvalError("lang of an expression")
    if op == "langmatches":
        tag = _lexical(evaluate(args[0], env)).lower()
        rng = _lexical(evaluate(args[1], env)).lower()
        ok = (tag != "") if rng == "*" else (tag == rng or tag.startswith(rng + "-"))
        return ("bool", ok)
    if op == "str":
        val = evaluate(args[0], env)
        return ("str", _lexical(val))
    if op == "year":
        kind, v = evaluate(args[0], env)
        if kind not in ("dateTime", "date"):
            raise EvalError("year of a non-date")
        return ("num", v.year)
    if op == "bound":
        return ("bool", isinstance(args[0], Var) and args[0].name in env.binding)
    if ":" in op:  # a cast
        return _cast(op, evaluate(args[0], env))
    raise EvalError(f"unsupported function {op}")


def _arith(op: str, a, b):
    if a[0] == "num" and b[0] == "num":
        x, y = a[1], b[1]
        if op == "/":
            if y == 0:
                raise EvalError("division by zero")
            return ("num", x / y)
        return ("num", {"+": x + y, "-": x - y, "*": x * y}[op])
    if op == "-" and a[0] == b[0] and a[0] in ("dateTime", "date"):
        return ("duration", Duration((a[1] - b[1]).total_seconds() / 86400))
    raise EvalError(f"cannot apply {op} to {a[0]} and {b[0]}")


def _exists(pattern: Group, env: Env) -> bool:
    """EXISTS over one-hop attribute patterns ``{ ?s p ?v . FILTER(...) }``."""
    if pattern.unions or pattern.optionals or pattern.subqueries or pattern.minus:
        raise EvalError("unsupported EXISTS pattern")
    choices: list[tuple[str | None, list]] = []
    for t in pattern.triples:
        s = env.term(t.s)
        if s is None or not isinstance(t.p, Iri):
            raise EvalError("unsupported EXISTS pattern")
        values = env.lookup(s, t.p.value)
        if isinstance(t.o, Var) and t.o.name not in env.binding:
            choices.append((t.o.name, values))
        else:
            want = env.term(t.o)
            choices.append((None, [v for v in values if v == want]))
    return _any_solution(choices, 0, dict(env.binding), pattern, env)


def _any_solution(choices, i, binding, pattern, env) -> bool:
    if i == len(choices):
        sub = Env(binding, env.lookup)
        return all(holds(f, sub) for f in pattern.filters)
    name, values = choices[i]
    for v in values:
        if name is not None:
            binding = {**binding, name: v}
        if _any_solution(choices, i + 1, binding, pattern, env):
            return True
    return False
