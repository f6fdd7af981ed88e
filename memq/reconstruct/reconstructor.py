"""Rule-based reconstruction: plan steps + recalled statements -> one SPARQL query.

As in MemQ (section 4.3): each step's statements are appended in order; the
canonical ``?entity1/2/3`` are renamed to the step's variables and entity
names are refilled with ids from ``entities``; several statements for one
step become a UNION; *Make sure* becomes a FILTER (``= != < <= > >=``) and
*Sort* an ORDER BY/LIMIT (the key as a number, then as it is). The language
filter and the exclusion of the node the answer's own step starts from are
added as the gold queries do. GrailQA's steps: a class step adds its recalled
class statement's triple, a superlative step a ``MAX``/``MIN`` subquery over
the query's own pattern, a count step the projection ``(COUNT(DISTINCT ?x) AS
?count)``.

Entity ids enter the query only as :class:`~memq.sparql.model.Iri` terms
built from validated ids, and every value a plan mentions only as a
:class:`~memq.sparql.model.Literal`; the writer escapes both. Nothing from a
plan is pasted into SPARQL text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from ..decompose.assemble import fragment
from ..decompose.cvt import CvtOracle, SchemaCvtOracle
from ..decompose.forms import superlative_subquery
from ..errors import ReconstructionError
from ..sparql.model import (
    FB,
    XSD,
    Call,
    Expr,
    Group,
    Iri,
    Literal,
    OrderKey,
    Query,
    Term,
    Triple,
    Var,
    substitute_expr,
    substitute_group,
)
from ..sparql.safety import FREEBASE_ID, check_entity_id
from ..types import PlanStep, Statement
from .filters import ORDERING, language_filter, named_filter, pinned, value_comparators, with_comparator

_VAR_NAME = re.compile(r"^\?[A-Za-z_][A-Za-z0-9_]{0,40}$")
_DATE = re.compile(r"^(-?\d{4})(-\d{2}(-\d{2})?)?(T[0-9:.]+Z?)?$")
_YEAR = re.compile(r"^-?\d{4}$")  # a date of a year alone, or a number of four digits
_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")
_SCIENTIFIC = re.compile(r"^-?\d+(\.\d+)?[eE][+-]?\d+$")  # 1.519e+06, as GrailQA's floats are written
XSD_DATETIME = XSD + "dateTime"
XSD_DOUBLE = XSD + "double"


def _value_text(text: str) -> str:
    """A check's value as :meth:`Reconstructor.value` reads it: unquoted, without the spaces around it."""
    return text.strip().strip('"').strip()


