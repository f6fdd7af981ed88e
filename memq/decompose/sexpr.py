"""GrailQA's logical forms (s-expressions) -> SPARQL in GrailQA's own query form.

>>> print(to_sparql("(AND architecture.building (lt architecture.building.floors 9^^"
...                 "http://www.w3.org/2001/XMLSchema#integer))"))  # doctest: +NORMALIZE_WHITESPACE
PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
PREFIX : <http://rdf.freebase.com/ns/>
SELECT (?x0 AS ?value) WHERE {
SELECT DISTINCT ?x0  WHERE {
?x0 :type.object.type :architecture.building .
FILTER (?x1 < "9"^^<http://www.w3.org/2001/XMLSchema#integer>)
?x0 :architecture.building.floors ?x1 .
FILTER ( ?x0 != ?x1  )
}
}

The grammar (GrailQA's): ``(AND a b)``, ``(JOIN rel x)``, ``(JOIN (R rel) x)``, ``(COUNT x)`` (outermost only),
``(ARGMAX x rel)`` / ``(ARGMIN x rel)`` where ``rel`` may be a chain ``(JOIN rel1 rel2)`` (``rel1`` may be
``(R rel)``), ``(lt rel value)`` / ``le`` / ``gt`` / ``ge``; atoms are classes (``tv.tv_writer``), entities
(``m.0abc`` / ``g.1abc``) and literals (``1.5^^http://www.w3.org/2001/XMLSchema#float``).

The query is a graph, as GrailQA's gold queries are written: one node per variable (``?x0`` the answer), each
node's class as a ``type.object.type`` triple (``type.*`` classes, the literal ones, left out), ``VALUES`` for
entities and literal constants (dates with GrailQA's ``-08:00`` zone), a ``FILTER`` per comparison, a nested
``SELECT (MAX(?yN) AS ?xN)`` per superlative over its own pattern (renamed ``?y``), the edges, and one filter that
keeps all nodes pairwise distinct. A superlative's chain ``(JOIN r1 r2)`` goes through the node its body already
reaches by ``r1``, if any, as GrailQA's graphs do.

Where the s-expression names no class for a variable node, the gold graph still has one: :func:`infer_classes`
(on by default) gives it the schema's domain or range of its relations (:func:`relation_types`). Nodes are
numbered breadth-first from the answer (:func:`order`); GrailQA's own numbering comes from its graphs and is not
always recoverable from the s-expression.

On the 1,349 bundled real questions the converted query derives the same plan as the gold one for 1,319
(97.8%); 13 more differ only in variable numbers, 15 in a class more specific than the schema's (the gold graph's
``film.film_genre`` where the relation's range is ``media_common.media_genre``), 2 otherwise.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

from memq.schema import freebase_schema

PREFIXES = ("PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> PREFIX rdfs: "
            "<http://www.w3.org/2000/01/rdf-schema#> PREFIX : <http://rdf.freebase.com/ns/> ")
XSD = "http://www.w3.org/2001/XMLSchema#"
COMPARISONS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">="}
EXTREMES = {"ARGMAX": "MAX", "ARGMIN": "MIN"}
TIMEZONE = "-08:00"
"""GrailQA's gold queries write date, gYear and gYearMonth constants with this time zone."""

_SCHEMA_ID = re.compile(r"^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)+$")
_ENTITY = re.compile(r"^[mg]\.[0-9a-z_]+$")
_LITERAL = re.compile(r"^(?P<value>[^\s()^\"]+)\^\^" + re.escape(XSD) + r"(?P<type>[A-Za-z]+)$")
_ZONED = re.compile(r"(Z|[+-]\d\d:\d\d)$")
_TOKEN = re.compile(r"\(|\)|[^\s()]+")

Sexpr = str | tuple  # an atom, or (head, arg, ...)


def parse_sexpr(text: str) -> Sexpr:
    """``(AND a (JOIN r m.x))`` -> ``("AND", "a", ("JOIN", "r", "m.x"))``; ValueError on unbalanced input."""
    tokens = _TOKEN.findall(text)
    if not tokens:
        raise ValueError("empty s-expression")
    pos = 0

    def read() -> Sexpr:
        nonlocal pos
        if pos >= len(tokens):
            raise ValueError(f"s-expression ends early: {text!r}")
        tok = tokens[pos]
        pos += 1
        if tok == ")":
            raise ValueError(f"unexpected ')' at token {pos} of {text!r}")
        if tok != "(":
            return tok
        items: list[Sexpr] = []
        while pos < len(tokens) and tokens[pos] != ")":
            items.append(read())
        if pos >= len(tokens):
            raise ValueError(f"unbalanced '(' in {text!r}")
        pos += 1
        if not items or not isinstance(items[0], str):
            raise ValueError(f"a list without a head in {text!r}")
        return tuple(items)

    tree = read()
    if pos != len(tokens):
        raise ValueError(f"unexpected token {tokens[pos]!r} after the s-expression")
    return tree


