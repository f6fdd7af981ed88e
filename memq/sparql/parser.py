"""Recursive-descent parser: SPARQL SELECT text -> :class:`~memq.sparql.model.Query`.

It reads standard SPARQL 1.1 SELECT queries and the Virtuoso dialect of the
WebQSP / CWQ gold queries, rewriting the dialect while it parses:

* ``OR`` / ``AND`` are the operators ``||`` / ``&&``;
* ``xsd:datetime`` (any case) is the cast ``xsd:dateTime``;
* ``SELECT COUNT DISTINCT ?x`` / ``SELECT COUNT(?x)`` without ``AS`` get an
  ``AS ?count`` alias.

Why not rdflib's parser? It takes ~13 ms a query here, ~8 minutes for the
39,202 gold queries; this one takes well under a millisecond. rdflib and
pyoxigraph stay the reference: the test-suite checks that both accept every
query that :func:`memq.sparql.to_standard` writes.
"""

from __future__ import annotations

from functools import lru_cache

from ..errors import SparqlParseError
from .lexer import Token, line_col, tokenize
from .model import (
    FB,
    RDF,
    RDFS,
    XSD,
    Bind,
    Call,
    Exists,
    Expr,
    Group,
    Iri,
    Literal,
    OrderKey,
    Projection,
    Query,
    Term,
    Triple,
    Values,
    Var,
)

DEFAULT_PREFIXES = {"ns": FB, "xsd": XSD, "rdf": RDF, "rdfs": RDFS, "fb": FB}