@dataclass
class Draft:
    """The query being built, step by step."""

    triples: list[Triple] = field(default_factory=list)
    unions: list[tuple[Group, ...]] = field(default_factory=list)
    filters: list[Expr] = field(default_factory=list)
    order: tuple[OrderKey, ...] = ()
    limit: int | None = None
    offset: int | None = None
    superlatives: list[tuple[str, Var]] = field(default_factory=list)  # (MAX or MIN, the variable)
    count: tuple[Var, Var] | None = None  # (the variable counted, the variable of the count)

    def copy(self) -> Draft:
        return Draft(list(self.triples), list(self.unions), list(self.filters), self.order, self.limit, self.offset,
                     list(self.superlatives), self.count)

    def add_alternatives(self, alts: list[Group]) -> None:
        if len(alts) == 1 and not alts[0].unions and not alts[0].filters:
            self.triples.extend(t for t in alts[0].triples if t not in self.triples)
        elif alts:
            self.unions.append(tuple(alts))

    def all_triples(self) -> list[Triple]:
        """Every triple pattern of the draft, those inside its UNION alternatives too."""
        return self.triples + [t for u in self.unions for alt in u for t in alt.all_triples()]

    def query(self, answer: Var, boilerplate: list[Expr]) -> Query:
        """The draft as a query for ``answer``; with a count, ``answer`` is the count's variable.

        A superlative's subquery aggregates over the draft's pattern with the boilerplate's ``!=`` filters
        (GrailQA's subqueries keep their nodes distinct too), not its language filter."""
        where = Group(triples=tuple(self.triples), unions=tuple(self.unions),
                      filters=tuple(self.filters) + tuple(boilerplate))
        if self.superlatives:
            distinct = tuple(b for b in boilerplate if isinstance(b, Call) and b.op in ("!=", "&&"))
            pattern = Group(triples=tuple(self.triples), unions=tuple(self.unions),
                            filters=tuple(self.filters) + distinct)
            where = replace(where, subqueries=tuple(superlative_subquery(op, var, pattern)
                                                    for op, var in self.superlatives))
        if self.count is not None:
            from ..sparql.model import Projection

            counted, alias = self.count
            projection = (Projection(alias, Call("COUNT", (counted,), distinct=True)),)
            return Query(where=where, projection=projection, order_by=self.order, limit=self.limit,
                         offset=self.offset)
        return Query(where=where, projection=(_projection(answer),), distinct=True, order_by=self.order,
                     limit=self.limit, offset=self.offset)

    def probe(self, var: Var) -> Query:
        """The draft as a one-row existence query for ``var`` (grounded choice)."""
        where = Group(triples=tuple(self.triples), unions=tuple(self.unions), filters=tuple(self.filters))
        return Query(where=where, projection=(_projection(var),), limit=1)


def _projection(var: Var):
    from ..sparql.model import Projection

    return Projection(var)