@dataclass
class Node:
    """One node of the query graph: a variable (``kind`` ``var``) or a constant (``entity``/``literal``)."""

    kind: str = "var"
    value: str = ""
    classes: list[str] = field(default_factory=list)
    compare: tuple[str, str] | None = None  # (op, literal text) of a FILTER on this node
    extreme: Extreme | None = None  # a superlative on this node's values


@dataclass(frozen=True)
class Extreme:
    """A superlative: ``op`` (MAX/MIN) over the pattern of its s-expression: ``nodes`` and ``edges`` (indices);
    the first ``outer`` classes of node ``at`` (the ARGMAX's own node) come from outside it."""

    op: str
    nodes: frozenset[int]
    edges: frozenset[int]
    at: int
    outer: int


@dataclass
class Graph:
    nodes: list[Node] = field(default_factory=list)
    edges: list[tuple[int, str, int]] = field(default_factory=list)
    count: bool = False

    def add(self, node: Node | None = None) -> int:
        self.nodes.append(node or Node())
        return len(self.nodes) - 1


def literal(atom: str) -> str:
    """``1992^^...#gYear`` -> ``"1992-08:00"^^<...#gYear>`` (GrailQA's gold form)."""
    m = _LITERAL.match(atom)
    if not m:
        raise ValueError(f"bad literal {atom!r}")
    value, kind = m.group("value"), m.group("type")
    if kind in ("date", "gYear", "gYearMonth", "dateTime") and not _ZONED.search(value):
        value += TIMEZONE
    return f'"{value}"^^<{XSD}{kind}>'


def _relation(expr: Sexpr) -> tuple[str, bool]:
    """``rel`` -> (rel, False); ``(R rel)`` -> (rel, True)."""
    if isinstance(expr, tuple):
        if len(expr) == 2 and expr[0] == "R" and isinstance(expr[1], str):
            return _relation(expr[1])[0], True
        raise ValueError(f"expected a relation, got {_show(expr)!r}")
    if not _SCHEMA_ID.match(expr) or _ENTITY.match(expr):
        raise ValueError(f"bad relation {expr!r}")
    return expr, False


def _show(expr: Sexpr) -> str:
    return expr if isinstance(expr, str) else "(" + " ".join(_show(e) for e in expr) + ")"


class _Builder:
    def __init__(self) -> None:
        self.g = Graph()

    def link(self, a: int, rel: Sexpr, b: int) -> None:
        name, reverse = _relation(rel)
        self.g.edges.append((b, name, a) if reverse else (a, name, b))

    def target(self, expr: Sexpr) -> int:
        """A new node for the object of a JOIN: a constant, or a variable constrained by ``expr``."""
        if isinstance(expr, str):
            if _ENTITY.match(expr):
                return self.g.add(Node("entity", expr))
            if "^^" in expr:
                return self.g.add(Node("literal", literal(expr)))
        n = self.g.add()
        self.walk(expr, n)
        return n

    def walk(self, expr: Sexpr, n: int) -> None:
        """Constrain node ``n`` by ``expr``."""
        if isinstance(expr, str):
            if _ENTITY.match(expr) or "^^" in expr or not _SCHEMA_ID.match(expr):
                raise ValueError(f"bad class {expr!r}")
            self.g.nodes[n].classes.append(expr)
            return
        head, args = expr[0], expr[1:]
        if head == "AND" and len(args) == 2:
            self.walk(args[0], n)
            self.walk(args[1], n)
        elif head == "JOIN" and len(args) == 2:
            _relation(args[0])
            self.link(n, args[0], self.target(args[1]))
        elif head in COMPARISONS and len(args) == 2:
            if not isinstance(args[1], str) or "^^" not in args[1]:
                raise ValueError(f"bad comparison value {_show(args[1])!r}")
            v = self.g.add(Node(compare=(COMPARISONS[head], literal(args[1]))))
            self.link(n, args[0], v)
        elif head in EXTREMES and len(args) == 2:
            self.extreme(EXTREMES[head], args[0], args[1], n)
        elif head == "COUNT" and len(args) == 1:
            raise ValueError("COUNT is only allowed as the outermost function")
        else:
            raise ValueError(f"unknown or malformed function {head!r} in {_show(expr)!r}")

    def extreme(self, op: str, body: Sexpr, rel: Sexpr, n: int) -> None:
        first_node, first_edge, outer = len(self.g.nodes), len(self.g.edges), len(self.g.nodes[n].classes)
        self.walk(body, n)
        chain = [rel]
        while isinstance(chain[-1], tuple) and chain[-1][0] == "JOIN" and len(chain[-1]) == 3:
            chain[-1:] = [chain[-1][1], chain[-1][2]]
        at = n
        for i, step in enumerate(chain):
            last = i == len(chain) - 1
            name, reverse = _relation(step)
            reuse = None if last else self.reusable(at, name, reverse, first_edge)
            if reuse is None:
                reuse = self.g.add()
                self.link(at, step, reuse)
            at = reuse
        nodes = frozenset({n, *range(first_node, len(self.g.nodes))})
        self.g.nodes[at].extreme = Extreme(op, nodes, frozenset(range(first_edge, len(self.g.edges))), n, outer)

    def reusable(self, at: int, name: str, reverse: bool, first_edge: int) -> int | None:
        """A variable the superlative's body already reaches from ``at`` by the chain's relation (GrailQA's graph
        shares it: ``(ARGMAX (AND c (JOIN (R r) x)) (JOIN (R r) r2))``)."""
        for s, rel, o in self.g.edges[first_edge:]:
            other = s if reverse else o
            if rel == name and (o if reverse else s) == at and self.g.nodes[other].kind == "var":
                return other
        return None


