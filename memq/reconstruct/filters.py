"""Filter expressions of reconstruction: the comparators a filter statement applies, the language filter of
the gold queries, and a constant matched by name."""

from __future__ import annotations

from dataclasses import replace

from ..sparql.model import FB, MIRRORED, Call, Exists, Expr, Group, Iri, Literal, Term, Triple, Var

ORDERING = ("<", "<=", ">", ">=")
_VALUE = Var("value")


def _walk_calls(expr: Expr, fn) -> Expr:
    """``expr`` with ``fn`` applied bottom-up to every Call, inside EXISTS patterns too."""
    if isinstance(expr, Call):
        return fn(replace(expr, args=tuple(_walk_calls(a, fn) for a in expr.args)))
    if isinstance(expr, Exists):
        pattern = replace(expr.pattern, filters=tuple(_walk_calls(f, fn) for f in expr.pattern.filters))
        return Exists(pattern, expr.negated)
    return expr


def value_comparators(expr: Expr) -> set[str]:
    """The comparators a filter statement applies to ``?value``, read as ``thing OP ?value``."""
    found: set[str] = set()

    def visit(c: Call) -> Call:
        if c.op in MIRRORED and len(c.args) == 2:
            if c.args[1] == _VALUE:
                found.add(c.op)
            elif c.args[0] == _VALUE:
                found.add(MIRRORED[c.op])
        return c

    _walk_calls(expr, visit)
    return found


def with_comparator(expr: Expr, op: str) -> Expr:
    """``expr`` with every ordering comparison against ``?value`` made ``thing op ?value``."""
    def visit(c: Call) -> Call:
        if c.op in ORDERING and len(c.args) == 2:
            if c.args[1] == _VALUE:
                return replace(c, op=op)
            if c.args[0] == _VALUE:
                return replace(c, op=MIRRORED[op])
        return c

    return _walk_calls(expr, visit)


def language_filter(var: Var) -> Expr:
    """``!isLiteral(?x) || lang(?x) = '' || langMatches(lang(?x), 'en')``, as in the gold queries."""
    return Call("||", (Call("||", (Call("!", (Call("isliteral", (var,)),)),
                                   Call("=", (Call("lang", (var,)), Literal(""))))),
                       Call("langmatches", (Call("lang", (var,)), Literal("en")))))


def named_filter(target: Term, name: str, label: Var) -> Expr:
    """``target`` is called ``name``: a literal of that text, or a node whose ``type.object.name`` (``label``) is
    ``name``, case aside. How reconstruction resolves, at the step's node, a constant that no given entity
    carries: a linked question lacks WebQSP's constraint entities (Marriage, Male, High school) that plans name."""
    same = Call("=", (Call("lcase", (Call("str", (label,)),)), Literal(name.lower())))
    node = Exists(Group(triples=(Triple(target, Iri(FB + "type.object.name"), label),), filters=(same,)))
    return Call("||", (Call("=", (Call("str", (target,)), Literal(name))), node))


def equality(expr: Expr) -> tuple[Var, Term] | None:
    """``?v = c`` (either way round; ``c`` an IRI or a literal, ``?v`` bare or as ``str(?v)``) as ``(?v, c)``, else
    None."""
    if not (isinstance(expr, Call) and expr.op == "=" and len(expr.args) == 2):
        return None
    a, b = (x.args[0] if isinstance(x, Call) and x.op == "str" and len(x.args) == 1 and isinstance(x.args[0], Var)
            else x for x in expr.args)
    if isinstance(a, Var) and isinstance(b, (Iri, Literal)):
        return a, b
    if isinstance(b, Var) and isinstance(a, (Iri, Literal)):
        return b, a
    return None


def pins(query) -> bool:
    """Whether a FILTER of ``query`` makes the variable it selects equal to a constant: an IRI or a literal
    (``?x = ns:m.04ztj``), or the node a name names (:func:`named_filter`). Its one answer is then the value a plan's
    check named."""
    var = query.projection[0].var if query.projection else None

    def equal(expr: Expr) -> bool:
        found = equality(expr)
        return found is not None and found[0] == var

    return var is not None and any(equal(f) or (isinstance(f, Call) and f.op == "||" and bool(f.args)
                                                and equal(f.args[0])) for f in query.where.filters)


def pinned(filters) -> dict[Var, Term]:
    """The ?variables that ``filters`` make equal to an IRI, bare (``FILTER(?rating = ns:m.07vqd2x)``; a name
    matched as text, ``str(?v) = "..."``, names no node), and that IRI (:func:`equality`)."""
    return {found[0]: found[1] for f in filters if (found := equality(f)) is not None
            and isinstance(found[1], Iri) and not any(isinstance(x, Call) for x in f.args)}
