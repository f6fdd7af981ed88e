"""Template descriptions of "filter" and "order" statements.

Filters are read from their expression tree:

* a comparison ``FILTER(?entity1 = ?value)`` -> ``?entity1 is the same as ?value``
  (``<`` on dates reads "before", on numbers "less than");
* the WebQSP time constraint
  ``FILTER(NOT EXISTS { ?entity1 ns:people.marriage.from ?sk0 } || EXISTS { ... <= ?value })``
  -> ``the marriage ?entity1 was valid at time ?value, with its start date on or before ?value``;
* anything else is verbalised operator by operator; an expression part that
  has no reading marks the result as not fully read (the caller records a
  generic fallback).

Orders: ``ORDER BY DESC(xsd:dateTime(?entity1)) LIMIT 1`` -> ``sort by ?entity1
as a date in descending order and keep the first result`` and ``rank the results
by ?entity1 and take the latest``.
"""

from __future__ import annotations

from memq.sparql.model import XSD, Call, Exists, Expr, Iri, Literal, Query, Triple, Var

from .schema import FreebaseSchema


def pred(t: Triple) -> str:
    """The predicate's Freebase id (``people.person.gender``); the text of a variable predicate."""
    return t.p.local if isinstance(t.p, Iri) else str(t.p)

_DATE_CASTS = {XSD + "dateTime", XSD + "date", XSD + "gYear", "year"}
_NUMBER_CASTS = {XSD + t for t in ("integer", "int", "float", "double", "decimal", "long")}

_CMP_DATE = {"=": "the same date as", "!=": "not the same date as", "<": "before", "<=": "on or before",
             ">": "after", ">=": "on or after"}
_CMP_NUM = {"=": "equal to", "!=": "not equal to", "<": "less than", "<=": "at most",
            ">": "greater than", ">=": "at least"}
_CMP_PLAIN = {"=": "the same as", "!=": "not the same as", "<": "less than", "<=": "at most",
              ">": "greater than", ">=": "at least"}
_CHECK = {"=": "is", "!=": "is not", "<": "is less than", "<=": "is at most", ">": "is greater than",
          ">=": "is at least"}
_CHECK_DATE = {"=": "is", "!=": "is not", "<": "is before", "<=": "is on or before", ">": "is after",
               ">=": "is on or after"}
_ORDINALS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"]


def _kind(expr: Expr) -> str:
    """``date``, ``number`` or ``plain``: how a cast (if any) says to read an operand."""
    if isinstance(expr, Call):
        if expr.op in _DATE_CASTS:
            return "date"
        if expr.op in _NUMBER_CASTS:
            return "number"
    if isinstance(expr, Literal) and expr.datatype:
        if expr.datatype in _DATE_CASTS:
            return "date"
        if expr.datatype in _NUMBER_CASTS:
            return "number"
    return "plain"


def _operand(expr: Expr) -> str | None:
    if isinstance(expr, Var):
        return f"?{expr.name}"
    if isinstance(expr, Iri):
        return expr.local
    if isinstance(expr, Literal):
        return expr.value
    if isinstance(expr, Call) and len(expr.args) == 1:
        inner = _operand(expr.args[0])
        if inner is None:
            return None
        if expr.op in _DATE_CASTS | _NUMBER_CASTS or expr.op == "str":
            return f"the year of {inner}" if expr.op == "year" else inner
        if expr.op in ("lcase", "ucase"):
            return inner
        if expr.op == "lang":
            return f"the language of {inner}"
    if isinstance(expr, Call) and len(expr.args) == 2 and expr.op in ("-", "+"):
        a, b = (_operand(x) for x in expr.args)
        if a is None or b is None:
            return None
        if expr.op == "-" and _kind(expr.args[0]) == "date":
            return f"the time from {b} to {a}"
        return f"{a} {'minus' if expr.op == '-' else 'plus'} {b}"
    return None


def _time_part(expr: Expr, fb: FreebaseSchema) -> tuple[str, str, str] | None:
    """``NOT EXISTS {K r ?a} || EXISTS {K r ?b . FILTER(?b op ?value)}`` -> (K, r, op)."""
    if isinstance(expr, Call) and expr.op == "||" and len(expr.args) == 2:
        neg, pos = expr.args
        if isinstance(neg, Exists) and isinstance(pos, Exists) and neg.negated and not pos.negated:
            return _time_part(pos, fb)
    if isinstance(expr, Exists) and not expr.negated:
        triples = expr.pattern.triples
        if len(triples) == 1 and len(expr.pattern.filters) == 1 and isinstance(triples[0].p, Iri):
            t, f = triples[0], expr.pattern.filters[0]
            if (isinstance(t.s, Var) and isinstance(f, Call) and f.op in _CMP_DATE and len(f.args) == 2):
                left = f.args[0].args[0] if isinstance(f.args[0], Call) and f.args[0].args else f.args[0]
                if left == t.o:
                    return (f"?{t.s.name}", pred(t), f.op)
    return None


def _time_parts(expr: Expr, fb: FreebaseSchema) -> list[tuple[str, str, str]] | None:
    if isinstance(expr, Call) and expr.op == "&&":
        parts = [_time_parts(a, fb) for a in expr.args]
        out: list[tuple[str, str, str]] = []
        for p in parts:
            if p is None:
                return None
            out.extend(p)
        return out
    one = _time_part(expr, fb)
    return [one] if one else None


