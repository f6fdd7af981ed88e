"""Recursive-descent parser: SPARQL SELECT text -> :class:`~memq.sparql.model.Query`.

This module holds the query and graph-pattern grammar (prologue, SELECT,
solution modifiers, groups, UNION, OPTIONAL, MINUS, BIND, VALUES, triples);
it builds on the expression grammar of :mod:`memq.sparql.expressions`, which
builds on the token cursor and terms of :mod:`memq.sparql.terms`.

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
from .expressions import AGGREGATES, ExpressionParser, has_aggregate
from .model import Bind, Expr, Group, OrderKey, Projection, Query, Term, Triple, Values, Var, depth

MAX_DEPTH = 128
"""The deepest query model :func:`parse_query` returns (:func:`~memq.sparql.model.depth`); the deepest gold
query, WebQTest-1127 with a FILTER of 86 alternatives joined by ``||``, has 87 levels."""
MAX_INTEGER = 2**63 - 1


class _Parser(ExpressionParser):
    """The query and graph-pattern grammar, on the expression grammar it inherits."""

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
                var = self.alias()
                self.expect_op(")")
                projection.append(Projection(var, expr))
            elif tok.kind == "word" and tok.text.upper() in AGGREGATES:
                # Virtuoso: SELECT COUNT DISTINCT ?x / SELECT COUNT(?x) with no alias.
                expr = self.aggregate(bare_ok=True)
                alias = Var("count" if expr.op == "COUNT" else expr.op.lower())
                if self.is_word("AS"):
                    alias = self.alias()
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
        if not group_by and any(p.expr is not None and has_aggregate(p.expr) for p in projection):
            # Virtuoso groups by the plain projected variables when GROUP BY is left out.
            group_by = [p.var for p in projection if p.expr is None]
        return Query(
            where=where, projection=tuple(projection), distinct=distinct, reduced=reduced,
            group_by=tuple(group_by), having=tuple(having), order_by=tuple(order), limit=limit,
            offset=offset, prefixes=tuple(self.declared),
        )

    def alias(self) -> Var:
        """``AS ?var``: the variable."""
        self.expect_word("AS")
        var = self.next()
        if var.kind != "var":
            raise self.error("expected a variable after AS", var)
        return Var(var.text[1:])

    def integer(self) -> int:
        """A LIMIT or OFFSET: a non-negative integer that fits the 64 bits the SPARQL engines use."""
        tok = self.next()
        if tok.kind != "number" or not tok.text.isdigit():
            raise self.error("expected a non-negative integer", tok)
        if len(tok.text) > 19 or int(tok.text) > MAX_INTEGER:  # int() of over 4,300 digits raises ValueError
            raise self.error(f"integer over {MAX_INTEGER} (2^63 - 1)", tok)
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
                var = self.alias()
                self.expect_op(")")
                binds.append(Bind(expr, var))
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


@lru_cache(maxsize=4096)
def parse_query(text: str) -> Query:
    """Parse a SELECT query (standard SPARQL 1.1 or the Virtuoso gold-query dialect).

    Raises :class:`~memq.errors.SparqlParseError` naming the line and column.
    """
    if not isinstance(text, str):
        raise SparqlParseError(f"query must be a string, got {type(text).__name__}")
    try:
        query = _Parser(text).query()
    except RecursionError:
        raise SparqlParseError("query is nested too deeply", query=text) from None
    levels = depth(query)
    if levels > MAX_DEPTH:
        # Whatever reads the model recurses on it (writing, comparing, hashing, decomposing): a tree the
        # parser built with loops (a long chain of || or +) could still overflow Python's stack there.
        raise SparqlParseError(f"query is nested too deeply: {levels} levels of groups, brackets, calls and "
                               f"chained operators, at most {MAX_DEPTH}", query=text)
    return query
