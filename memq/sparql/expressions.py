"""The expression grammar of SPARQL: FILTER, BIND, HAVING and ORDER BY expressions.

Operators by precedence (``||``, ``&&``, relational and ``IN``, additive,
multiplicative, unary), function calls (built-ins, aggregates, IRI-named casts)
and ``EXISTS``. Virtuoso's ``OR`` / ``AND`` read as ``||`` / ``&&`` and
``xsd:datetime`` (any case) as the cast ``xsd:dateTime``. The graph pattern of
an ``EXISTS`` is read by :meth:`ExpressionParser.group`, which the query
grammar (:mod:`memq.sparql.parser`) supplies.
"""

from __future__ import annotations

from .model import Call, Exists, Expr, Group, Var
from .terms import XSD_DATETIME, TermReader

AGGREGATES = {"COUNT", "SUM", "MIN", "MAX", "AVG", "SAMPLE", "GROUP_CONCAT"}
BUILTINS = {
    "str", "lang", "langmatches", "datatype", "bound", "iri", "uri", "bnode", "rand", "abs", "ceil", "floor",
    "round", "concat", "strlen", "ucase", "lcase", "encode_for_uri", "contains", "strstarts", "strends",
    "strbefore", "strafter", "year", "month", "day", "hours", "minutes", "seconds", "timezone", "tz", "now",
    "uuid", "struuid", "md5", "sha1", "sha256", "sha384", "sha512", "coalesce", "if", "strlang", "strdt",
    "sameterm", "isiri", "isuri", "isblank", "isliteral", "isnumeric", "regex", "substr", "replace",
}
_RELATIONAL = {"=", "!=", "<", "<=", ">", ">="}


class ExpressionParser(TermReader):
    """Expressions over the terms of :class:`~memq.sparql.terms.TermReader`."""

    def group(self) -> Group:  # pragma: no cover - supplied by the query grammar
        raise NotImplementedError

    def is_builtin(self) -> bool:
        tok = self.peek()
        if tok.kind == "word":
            word = tok.text.lower()
            return word in BUILTINS or word in ("exists", "not") or tok.text.upper() in AGGREGATES
        return tok.kind in ("iri", "pname") and self.peek(1).kind == "op" and self.peek(1).text == "("

    def constraint(self) -> Expr:
        if self.is_op("("):
            self.next()
            expr = self.expression()
            self.expect_op(")")
            return expr
        if self.is_builtin():
            return self.primary()
        raise self.error("expected '(' or a function call")

    def constraint_or_var(self) -> Expr:
        if self.peek().kind == "var":
            return Var(self.next().text[1:])
        return self.constraint()

    def expression(self) -> Expr:
        left = self.and_expr()
        while self.is_op("||") or self.is_word("OR"):
            self.next()
            left = Call("||", (left, self.and_expr()))
        return left

    def and_expr(self) -> Expr:
        left = self.relational()
        while self.is_op("&&") or self.is_word("AND"):
            self.next()
            left = Call("&&", (left, self.relational()))
        return left

    def relational(self) -> Expr:
        left = self.additive()
        tok = self.peek()
        if tok.kind == "op" and tok.text in _RELATIONAL:
            self.next()
            return Call(tok.text, (left, self.additive()))
        if self.is_word("IN") or (self.is_word("NOT") and self.is_word("IN", ahead=1)):
            op = "in"
            if self.next().text.upper() == "NOT":
                self.next()
                op = "notin"
            self.expect_op("(")
            items: list[Expr] = [left]
            while not self.is_op(")"):
                items.append(self.expression())
                if self.is_op(","):
                    self.next()
            self.expect_op(")")
            return Call(op, tuple(items))
        return left

    def additive(self) -> Expr:
        left = self.multiplicative()
        while self.is_op("+", "-"):
            op = self.next().text
            left = Call(op, (left, self.multiplicative()))
        return left

    def multiplicative(self) -> Expr:
        left = self.unary()
        while self.is_op("*", "/"):
            op = self.next().text
            left = Call(op, (left, self.unary()))
        return left

    def unary(self) -> Expr:
        if self.is_op("!"):
            self.next()
            return Call("!", (self.unary(),))
        if self.is_op("-") and self.peek(1).kind != "number":
            self.next()
            return Call("neg", (self.unary(),))
        if self.is_op("+") and self.peek(1).kind != "number":
            self.next()
            return self.unary()
        return self.primary()

    def args(self) -> tuple[Expr, ...]:
        self.expect_op("(")
        out: list[Expr] = []
        while not self.is_op(")"):
            out.append(self.expression())
            if self.is_op(","):
                self.next()
            elif not self.is_op(")"):
                raise self.error("expected ',' or ')'")
        self.expect_op(")")
        return tuple(out)

    def aggregate(self, *, bare_ok: bool = False) -> Call:
        name = self.next().text.upper()
        if bare_ok and not self.is_op("("):
            distinct = False
            if self.is_word("DISTINCT"):
                self.next()
                distinct = True
            var = self.next()
            if var.kind != "var":
                raise self.error(f"expected a variable after {name}", var)
            return Call(name, (Var(var.text[1:]),), distinct=distinct)
        self.expect_op("(")
        distinct = False
        if self.is_word("DISTINCT"):
            self.next()
            distinct = True
        if self.is_op("*"):
            self.next()
            self.expect_op(")")
            return Call(name, (), distinct=distinct, star=True)
        expr = self.expression()
        if name == "GROUP_CONCAT" and self.is_op(";"):
            raise self.error("GROUP_CONCAT separators are not supported")
        self.expect_op(")")
        return Call(name, (expr,), distinct=distinct)

    def primary(self) -> Expr:
        tok = self.peek()
        if tok.kind == "op" and tok.text == "(":
            self.next()
            expr = self.expression()
            self.expect_op(")")
            return expr
        if tok.kind == "word":
            upper = tok.text.upper()
            if upper == "NOT" and self.is_word("EXISTS", ahead=1):
                self.next()
                self.next()
                return Exists(self.group(), negated=True)
            if upper == "EXISTS":
                self.next()
                return Exists(self.group())
            if upper in AGGREGATES:
                return self.aggregate()
            if tok.text.lower() in BUILTINS:
                self.next()
                return Call(tok.text.lower(), self.args())
        if tok.kind in ("iri", "pname") and self.peek(1).kind == "op" and self.peek(1).text == "(":
            self.next()
            iri = self.iri_of(tok)
            if iri.lower() == XSD_DATETIME.lower():
                iri = XSD_DATETIME
            return Call(iri, self.args())
        return self.term()


def has_aggregate(expr: Expr) -> bool:
    if isinstance(expr, Call):
        return expr.op in AGGREGATES or any(has_aggregate(a) for a in expr.args)
    return False