AGGREGATES = {"COUNT", "SUM", "MIN", "MAX", "AVG", "SAMPLE", "GROUP_CONCAT"}
BUILTINS = {
    "str", "lang", "langmatches", "datatype", "bound", "iri", "uri", "bnode", "rand", "abs", "ceil", "floor",
    "round", "concat", "strlen", "ucase", "lcase", "encode_for_uri", "contains", "strstarts", "strends",
    "strbefore", "strafter", "year", "month", "day", "hours", "minutes", "seconds", "timezone", "tz", "now",
    "uuid", "struuid", "md5", "sha1", "sha256", "sha384", "sha512", "coalesce", "if", "strlang", "strdt",
    "sameterm", "isiri", "isuri", "isblank", "isliteral", "isnumeric", "regex", "substr", "replace",
}
_RELATIONAL = {"=", "!=", "<", "<=", ">", ">="}
_XSD_DATETIME = XSD + "dateTime"


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = tokenize(text)
        self.i = 0
        self.prefixes = dict(DEFAULT_PREFIXES)
        self.declared: list[tuple[str, str]] = []
        self.anon = 0  # blank nodes ``[]`` become fresh variables ?_anonN

    # -- token helpers -------------------------------------------------
    def peek(self, ahead: int = 0) -> Token:
        return self.toks[min(self.i + ahead, len(self.toks) - 1)]

    def next(self) -> Token:
        tok = self.toks[self.i]
        if tok.kind != "eof":
            self.i += 1
        return tok

    def error(self, message: str, tok: Token | None = None) -> SparqlParseError:
        tok = tok or self.peek()
        line, col = line_col(self.text, tok.pos)
        found = "end of query" if tok.kind == "eof" else repr(tok.text)
        return SparqlParseError(f"{message}, found {found}", query=self.text, line=line, column=col)

    def is_word(self, *words: str, ahead: int = 0) -> bool:
        tok = self.peek(ahead)
        return tok.kind == "word" and tok.text.upper() in words

    def is_op(self, *ops: str) -> bool:
        tok = self.peek()
        return tok.kind == "op" and tok.text in ops

    def expect_op(self, op: str) -> Token:
        if not self.is_op(op):
            raise self.error(f"expected {op!r}")
        return self.next()

    def expect_word(self, word: str) -> Token:
        if not self.is_word(word):
            raise self.error(f"expected {word}")
        return self.next()

    # -- terms ---------------------------------------------------------
    def iri_of(self, tok: Token) -> str:
        if tok.kind == "iri":
            return tok.text[1:-1]
        prefix, _, local = tok.text.partition(":")
        if prefix not in self.prefixes:
            raise self.error(f"undeclared prefix {prefix + ':'!r}", tok)
        return self.prefixes[prefix] + local

    def literal(self) -> Literal:
        tok = self.next()
        raw = tok.text
        quote = 3 if raw[:3] in ('"""', "'''") else 1
        value = _unescape(raw[quote:-quote])
        if self.peek().kind == "lang":
            return Literal(value, lang=self.next().text[1:].lower())
        if self.is_op("^^"):
            self.next()
            dt = self.next()
            if dt.kind not in ("iri", "pname"):
                raise self.error("expected a datatype IRI after '^^'", dt)
            datatype = self.iri_of(dt)
            if datatype.lower() == _XSD_DATETIME.lower():
                datatype = _XSD_DATETIME
            return Literal(value, datatype=datatype)
        return Literal(value)

    def number(self) -> Literal:
        text = self.next().text
        if "e" in text or "E" in text:
            return Literal(text, datatype=XSD + "double")
        if "." in text:
            return Literal(text, datatype=XSD + "decimal")
        return Literal(text, datatype=XSD + "integer")

    def term(self, *, allow_literal: bool = True) -> Term:
        tok = self.peek()
        if tok.kind == "var":
            self.next()
            return Var(tok.text[1:])
        if tok.kind in ("iri", "pname"):
            self.next()
            return Iri(self.iri_of(tok))
        if tok.kind == "op" and tok.text == "[" and self.peek(1).kind == "op" and self.peek(1).text == "]":
            self.next()
            self.next()
            self.anon += 1
            return Var(f"_anon{self.anon}")
        if tok.kind == "word" and tok.text == "a":
            self.next()
            return Iri(RDF + "type")
        if allow_literal:
            if tok.kind == "string":
                return self.literal()
            if tok.kind == "number":
                return self.number()
            if tok.kind == "op" and tok.text in "+-" and self.peek(1).kind == "number":
                self.next()
                lit = self.number()
                return Literal(tok.text + lit.value if tok.text == "-" else lit.value, datatype=lit.datatype)
            if tok.kind == "word" and tok.text.lower() in ("true", "false"):
                self.next()
                return Literal(tok.text.lower(), datatype=XSD + "boolean")
        raise self.error("expected a variable, IRI or literal")

    # -- query ---------------------------------------------------------
    def prologue(self) -> None:
        while True:
            if self.is_word("PREFIX"):
                self.next()
                name = self.next()
                if name.kind != "pname" or not name.text.endswith(":"):
                    raise self.error("expected a prefix name such as 'ns:'", name)
                iri = self.next()
                if iri.kind != "iri":
                    raise self.error("expected an IRI in <...>", iri)
                self.prefixes[name.text[:-1]] = iri.text[1:-1]
                self.declared.append((name.text[:-1], iri.text[1:-1]))
            elif self.is_word("BASE"):
                self.next()
                if self.next().kind != "iri":
                    raise self.error("expected an IRI after BASE")
            else:
                return

    def query(self) -> Query:
        self.prologue()
        q = self.select()
        if self.peek().kind != "eof":
            raise self.error("unexpected text after the end of the query")
        return q

    def select(self) -> Query:
        self.expect_word("SELECT")
        distinct = reduced = False
        if self.is_word("DISTINCT"):
            self.next()
            distinct = True
        elif self.is_word("REDUCED"):
            self.next()
            reduced = True
        projection: list[Projection] = []
        star = False
        while True:
            tok = self.peek()
            if tok.kind == "var":
                self.next()
                projection.append(Projection(Var(tok.text[1:])))
            elif self.is_op("*") and not projection and not star:
                self.next()
                star = True
            elif self.is_op("("):
                self.next()
                expr = self.expression()
                self.expect_word("AS")
                var = self.next()
                if var.kind != "var":
                    raise self.error("expected a variable after AS", var)
                self.expect_op(")")
                projection.append(Projection(Var(var.text[1:]), expr))
            elif tok.kind == "word" and tok.text.upper() in AGGREGATES:
                # Virtuoso: SELECT COUNT DISTINCT ?x / SELECT COUNT(?x) with no alias.
                expr = self.aggregate(bare_ok=True)
                alias = Var("count" if expr.op == "COUNT" else expr.op.lower())
                if self.is_word("AS"):
                    self.next()
                    var = self.next()
                    if var.kind != "var":
                        raise self.error("expected a variable after AS", var)
                    alias = Var(var.text[1:])
                projection.append(Projection(alias, expr))
            else:
                break
        if not projection and not star:
            raise self.error("expected a variable, '*' or an expression to select")
        while self.is_word("FROM"):
            self.next()
            if self.is_word("NAMED"):
                self.next()
            if self.next().kind not in ("iri", "pname"):
                raise self.error("expected an IRI after FROM")
        if self.is_word("WHERE"):
            self.next()
        where = self.group()
        group_by: list[Expr] = []
        having: list[Expr] = []
        order: list[OrderKey] = []
        limit = offset = None
        if self.is_word("GROUP"):
            self.next()
            self.expect_word("BY")
            while self.peek().kind == "var" or self.is_op("(") or self.is_builtin():
                group_by.append(self.constraint_or_var())
        if self.is_word("HAVING"):
            self.next()
            if self.is_op("(") or not self.is_builtin():
                while self.is_op("(") or self.is_builtin():
                    having.append(self.constraint())
            else:  # Virtuoso: HAVING COUNT(?x) = 2, with no brackets
                having.append(self.expression())
            if not having:
                raise self.error("expected a condition after HAVING")
        if self.is_word("ORDER"):
            self.next()
            self.expect_word("BY")
            while True:
                if self.is_word("ASC", "DESC"):
                    desc = self.next().text.upper() == "DESC"
                    self.expect_op("(")
                    expr = self.expression()
                    self.expect_op(")")
                    order.append(OrderKey(expr, desc))
                elif self.peek().kind == "var" or self.is_op("(") or self.is_builtin():
                    order.append(OrderKey(self.constraint_or_var()))
                else:
                    break
            if not order:
                raise self.error("expected a sort key after ORDER BY")
        for _ in range(2):
            if self.is_word("LIMIT") and limit is None:
                self.next()
                limit = self.integer()
            elif self.is_word("OFFSET") and offset is None:
                self.next()
                offset = self.integer()
        if not group_by and any(p.expr is not None and _has_aggregate(p.expr) for p in projection):
            # Virtuoso groups by the plain projected variables when GROUP BY is left out.
            group_by = [p.var for p in projection if p.expr is None]
        return Query(
            where=where, projection=tuple(projection), distinct=distinct, reduced=reduced,
            group_by=tuple(group_by), having=tuple(having), order_by=tuple(order), limit=limit,
            offset=offset, prefixes=tuple(self.declared),
        )

    def integer(self) -> int:
        tok = self.next()
        if tok.kind != "number" or not tok.text.isdigit():
            raise self.error("expected a non-negative integer", tok)
        return int(tok.text)

    # -- graph patterns ------------------------------------------------
    def group(self) -> Group:
        self.expect_op("{")
        if self.is_word("SELECT"):
            sub = self.select()
            self.expect_op("}")
            return Group(subqueries=(sub,))
        triples: list[Triple] = []
        unions: list[tuple[Group, ...]] = []
        filters: list[Expr] = []
        optionals: list[Group] = []
        minus: list[Group] = []
        binds: list[Bind] = []
        values: list[Values] = []
        while not self.is_op("}"):
            tok = self.peek()
            if tok.kind == "eof":
                raise self.error("expected '}'")
            if self.is_op("{"):
                alts = [self.group()]
                while self.is_word("UNION"):
                    self.next()
                    alts.append(self.group())
                unions.append(tuple(alts))
            elif self.is_word("FILTER"):
                self.next()
                filters.append(self.constraint())
            elif self.is_word("OPTIONAL"):
                self.next()
                optionals.append(self.group())
            elif self.is_word("MINUS"):
                self.next()
                minus.append(self.group())
            elif self.is_word("BIND"):
                self.next()
                self.expect_op("(")
                expr = self.expression()
                self.expect_word("AS")
                var = self.next()
                if var.kind != "var":
                    raise self.error("expected a variable after AS", var)
                self.expect_op(")")
                binds.append(Bind(expr, Var(var.text[1:])))
            elif self.is_word("VALUES"):
                self.next()
                values.append(self.values())
            elif self.is_op("."):
                self.next()
            else:
                self.triples_same_subject(triples)
                if not (self.is_op(".") or self.is_op("}") or self.is_op("{") or self.is_word(
                        "FILTER", "OPTIONAL", "MINUS", "BIND", "VALUES")):
                    raise self.error("expected '.' or '}' after a triple")
        self.expect_op("}")
        return Group(tuple(triples), tuple(unions), tuple(filters), tuple(optionals), tuple(minus), (),
                     tuple(binds), tuple(values))

    def values(self) -> Values:
        vars_: list[Var] = []
        if self.peek().kind == "var":
            vars_.append(Var(self.next().text[1:]))
            single = True
        else:
            single = False
            self.expect_op("(")
            while self.peek().kind == "var":
                vars_.append(Var(self.next().text[1:]))
            self.expect_op(")")
        self.expect_op("{")
        rows: list[tuple[Term | None, ...]] = []
        while not self.is_op("}"):
            if single:
                rows.append((self.value_term(),))
            else:
                self.expect_op("(")
                row = []
                while not self.is_op(")"):
                    row.append(self.value_term())
                self.expect_op(")")
                if len(row) != len(vars_):
                    raise self.error(f"VALUES row has {len(row)} terms for {len(vars_)} variables")
                rows.append(tuple(row))
        self.expect_op("}")
        return Values(tuple(vars_), tuple(rows))

    def value_term(self) -> Term | None:
        if self.is_word("UNDEF"):
            self.next()
            return None
        return self.term()

    def triples_same_subject(self, out: list[Triple]) -> None:
        subject = self.term()
        while True:
            pred = self.term(allow_literal=False)
            while True:
                out.append(Triple(subject, pred, self.term()))
                if not self.is_op(","):
                    break
                self.next()
            if not self.is_op(";"):
                return
            while self.is_op(";"):
                self.next()
            if self.is_op(".") or self.is_op("}"):
                return

    # -- expressions ---------------------------------------------------
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
            if iri.lower() == _XSD_DATETIME.lower():
                iri = _XSD_DATETIME
            return Call(iri, self.args())
        return self.term()