class Reconstructor:
    """Turns steps into query parts; ``entities`` maps Freebase id -> name."""

    def __init__(self, entities: dict[str, str], distinct_nodes: bool = False) -> None:
        """``distinct_nodes``: GrailQA's convention, every node of the query differs from every other
        (:meth:`boilerplate`), instead of WebQSP's and CWQ's answer-is-not-its-start."""
        self.entities = {check_entity_id(mid): name for mid, name in entities.items()}
        self.distinct_nodes = distinct_nodes
        self.ambiguous: dict[str, tuple[str, ...]] = {}  # name -> the given ids it matched
        self.notes: dict[str, str] = {}  # step text -> what reconstruction changed (the pipeline traces it)
        self._fresh = 0
        self._stars: dict[tuple[str, ...], Var] = {}  # a CVT's edges to ?entity1 and ?entity3 -> its variable

    # -- mentions ----------------------------------------------------------
    def var(self, text: str | None) -> Var | None:
        if text and _VAR_NAME.fullmatch(text):
            return Var(text[1:])
        return None

    def entity(self, name: str | None) -> Iri | None:
        """A given entity by name (case-insensitive) or id; a plan may also name a valid Freebase id directly.

        A name that several given entities share reads as the first of them here; ``find`` tries each.
        """
        found = self.entities_named(name)
        return found[0] if found else None

    def entities_named(self, name: str | None) -> list[Iri]:
        """Every given entity a mention can mean: an id names one; a name may be shared (a film and its
        title character are both "Edward Scissorhands")."""
        if not name:
            return []
        if FREEBASE_ID.fullmatch(name.strip()):
            return [Iri(FB + name.strip())]
        low = name.strip().lower()
        found = [Iri(FB + mid) for mid, ename in self.entities.items() if ename.strip().lower() == low]
        if len(found) > 1:
            self.ambiguous[name.strip()] = tuple(i.local for i in found)
        return found

    def terms(self, mention: str | None) -> list[Term]:
        var = self.var(mention)
        return [var] if var is not None else list(self.entities_named(mention))

    def term(self, mention: str | None) -> Term | None:
        return self.var(mention) or self.entity(mention)

    def fresh(self, base: str) -> Var:
        self._fresh += 1
        return Var(f"{base}_{self._fresh}")

    # -- steps -------------------------------------------------------------
    def find(self, step: PlanStep, statement: Statement) -> Group:
        """One candidate statement instantiated for a find step.

        When a mention names several given entities, every reading is kept as a UNION (the KG decides),
        except that a structure-3 step does not read one entity at both ends while another reading exists.
        """
        sources = self.terms(step.source)
        if not sources:
            raise ReconstructionError(f"step {step.text!r}: its source {step.source!r} is neither a ?variable "
                                      "nor one of the given entities")
        target = self.var(step.target)
        if target is None:
            raise ReconstructionError(f"step {step.text!r}: it assigns no ?variable")
        if statement.structure not in ("1", "2", "3"):
            raise ReconstructionError(f"statement {statement.id} of structure {statement.structure} is not a path")
        frag = fragment(statement.sparql, statement.structure)
        readings: list[dict[str, Term]] = []
        if statement.structure == "3":
            values: list[Term] = self.terms(step.value) or [self.fresh("v")]
            pairs = [(s, v) for s in sources for v in values]
            distinct = [(s, v) for s, v in pairs if s != v]
            for s, v in distinct or pairs:
                readings.append({"?entity1": s, "?entity2": v, "?entity3": target})
        else:
            readings = [{"?entity1": s, "?entity2": target} for s in sources]
        local: dict[str, Var] = {}
        if statement.structure == "3" and len(readings) == 1:
            key = _star_key(frag.where, readings[0])
            if key is not None:
                local["?cvt"] = self._stars.setdefault(key, self.fresh("cvt"))

        def instantiate(binding: dict[str, Term]) -> Group:
            def sub(n: Term) -> Term:
                if isinstance(n, Var):
                    key = "?" + n.name
                    if key in binding:
                        return binding[key]
                    if key not in local:
                        local[key] = self.fresh(n.name)
                    return local[key]
                return n

            return substitute_group(frag.where, sub)

        groups = [instantiate(b) for b in readings]
        return groups[0] if len(groups) == 1 else Group(unions=(tuple(groups),))

    def check(self, step: PlanStep, statement: Statement | None = None) -> Expr:
        """A FILTER for a Make sure step: from a recalled filter statement, or by rule."""
        target = self.var(step.target)
        value = self.value(step.value)
        if statement is not None:
            if target is None or value is None:
                raise ReconstructionError(f"step {step.text!r}: a filter statement needs a ?variable and a value")
            binding = {"?entity1": target, "?value": value}
            frag = fragment(statement.sparql, "filter")
            expr = frag.where.filters[0]
            had = value_comparators(expr)
            if step.op in ORDERING and had and had <= set(ORDERING) and had != {step.op}:
                # The memory supplies the relation; the step says how to compare. Statements that differ
                # only in "on or before" / "on or after" embed almost alike, so the top-1 may be the other.
                expr = with_comparator(expr, step.op)
                self.notes[step.text] = (f"filter statement {statement.id} compares with {'/'.join(sorted(had))}; "
                                         f"the step's {step.op} used")
            local: dict[str, Var] = {}

            def sub(n: Term) -> Term:
                if isinstance(n, Var):
                    key = "?" + n.name
                    if key in binding:
                        return binding[key]
                    return local.setdefault(key, self.fresh(n.name))
                return n

            return substitute_expr(expr, sub)
        if target is None:
            raise ReconstructionError(f"step {step.text!r}: Make sure needs a ?variable to check")
        if value is None:
            raise ReconstructionError(f"step {step.text!r}: no value to compare with")
        op = step.op or "="
        if op not in ("=", "!=", "<", "<=", ">", ">="):
            raise ReconstructionError(f"step {step.text!r}: unknown comparison {op!r}")
        if isinstance(value, Literal) and value.datatype == XSD_DATETIME:
            dated = Call(op, (Call(XSD_DATETIME, (target,)), value))
            year = _YEAR.match(_value_text(step.value))
            if not year:
                return dated
            # a bare year may be a number too ("fewer than 2416 postgraduates", "less than 2400 people"): a value that
            # writes a number (a number, a count the benchmark KG holds as text, a gYear) compares as one, anything
            # else as a date as before (800 cast to a date is an error, and its row was lost)
            numeric = Call("||", (Call("isnumeric", (target,)),
                                  Call("regex", (Call("str", (target,)), Literal(r"^-?[0-9]+([.][0-9]+)?$")))))
            written = Call(XSD_DOUBLE, (Call("str", (target,)),))
            number = Call(op, (written, Literal(year.group(), datatype=XSD + "integer")))
            return Call("||", (Call("&&", (numeric, number)), Call("&&", (Call("!", (numeric,)), dated))))
        if isinstance(value, Literal) and value.datatype is None:
            if op in ("=", "!="):  # no given entity has this name: the node named so, or a literal of that text
                self.notes[step.text] = f"{value.value!r} is no given entity: ?{target.name} is matched by its name"
                named = named_filter(target, value.value, self.fresh("name"))
                return named if op == "=" else Call("!", (named,))
            return Call(op, (Call("str", (target,)), value))
        if op == "=" and isinstance(value, Literal) and (_NUMBER.match(value.value) or _SCIENTIFIC.match(value.value)):
            # Freebase keeps some numbers as text (a roster's jersey number is type.rawstring), where a
            # numeric = is a type error and finds nothing: match the text or the number
            return Call("||", (Call("=", (Call("str", (target,)), Literal(value.value))), Call("=", (target, value))))
        return Call(op, (target, value))

    def class_triple(self, step: PlanStep, statement: Statement) -> Triple:
        """A class step with its recalled class statement: ``?x ns:type.object.type ns:<class>``."""
        target = self.var(step.target)
        if target is None:
            raise ReconstructionError(f"step {step.text!r}: a class step needs a ?variable")
        if statement.structure != "class":
            raise ReconstructionError(f"statement {statement.id} of structure {statement.structure} is not a class")
        [t] = fragment(statement.sparql, "class").where.triples
        return Triple(target, t.p, t.o)

    def value(self, text: str | None) -> Term | None:
        if text is None:
            return None
        text = _value_text(text)
        if not text:
            return None
        ent = self.entity(text)
        if ent is not None:
            return ent
        var = self.var(text)
        if var is not None:
            return var
        m = _DATE.match(text)
        if m:
            if m.group(4):
                return Literal(text, datatype=XSD_DATETIME)
            year, rest = m.group(1), m.group(2) or ""
            date = year + (rest if len(rest) == 6 else (rest + "-01" if rest else "-01-01"))
            return Literal(date, datatype=XSD_DATETIME)
        if _NUMBER.match(text):
            return Literal(text, datatype=XSD + ("decimal" if "." in text else "integer"))
        if _SCIENTIFIC.match(text):
            return Literal(text, datatype=XSD_DOUBLE)
        return Literal(text)

    def sort(self, step: PlanStep) -> tuple[tuple[OrderKey, ...], int | None, int | None]:
        """ORDER BY the key as a number, then as it is: numbers compare as numbers even where the KG keeps them
        as text (a country's calling code "81" after "686", as the gold queries' ``xsd:integer(?num)`` does),
        and values that are no number (dates, names) have no first key, so the second orders them."""
        key = self.var(step.target)
        if key is None:
            raise ReconstructionError(f"step {step.text!r}: Sort needs a ?variable")
        desc = step.op == "desc"
        return (OrderKey(Call(XSD_DOUBLE, (key,)), desc), OrderKey(key, desc)), step.limit or 1, step.offset

    def boilerplate(self, answer: Var, starts: Iterable[Term] = (), triples: Sequence[Triple] = (),
                    filters: Sequence[Expr] = ()) -> list[Expr]:
        """What every gold query says besides its path: the language filter on the answer, and that the
        answer is not the node its own step starts from (:meth:`answer_starts`). With ``distinct_nodes``, that
        no two nodes of ``triples`` are the same instead (GrailQA's ``?x0 != ?x1 && ?x0 != ?x2 && ...``), but for
        two that the query's ``filters`` make the same node: a check ``?rating = ns:m.07vqd2x`` where
        ``ns:m.07vqd2x`` starts a step too (GrailQA's gold queries write such a node once, as the entity)."""
        out = [language_filter(answer)]
        if self.distinct_nodes:
            nodes = list(dict.fromkeys(n for t in triples for n in (t.s, t.o)
                                       if not (t.p == Iri(FB + "type.object.type") and n == t.o)))
            same = pinned(filters)
            pairs = [Call("!=", (a, b)) for i, a in enumerate(nodes) for b in nodes[i + 1:]
                     if (isinstance(a, Var) or isinstance(b, Var)) and same.get(a, a) != same.get(b, b)]
            if pairs:
                expr = pairs[0]
                for p in pairs[1:]:
                    expr = Call("&&", (expr, p))
                out.append(expr)
            return out
        for node in starts:
            if node != answer:
                out.append(Call("!=", (answer, node)))
        return out

    def answer_starts(self, steps: Iterable[PlanStep], answer: Var, triples: Sequence[Triple] = (),
                      cvt: CvtOracle | None = None) -> list[Term]:
        """The node that the path to ``answer`` starts its last hop from: a given entity or a ?variable.

        The gold queries of both datasets say the answer is not that node, and only that one. WebQSP's
        ``ns:m.topic rel ?y . ?y rel ?x`` has ``FILTER(?x != ns:m.topic)``; CWQ's compositions
        ``ns:m.topic rel ?c . ?c rel ?x`` have ``FILTER(?x != ?c)`` and let the topic entity be an answer (the
        club that won the 1988 World Series also won the 1988 World Series). The sources of the find steps that
        assign ``answer``; a source that is a CVT node in the query's ``triples`` (a plan walks through one when a
        Make sure checks its dates) stands for the sources of the steps that reached it, as the CVT stands
        between them and the answer. Constraint entities (a structure-3 step's value) are never excluded.
        """
        steps = [s for s in steps if s.kind == "find"]
        cvt = cvt or SchemaCvtOracle()
        out: list[Term] = []
        seen: set[Var] = set()

        def walk(var: Var) -> None:
            seen.add(var)
            for step in steps:
                if self.var(step.target) != var:
                    continue
                for term in self.terms(step.source):
                    if isinstance(term, Var) and term not in seen and cvt.is_cvt(term, triples):
                        walk(term)
                    elif term not in out:
                        out.append(term)

        walk(answer)
        return [t for t in out if t != answer]


