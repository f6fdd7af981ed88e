"""The token cursor and the terms of SPARQL: variables, IRIs, prefixed names, literals, numbers.

:class:`TermReader` is the base of the two grammars built on it, the
expression grammar (:mod:`memq.sparql.expressions`) and the query and
graph-pattern grammar (:mod:`memq.sparql.parser`). It reads the tokens of
:func:`memq.sparql.lexer.tokenize` one by one and reports errors with the
line and column of the token at fault.
"""

from __future__ import annotations

from ..errors import SparqlParseError
from .lexer import Token, line_col, tokenize
from .model import FB, RDF, RDFS, XSD, Iri, Literal, Term, Var

DEFAULT_PREFIXES = {"ns": FB, "xsd": XSD, "rdf": RDF, "rdfs": RDFS, "fb": FB}
XSD_DATETIME = XSD + "dateTime"


class TermReader:
    """A cursor over one query's tokens, with the prefixes declared so far."""

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
        found = ("end of query" if tok.kind == "eof"
                 else repr(tok.text if len(tok.text) <= 60 else tok.text[:60] + "..."))
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
            if datatype.lower() == XSD_DATETIME.lower():
                datatype = XSD_DATETIME
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