def _verbalise(expr: Expr, fb: FreebaseSchema) -> str | None:
    """A generic reading of any filter expression, or None when a part has none."""
    if isinstance(expr, Call):
        if expr.op in ("&&", "||"):
            parts = [_verbalise(a, fb) for a in expr.args]
            texts = [p for p in parts if p is not None]
            if len(texts) != len(parts):
                return None
            return (" and " if expr.op == "&&" else " or ").join(texts)
        if expr.op == "!" and len(expr.args) == 1:
            inner = _verbalise(expr.args[0], fb)
            return None if inner is None else f"not ({inner})"
        if expr.op in _CMP_PLAIN and len(expr.args) == 2:
            a, b = (_operand(x) for x in expr.args)
            if a is None or b is None:
                return None
            kind = _kind(expr.args[0]) if _kind(expr.args[0]) != "plain" else _kind(expr.args[1])
            table = {"date": _CMP_DATE, "number": _CMP_NUM}.get(kind, _CMP_PLAIN)
            return f"{a} is {table[expr.op]} {b}"
        if expr.op == "isliteral" and len(expr.args) == 1 and _operand(expr.args[0]):
            return f"{_operand(expr.args[0])} is a literal"
        if expr.op in ("langmatches",) and len(expr.args) == 2:
            return "the language is English"
        if expr.op in ("contains", "strstarts", "strends", "regex") and len(expr.args) >= 2:
            a, b = _operand(expr.args[0]), _operand(expr.args[1])
            verb = {"contains": "contains", "strstarts": "starts with", "strends": "ends with",
                    "regex": "matches"}[expr.op]
            return None if a is None or b is None else f"{a} {verb} {b}"
        return None
    if isinstance(expr, Exists):
        triples = expr.pattern.triples
        if len(triples) == 1 and isinstance(triples[0].p, Iri) and not expr.pattern.filters:
            t = triples[0]
            subject = _operand(t.s)
            if subject is None:
                return None
            return f"{subject} has {'no' if expr.negated else 'a'} {fb.label(pred(t))}"
        return None
    return _operand(expr)


def describe_filter(filters: tuple[Expr, ...], fb: FreebaseSchema) -> tuple[dict[str, str], bool]:
    """Descriptions of a filter statement: ``({"primary", "alternate"}, fully_read)``."""
    if len(filters) != 1:
        return {}, False
    expr = filters[0]
    parts = _time_parts(expr, fb)
    if parts:
        subject = parts[0][0]
        ctype = fb.type_name(fb.domain(parts[0][1]))
        conds = " and ".join(f"{fb.label(rel)} {_CMP_DATE[op]} ?value" for _, rel, op in parts)
        return {
            "primary": f"the {ctype} {subject} was valid at time ?value, with its {conds}",
            "alternate": f"make sure the {ctype} {subject} has {conds} (or none recorded)",
        }, True
    if isinstance(expr, Call) and expr.op in _CHECK and len(expr.args) == 2:
        a, b = (_operand(x) for x in expr.args)
        if a is not None and b is not None:
            kind = _kind(expr.args[0]) if _kind(expr.args[0]) != "plain" else _kind(expr.args[1])
            table = {"date": _CMP_DATE, "number": _CMP_NUM}.get(kind, _CMP_PLAIN)
            check = _CHECK_DATE if kind == "date" else _CHECK
            return {"primary": f"{a} is {table[expr.op]} {b}",
                    "alternate": f"make sure {a} {check[expr.op]} {b}"}, True
    text = _verbalise(expr, fb)
    if text is None:
        return {}, False
    return {"primary": f"keep only results where {text}", "alternate": f"make sure {text}"}, True


def describe_order(query: Query) -> tuple[dict[str, str], bool]:
    """Descriptions of an order statement: ``({"primary", "alternate"}, fully_read)``."""
    if not query.order_by:
        return {}, False
    keys, supers = [], []
    for key in query.order_by:
        name = _operand(key.expr)
        if name is None:
            return {}, False
        kind = _kind(key.expr)
        keys.append(f"{name}{' as a date' if kind == 'date' else ' as a number' if kind == 'number' else ''}"
                    f" in {'descending' if key.descending else 'ascending'} order")
        supers.append({("date", True): "latest", ("date", False): "earliest", ("number", True): "largest",
                       ("number", False): "smallest", ("plain", True): "highest", ("plain", False): "lowest"}
                      [(kind, key.descending)])
    limit, offset = query.limit, query.offset or 0
    if limit is None:
        keep, take = "keep all results", "keep all of them"
    elif limit == 1:
        nth = _ORDINALS[offset] if offset < len(_ORDINALS) else f"{offset + 1}th"
        keep = f"keep the {nth} result"
        take = f"take the {supers[0]}" if offset == 0 else f"take the {nth} {supers[0]}"
    else:
        skip = f"skip the first {offset} and " if offset else ""
        keep = f"{skip}keep the first {limit} results"
        take = f"{skip}take the {limit} {supers[0]}"
    return {
        "primary": f"sort by {' then by '.join(keys)} and {keep}",
        "alternate": f"rank the results by {_operand(query.order_by[0].expr)} and {take}",
    }, True