def build_graph(s_expression: str | Sexpr) -> Graph:
    """The query graph of an s-expression (node 0 the answer); ValueError naming the bad token."""
    tree = parse_sexpr(s_expression) if isinstance(s_expression, str) else s_expression
    b = _Builder()
    answer = b.g.add()
    if isinstance(tree, tuple) and tree[0] == "COUNT":
        if len(tree) != 2:
            raise ValueError(f"malformed COUNT in {_show(tree)!r}")
        b.g.count = True
        tree = tree[1]
    if isinstance(tree, str) and (_ENTITY.match(tree) or "^^" in tree):
        raise ValueError(f"an s-expression of a constant alone: {tree!r}")
    b.walk(tree, answer)
    return b.g


def infer_classes(g: Graph) -> None:
    """Give each variable node without a class (and no comparison or superlative on it) the class the schema gives
    the edges that touch it (a relation's range at its object, its domain at its subject); where they differ, the
    most specific one (the type fewest relations of the schema touch), else the edge from the answer's side.
    GrailQA's graphs type their nodes so in 30 of the 30 bundled questions where the two differ."""
    types, touching = relation_types()
    for i, first in {0: None, **parents(g)}.items():
        node = g.nodes[i]
        if node.kind != "var" or node.classes or node.compare or node.extreme:
            continue
        edges = [k for k, _ in sorted(_neighbours(g, i), key=lambda e: e[0] != first)]
        found = [types.get(g.edges[k][1], ("", ""))[1 if g.edges[k][2] == i else 0] for k in edges]
        found = [c for c in found if c and not c.startswith("type.")]
        if found:
            node.classes.append(min(found, key=lambda c: touching.get(c, 0)))


@lru_cache(maxsize=1)
def relation_types() -> tuple[dict[str, tuple[str, str]], dict[str, int]]:
    """relation -> (domain, range) from the bundled schema (:func:`memq.schema.freebase_schema`), and how many
    relations have each type as domain or range."""
    types = {rel: (r.domain, r.range) for rel, r in freebase_schema().relations.items()}
    touching: Counter[str] = Counter()
    for domain, range_ in types.values():
        touching[domain] += 1
        touching[range_] += 1
    return types, dict(touching)


def _neighbours(g: Graph, at: int) -> list[tuple[int, int]]:
    """(edge index, other end) of the edges at ``at``: those to a superlative's value first (GrailQA numbers that
    node before its siblings), then in the order the s-expression makes them."""
    out = [(k, o if s == at else s) for k, (s, _, o) in enumerate(g.edges) if at in (s, o)]
    return sorted(out, key=lambda e: g.nodes[e[1]].extreme is None)


