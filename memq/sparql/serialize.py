"""Write the query-graph model back as SPARQL text.

Two styles:

* ``standard``: SPARQL 1.1 with full IRIs and no prefixes, which pyoxigraph,
  rdflib and Virtuoso all accept. Date-only ``xsd:dateTime`` literals, which
  Virtuoso reads as midnight, get an explicit ``T00:00:00``.
* ``readable``: the ``PREFIX ns:`` form of the gold queries, for people and for
  memory statements.
"""

from __future__ import annotations

import re

from .model import FB, XSD, Call, Exists, Expr, Group, Iri, Literal, Query, Term, Triple, Var

_PN_LOCAL = re.compile(r"^[A-Za-z0-9_][\w\-]*(?:\.[\w\-]+)*$")
_DATE_ONLY = re.compile(r"^-?\d{4,}-\d{2}-\d{2}$")
_XSD_DATETIME = XSD + "dateTime"

_BUILTIN_NAMES = {
    "langmatches": "langMatches", "isliteral": "isLiteral", "isiri": "isIRI", "isuri": "isURI",
    "isblank": "isBlank", "isnumeric": "isNumeric", "lang": "lang", "str": "str", "datatype": "datatype",
    "sameterm": "sameTerm", "strlang": "STRLANG", "strdt": "STRDT", "bound": "bound", "regex": "regex",
    "year": "YEAR", "month": "MONTH", "day": "DAY",
}
_BINARY = {"||", "&&", "=", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/"}


class Writer:
    """Serializes model objects in one style (``standard`` or ``readable``)."""

    def __init__(self, style: str = "standard") -> None:
        if style not in ("standard", "readable"):
            raise ValueError(f"unknown SPARQL style {style!r}; expected 'standard' or 'readable'")
        self.readable = style == "readable"

    # -- terms -----------------------------------------------------------
    def iri(self, value: str) -> str:
        if self.readable:
            if value.startswith(FB) and _PN_LOCAL.match(value[len(FB):]):
                return "ns:" + value[len(FB):]
            if value.startswith(XSD) and _PN_LOCAL.match(value[len(XSD):]):
                return "xsd:" + value[len(XSD):]
        return f"<{value}>"

    def literal(self, lit: Literal) -> str:
        value = lit.value
        if not self.readable and lit.datatype == _XSD_DATETIME and _DATE_ONLY.match(value):
            value += "T00:00:00"
        body = '"' + _escape(value) + '"'
        if lit.lang:
            return f"{body}@{lit.lang}"
        if lit.datatype:
            return f"{body}^^{self.iri(lit.datatype)}"
        return body

    def term(self, term: Term) -> str:
        if isinstance(term, Var):
            return f"?{term.name}"
        if isinstance(term, Iri):
            return self.iri(term.value)
        return self.literal(term)

    def triple(self, t: Triple) -> str:
        return f"{self.term(t.s)} {self.term(t.p)} {self.term(t.o)} ."

    # -- expressions -----------------------------------------------------
    def expr(self, e: Expr, *, top: bool = False) -> str:
        if isinstance(e, Exists):
            body = " ".join(self.group_lines(e.pattern))
            return ("NOT EXISTS { " if e.negated else "EXISTS { ") + body + " }"
        if not isinstance(e, Call):
            return self.term(e)
        op, args = e.op, e.args
        if op in ("||", "&&") and len(args) == 2:
            # Associative chains are written flat: a || b || c, not ((a || b) || c), which some parsers
            # (rdflib's pyparsing grammar) cannot read at depth. Reading back gives the same left-nested model.
            text = f" {op} ".join(self.expr(a) for a in _chain(e, op))
            return text if top else f"({text})"
        if op in _SAME_LEVEL and len(args) == 2:
            # a - b + c reads back as ((a - b) + c): written flat for the same reason as || and &&
            first, rest = _level_chain(e, _SAME_LEVEL[op])
            text = self.expr(first) + "".join(f" {o} {self.expr(a)}" for o, a in rest)
            return text if top else f"({text})"
        if op in _BINARY and len(args) == 2:
            text = f"{self.expr(args[0])} {op} {self.expr(args[1])}"
            return text if top else f"({text})"
        if op == "!":
            return "!" + self.expr(args[0])
        if op == "neg":
            return "-" + self.expr(args[0])
        if op in ("in", "notin"):
            items = ", ".join(self.expr(a, top=True) for a in args[1:])
            text = f"{self.expr(args[0])} {'IN' if op == 'in' else 'NOT IN'} ({items})"
            return text if top else f"({text})"
        if op.isupper():  # aggregate
            inner = "*" if e.star else ", ".join(self.expr(a, top=True) for a in args)
            return f"{op}({'DISTINCT ' if e.distinct else ''}{inner})"
        name = self.iri(op) if ":" in op else _BUILTIN_NAMES.get(op, op.upper())
        return f"{name}({', '.join(self.expr(a, top=True) for a in args)})"

    # -- patterns and queries -------------------------------------------
    def group_lines(self, g: Group) -> list[str]:
        lines = [self.triple(t) for t in g.triples]
        for union in g.unions:
            lines.append(" UNION ".join(self.braced(alt) for alt in union))
        for opt in g.optionals:
            lines.append("OPTIONAL { " + " ".join(self.group_lines(opt)) + " }")
        for m in g.minus:
            lines.append("MINUS { " + " ".join(self.group_lines(m)) + " }")
        for b in g.binds:
            lines.append(f"BIND({self.expr(b.expr, top=True)} AS ?{b.var.name})")
        for v in g.values:
            head = " ".join(self.term(x) for x in v.vars)
            rows = " ".join("(" + " ".join("UNDEF" if t is None else self.term(t) for t in row) + ")"
                            for row in v.rows)
            lines.append(f"VALUES ({head}) {{ {rows} }}")
        for sub in g.subqueries:
            lines.append("{ " + " ".join(self.select_lines(sub)) + " }")
        for f in g.filters:
            lines.append(f"FILTER({self.expr(f, top=True)})")
        return lines

    def braced(self, g: Group) -> str:
        """``{ ... }`` for a nested group; a group that is only a subquery is written ``{ SELECT ... }``."""
        if g.subqueries and g == Group(subqueries=g.subqueries) and len(g.subqueries) == 1:
            return "{ " + " ".join(self.select_lines(g.subqueries[0])) + " }"
        return "{ " + " ".join(self.group_lines(g)) + " }"

    def select_lines(self, q: Query) -> list[str]:
        head = "SELECT " + ("DISTINCT " if q.distinct else "REDUCED " if q.reduced else "")
        if q.projection:
            cols = [f"?{p.var.name}" if p.expr is None else f"({self.expr(p.expr, top=True)} AS ?{p.var.name})"
                    for p in q.projection]
            head += " ".join(cols)
        else:
            head += "*"
        lines = [head + " WHERE {"]
        lines += ["  " + line for line in self.group_lines(q.where)]
        lines.append("}")
        lines += self.modifier_lines(q)
        return lines

    def modifier_lines(self, q: Query) -> list[str]:
        lines = []
        if q.group_by:
            lines.append("GROUP BY " + " ".join(self.expr(e) if isinstance(e, Var) else f"({self.expr(e, top=True)})"
                                                for e in q.group_by))
        if q.having:
            lines.append("HAVING " + " ".join(f"({self.expr(e, top=True)})" for e in q.having))
        if q.order_by:
            keys = [f"{'DESC' if k.descending else 'ASC'}({self.expr(k.expr, top=True)})" for k in q.order_by]
            lines.append("ORDER BY " + " ".join(keys))
        if q.limit is not None:
            lines.append(f"LIMIT {q.limit}")
        if q.offset is not None:
            lines.append(f"OFFSET {q.offset}")
        return lines

    def query(self, q: Query) -> str:
        lines = []
        if self.readable:
            lines = [f"PREFIX ns: <{FB}>", f"PREFIX xsd: <{XSD}>"]
        return "\n".join(lines + self.select_lines(q)) + "\n"


def _chain(e: Expr, op: str) -> list[Expr]:
    """Operands of a left-nested chain of ``op`` (only left operands are unfolded, so a right-nested
    ``a || (b || c)`` keeps its brackets and reads back unchanged)."""
    out: list[Expr] = []
    while isinstance(e, Call) and e.op == op and len(e.args) == 2:
        out.append(e.args[1])
        e = e.args[0]
    out.append(e)
    return out[::-1]


_SAME_LEVEL = {"+": ("+", "-"), "-": ("+", "-"), "*": ("*", "/"), "/": ("*", "/")}


def _level_chain(e: Expr, ops: tuple[str, ...]) -> tuple[Expr, list[tuple[str, Expr]]]:
    """A left-nested chain of operators of one precedence level (``+ -`` or ``* /``): its first operand and
    the (operator, right operand) pairs after it, in order; right operands are not unfolded."""
    rest: list[tuple[str, Expr]] = []
    while isinstance(e, Call) and e.op in ops and len(e.args) == 2:
        rest.append((e.op, e.args[1]))
        e = e.args[0]
    return e, rest[::-1]


def _escape(value: str) -> str:
    return (value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
            .replace("\r", "\\r").replace("\t", "\\t"))


STANDARD = Writer("standard")
READABLE = Writer("readable")
