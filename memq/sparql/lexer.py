"""Tokenizer for SPARQL SELECT queries, Virtuoso dialect included.

One compiled regular expression does the work; every token keeps its offset so
that parse errors can say where they happened.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import SparqlParseError

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+|\#[^\n]*)
  | (?P<iri><[^<>"{}|^`\\\x00-\x20]*>)
  | (?P<string>\"\"\"(?:[^"\\]|\\.|"(?!""))*\"\"\"|'''(?:[^'\\]|\\.|'(?!''))*'''
               |"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<var>[?$][A-Za-z0-9_\u00b7\u00c0-\uffff]+)
  | (?P<lang>@[A-Za-z]+(?:-[A-Za-z0-9]+)*)
  | (?P<number>(?:\d*\.\d+|\d+)(?:[eE][+-]?\d+)?)
  | (?P<pname>(?:[A-Za-z][\w\-]*)?:(?:[\w\-%]|\.(?=[\w\-%:]))*)
  | (?P<word>[A-Za-z_][\w]*)
  | (?P<op>\|\||&&|!=|<=|>=|\^\^|[=<>!+\-*/(){}.,;\[\]])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # iri, string, var, lang, number, pname, word, op, eof
    text: str
    pos: int


def line_col(text: str, pos: int) -> tuple[int, int]:
    """1-based line and column of offset ``pos`` in ``text``."""
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens; raises :class:`SparqlParseError` on a stray character."""
    if not isinstance(text, str):
        raise SparqlParseError(f"query must be a string, got {type(text).__name__}")
    out: list[Token] = []
    pos, end = 0, len(text)
    match = _TOKEN.match
    while pos < end:
        m = match(text, pos)
        if m is None:
            line, col = line_col(text, pos)
            raise SparqlParseError(f"unexpected character {text[pos]!r}", query=text, line=line, column=col)
        kind = m.lastgroup
        if kind != "ws":
            out.append(Token(kind, m.group(), pos))  # type: ignore[arg-type]
        pos = m.end()
    out.append(Token("eof", "", end))
    return out