def _has_aggregate(expr: Expr) -> bool:
    if isinstance(expr, Call):
        return expr.op in AGGREGATES or any(_has_aggregate(a) for a in expr.args)
    return False


def _unescape(body: str) -> str:
    if "\\" not in body:
        return body
    out, i = [], 0
    table = {"t": "\t", "n": "\n", "r": "\r", "b": "\b", "f": "\f", '"': '"', "'": "'", "\\": "\\"}
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in table:
                out.append(table[nxt])
                i += 2
                continue
            if nxt in "uU":
                width = 4 if nxt == "u" else 8
                try:
                    out.append(chr(int(body[i + 2:i + 2 + width], 16)))
                    i += 2 + width
                    continue
                except ValueError:
                    pass
        out.append(ch)
        i += 1
    return "".join(out)


@lru_cache(maxsize=4096)
def parse_query(text: str) -> Query:
    """Parse a SELECT query (standard SPARQL 1.1 or the Virtuoso gold-query dialect).

    Raises :class:`~memq.errors.SparqlParseError` naming the line and column.
    """
    if not isinstance(text, str):
        raise SparqlParseError(f"query must be a string, got {type(text).__name__}")
    try:
        return _Parser(text).query()
    except RecursionError:
        raise SparqlParseError("query is nested too deeply", query=text) from None