def parents(g: Graph) -> dict[int, int]:
    """For each node but the answer, the index of the edge by which :func:`order`'s walk reaches it."""
    out: dict[int, int] = {}
    queue = [0]
    while queue:
        at = queue.pop(0)
        for k, nxt in _neighbours(g, at):
            if nxt != 0 and nxt not in out:
                out[nxt] = k
                queue.append(nxt)
    return out


def order(g: Graph) -> list[int]:
    """Node indices in GrailQA's numbering: breadth-first from the answer (:func:`_neighbours`)."""
    seen = [0, *parents(g)]
    return seen + [i for i in range(len(g.nodes)) if i not in seen]


def _pattern(g: Graph, number: dict[int, int], prefix: str, extreme: Extreme | None = None,
             blocks: dict[int, str] | None = None) -> list[str]:
    """The lines of the whole graph (``extreme`` None) or of one superlative's pattern, variables ``?<prefix>N``:
    per node in number order its classes, comparison, superlative subquery (``blocks``) or VALUES; then the edges
    (each where its later node is numbered); then the filter keeping all nodes distinct."""
    nodes = sorted(extreme.nodes if extreme else range(len(g.nodes)), key=number.__getitem__)
    edges = [g.edges[k] for k in (extreme.edges if extreme else range(len(g.edges)))]
    lines: list[str] = []
    for i in nodes:
        node, var = g.nodes[i], f"?{prefix}{number[i]}"
        classes = node.classes[extreme.outer:] if extreme and i == extreme.at else node.classes
        lines.extend(f"{var} :type.object.type :{c} . " for c in classes if not c.startswith("type."))
        if node.compare:
            lines.append(f"FILTER ({var} {node.compare[0]} {node.compare[1]})")
        if blocks and i in blocks:
            lines.append(blocks[i])
        if node.kind == "entity":
            lines.append(f"VALUES {var} {{ :{node.value} }} ")
        elif node.kind == "literal":
            lines.append(f"VALUES {var} {{ {node.value} }} ")
    for s, rel, o in sorted(edges, key=lambda e: sorted((number[e[0]], number[e[2]]), reverse=True)):
        lines.append(f"?{prefix}{number[s]} :{rel} ?{prefix}{number[o]} . ")
    pairs = [f"?{prefix}{number[a]} != ?{prefix}{number[b]}" for k, a in enumerate(nodes) for b in nodes[k + 1:]]
    if pairs:
        lines.append("FILTER ( " + " && ".join(pairs) + "  )")
    return lines


def render(g: Graph) -> str:
    """The graph in GrailQA's gold SPARQL form (nodes numbered by :func:`order`)."""
    number = {i: k for k, i in enumerate(order(g))}
    blocks: dict[int, str] = {}
    for i, node in enumerate(g.nodes):
        if node.extreme:
            k, inner = number[i], _pattern(g, number, "y", node.extreme)
            blocks[i] = "{\n" + f"SELECT ({node.extreme.op}(?y{k}) AS ?x{k})  WHERE {{ \n" + "\n".join(inner) + "\n}\n}"
    body = _pattern(g, number, "x", blocks=blocks)
    head = "SELECT (COUNT(?x0) AS ?value) WHERE {" if g.count else "SELECT (?x0 AS ?value) WHERE {"
    return PREFIXES + "\n" + head + "\nSELECT DISTINCT ?x0  WHERE { \n" + "\n".join(body) + "\n}\n}"


def to_sparql(s_expression: str, *, classes: bool = True) -> str:
    """GrailQA's SPARQL for an s-expression; ``classes``: type the variable nodes the s-expression leaves
    untyped by the schema (:func:`infer_classes`). ValueError names the bad token."""
    g = build_graph(s_expression)
    if classes:
        infer_classes(g)
    return render(g)


def s_expression_mids(s_expression: str) -> list[str]:
    """The entity constants (``m.*``/``g.*``) of an s-expression, in order, without repeats."""
    out: dict[str, None] = {}
    for tok in _TOKEN.findall(s_expression):
        if _ENTITY.match(tok):
            out.setdefault(tok, None)
    return list(out)


def function_of(s_expression: str) -> str:
    """GrailQA's ``function`` of an s-expression: ``count``, ``argmax``, ``argmin``, ``<``/``<=``/``>``/``>=`` (its
    first comparison), or ``none``."""
    tokens = _TOKEN.findall(s_expression)
    if tokens[1:2] == ["COUNT"]:
        return "count"
    for tok in tokens:
        if tok in EXTREMES:
            return tok.lower()
        if tok in COMPARISONS:
            return COMPARISONS[tok]
    return "none"