def _star_key(where: Group, binding: dict[str, Term]) -> tuple[str, ...] | None:
    """What ties a structure-3 statement's CVT to its ``?entity1`` and ``?entity3``, as bound.

    The decomposer splits a CVT with more than three ends into one structure-3 statement per extra end, all
    sharing these two edges (``?entity1 ns:people.person.spouse_s ?cvt . ?cvt ns:people.marriage.spouse
    ?entity3``, one with ``type_of_union``, one with ``from``). Statements with the same key are one CVT
    again, so reconstruction gives them one variable; two CVTs would let each extra edge hold on another node.
    """
    edges = []
    for t in where.triples:
        names = {x.name for x in (t.s, t.o) if isinstance(x, Var)}
        if "entity2" in names:
            continue
        if "cvt" not in names:
            return None
        edges.append(" ".join(repr(binding.get("?" + x.name, x) if isinstance(x, Var) else x) for x in (t.s, t.p, t.o)))
    return tuple(sorted(edges)) if len(edges) == 2 else None


def with_order(draft: Draft, order: tuple[OrderKey, ...], limit: int | None, offset: int | None) -> Draft:
    d = draft.copy()
    d.order, d.limit, d.offset = order, limit, offset
    return d


__all__ = ["Draft", "Reconstructor", "language_filter", "with_order", "replace"]
