"""TemplateDescriber: English descriptions from the Freebase schema, no LLM.

Structures 1-3 are read as a path through the query graph, one hop per
triple, each hop named by its relation's label (see :mod:`.schema`)::

    ?entity1 ns:location.country.currency_used ?entity2 .
      -> ?entity2 is the currency used of the country ?entity1
    ?entity2 ns:location.country.currency_used ?entity1 .       (reverse)
      -> ?entity2 is the countries used of the currency ?entity1   (reverse property's label)
      -> ?entity2 is the country whose currency used is ?entity1    (passive)
    ?entity1 ns:film.actor.film ?cvt . ?cvt ns:film.performance.character ?entity2 .
      -> ?entity2 is the character of the film performances of the actor ?entity1
      -> ?entity2 is the character of the performance whose actor is ?entity1

UNION groups read "either ... or ...". Filters and ORDER BY clauses are
verbalised from their expression tree (see :mod:`.template_clauses`).
GrailQA's kinds read ``?entity1 is a building`` (class; a CVT's class inside a
structure-2/3 statement is left unsaid, the relations imply it), ``?entity1 is the
largest value`` (superlative) and ``the number of ?entity1`` (count).

Each statement gets up to three descriptions: the primary one in the paper's
form, an alternative reading (passive / CVT-centred), and with
``TemplateConfig.short`` the bare relation phrase (``the siblings of
?entity1``). What could not be read from the schema falls back to a generic
phrase, recorded as ``Described.fallback = "template-generic"``.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import asdict, dataclass

from memq.errors import SparqlParseError
from memq.sparql import parse_query
from memq.sparql.model import Group, Iri, Literal, Query, Triple, Var
from memq.types import Statement

from .base import Described, config_hash
from .schema import FreebaseSchema, label_kind, schema
from .template_clauses import describe_filter, describe_order, pred

logger = logging.getLogger(__name__)

TEMPLATE_VERSION = "1"
GENERIC = "template-generic"


@dataclass(frozen=True)
class TemplateConfig:
    """``alternate``: add the passive / mediator-centred reading; ``short``: add the bare relation phrase."""

    alternate: bool = True
    short: bool = True


def parse_fragment(statement: Statement) -> Query:
    """A statement's SPARQL fragment as a query model (wrapped in ``SELECT * WHERE``)."""
    if statement.structure == "order":
        return parse_query(f"SELECT * WHERE {{ }} {statement.sparql}")
    return parse_query(f"SELECT * WHERE {{ {statement.sparql} }}")


def term_text(term) -> str:
    if isinstance(term, Var):
        return f"?{term.name}"
    if isinstance(term, Iri):
        return term.local
    if isinstance(term, Literal):
        return f'"{term.value}"'
    return str(term)


GRAIL_KINDS = ("class", "superlative", "count")


def _cvt_class(t: Triple) -> bool:
    """``?cvt ns:type.object.type ns:<class>`` inside a GrailQA structure-2/3 statement."""
    return (isinstance(t.s, Var) and t.s.name.startswith("cvt") and isinstance(t.p, Iri)
            and t.p.local == "type.object.type" and isinstance(t.o, Iri))


def _branches(group: Group) -> list[list[Triple]]:
    if not group.unions:
        return [list(group.all_triples())]
    return [list(group.triples) + alt.all_triples() for union in group.unions for alt in union]


def _either(phrases: list[str]) -> str:
    uniq = list(dict.fromkeys(phrases))
    if len(uniq) == 1:
        return uniq[0]
    return "either " + ", ".join(uniq[:-1]) + " or " + uniq[-1]


class _Graph:
    """One branch of a statement as an undirected graph over its terms."""

    def __init__(self, triples: list[Triple], fb: FreebaseSchema) -> None:
        self.triples = [t for t in triples if isinstance(t.p, Iri)]
        self.fb = fb

    def path(self, src: Var, dst: Var) -> list[tuple[Triple, bool]] | None:
        """Hops from ``src`` to ``dst``: (triple, forward) with forward = walked subject -> object."""
        prev: dict = {src: None}
        todo: deque = deque([src])
        while todo:
            node = todo.popleft()
            if node == dst:
                break
            for t in self.triples:
                for a, b, fwd in ((t.s, t.o, True), (t.o, t.s, False)):
                    if a == node and b not in prev:
                        prev[b] = (node, t, fwd)
                        todo.append(b)
        if dst not in prev:
            return None
        hops = []
        node = dst
        while prev[node] is not None:
            back, t, fwd = prev[node]
            hops.append((t, fwd))
            node = back
        return hops[::-1]

    def type_of(self, term) -> str:
        """The Freebase type of a term, from the first triple that mentions it."""
        for t in self.triples:
            if t.s == term:
                return self.fb.domain(pred(t))
            if t.o == term:
                return self.fb.range(pred(t))
        return ""

    def role(self, cvt, term) -> str | None:
        """How ``term`` is attached to the node ``cvt``, as a noun (``actor``, ``character``)."""
        for t in self.triples:
            if t.s == cvt and t.o == term:
                return self.fb.label(pred(t))
            if t.o == cvt and t.s == term:
                rev = self.fb.reverse(pred(t))
                return self.fb.label(rev) if rev else self.fb.type_name(self.fb.domain(pred(t)))
        return None


class TemplateDescriber:
    """Describes statements from relation labels, domains and ranges. Deterministic and fast."""

    name = "template"

    def __init__(self, config: TemplateConfig = TemplateConfig(), fb: FreebaseSchema | None = None) -> None:
        self.config = config
        self._fb = fb

    @property
    def fb(self) -> FreebaseSchema:
        if self._fb is None:
            self._fb = schema()
        return self._fb

    @property
    def prompt_hash(self) -> str:
        return config_hash({"describer": self.name, "version": TEMPLATE_VERSION, **asdict(self.config)})

    def describe(self, statements: list[Statement]) -> list[list[str]]:
        return [list(d.descriptions) for d in self.describe_with_info(statements)]

    def describe_with_info(self, statements: list[Statement]) -> list[Described]:
        return [self.describe_one(s) for s in statements]

    # ------------------------------------------------------------------ one statement
    def describe_one(self, statement: Statement) -> Described:
        if statement.structure in GRAIL_KINDS:
            return Described(self._select(self._grail(statement)), self.name)
        try:
            query = parse_fragment(statement)
        except SparqlParseError as exc:
            logger.warning("statement %s does not parse (%s); generic description", statement.id, exc)
            return self._generic(statement)
        if statement.structure == "filter":
            phrases, ok = describe_filter(query.where.filters, self.fb)
        elif statement.structure == "order":
            phrases, ok = describe_order(query)
        else:
            phrases, ok = self._pattern(statement, query.where)
        if not ok or not phrases:
            return self._generic(statement, phrases or None)
        return Described(self._select(phrases), self.name)

    def _select(self, phrases: dict[str, str]) -> tuple[str, ...]:
        keep = [phrases["primary"]]
        if self.config.alternate and phrases.get("alternate"):
            keep.append(phrases["alternate"])
        if self.config.short and phrases.get("short"):
            keep.append(phrases["short"])
        return tuple(dict.fromkeys(keep))

    def _generic(self, statement: Statement, partial: dict[str, str] | None = None) -> Described:
        if partial is not None and partial.get("primary"):
            return Described(self._select(partial), self.name, GENERIC)
        labels = " and ".join(self.fb.label(r) for r in dict.fromkeys(statement.relations)) or statement.sparql
        target = "?entity3" if statement.structure == "3" else "?entity2"
        known = "?entity1 and ?entity2" if statement.structure == "3" else "?entity1"
        if statement.structure in ("filter", "order"):
            text = f"{statement.structure} on ?entity1: {statement.sparql}"
        else:
            text = f"{target} is related to {known} by {labels}"
        return Described((text,), self.name, GENERIC)

    def _grail(self, statement: Statement) -> dict[str, str]:
        """Class, superlative and count statements (their fragments are fixed forms, see memq.types)."""
        if statement.structure == "class":
            name = self.fb.class_name(statement.sparql.split()[-2].removeprefix("ns:"))
            article = "an" if name[:1] in "aeiou" else "a"
            return {"primary": f"?entity1 is {article} {name}", "alternate": f"every {name}", "short": name}
        if statement.structure == "count":
            return {"primary": "the number of ?entity1", "alternate": "count ?entity1"}
        most = "largest" if statement.sparql.startswith("MAX") else "smallest"
        return {"primary": f"?entity1 is the {most} value", "alternate": f"the {most} ?entity1, ties kept"}

    # ------------------------------------------------------------------ structures 1-3
    def _pattern(self, statement: Statement, where: Group) -> tuple[dict[str, str], bool]:
        branches = [_Graph([t for t in b if not _cvt_class(t)], self.fb) for b in _branches(where)]
        target_var = Var("entity3" if statement.structure == "3" else "entity2")
        if not any(target_var in (t.s, t.o) for g in branches for t in g.triples):
            return self._check(branches)
        if statement.structure == "3":
            got = [self._star(g) for g in branches]
            target = "?entity3"
        else:
            got = [self._chain(g) for g in branches]
            target = "?entity2"
        readings = [g for g in got if g is not None]
        if len(readings) != len(got):
            return {}, False
        out = {"primary": f"{target} is {_either([g['primary'] for g in readings])}"}
        if all(g.get("alternate") for g in readings):
            out["alternate"] = f"{target} is {_either([g['alternate'] for g in readings])}"
        out["short"] = _either([g["short"] for g in readings])
        return out, True

    def _check(self, branches: list[_Graph]) -> tuple[dict[str, str], bool]:
        """A pattern with no assigned variable (``?entity1 ns:r ns:m.x``): a check on ``?entity1``."""
        alts = []
        for g in branches:
            parts = []
            for t in g.triples:
                rel = pred(t)
                if t.s == Var("entity1"):
                    parts.append(f"{self.fb.label(rel)} {term_text(t.o)}")
                elif t.o == Var("entity1"):
                    parts.append(f"{self.fb.label(rel)} of {term_text(t.s)}")
                else:
                    return {}, False
            if not parts:
                return {}, False
            alts.append(" and ".join(parts))
        phrase = _either(alts)
        return {"primary": f"?entity1 has {phrase}", "alternate": f"make sure ?entity1 has {phrase}"}, True

    def _chain(self, g: _Graph) -> dict[str, str] | None:
        """Structure 1/2 branch: ``?entity1`` -> ... -> ``?entity2``."""
        src, dst = Var("entity1"), Var("entity2")
        hops = g.path(src, dst)
        if not hops:
            return None
        typed = self._typed(src, g)
        primary, short = typed, "?entity1"
        for t, fwd in hops:
            primary = self._hop(t, fwd, primary, "?entity1" if primary == typed else primary)
            short = self._hop(t, fwd, short, short)
        extra = self._extras(g, hops)
        out = {"primary": primary + extra, "short": short + extra}
        if len(hops) == 1 and not hops[0][1]:
            out["alternate"] = self._passive(pred(hops[0][0]), "?entity1") + extra
        elif len(hops) == 2:
            cvt = hops[0][0].o if hops[0][1] else hops[0][0].s
            role_t, role_k = g.role(cvt, dst), g.role(cvt, src)
            ctype = self.fb.type_name(g.type_of(cvt))
            if role_t and role_k:
                out["alternate"] = f"the {role_t} of the {ctype} whose {role_k} is ?entity1{extra}"
        return out

    def _star(self, g: _Graph) -> dict[str, str] | None:
        """Structure 3 branch: ``?entity1``, ``?entity2`` and ``?entity3`` around one mediator."""
        e1, e2, e3 = Var("entity1"), Var("entity2"), Var("entity3")
        hops = g.path(e1, e3)
        if not hops or len(hops) != 2:
            return None
        cvt = hops[0][0].o if hops[0][1] else hops[0][0].s
        roles = [g.role(cvt, v) for v in (e1, e2, e3)]
        if not all(roles):
            return None
        r1, r2, r3 = roles
        ctype = self.fb.type_name(g.type_of(cvt))
        via = self._hop(hops[0][0], hops[0][1], self._typed(e1, g), "?entity1")
        return {
            "primary": f"the {r3} of the {ctype} with {r1} ?entity1 and {r2} ?entity2",
            "alternate": f"the {r3} of {via}, with {r2} ?entity2",
            "short": f"the {r3} with {r1} ?entity1 and {r2} ?entity2",
        }

    # ------------------------------------------------------------------ phrases
    def _typed(self, var: Var, g: _Graph) -> str:
        name = self.fb.type_name(g.type_of(var))
        return f"?{var.name}" if name in ("entity", "topic") else f"the {name} ?{var.name}"

    def _hop(self, t: Triple, forward: bool, phrase: str, bare: str) -> str:
        """The node reached from ``phrase`` over triple ``t``.

        Forward hops and reverse hops with a reverse property read "the <label>
        of <phrase>"; verb-like labels read "the <range> that <phrase> is
        directed by" / "... <phrase> contains"; other reverse hops are passive.
        """
        rel = pred(t)
        if forward:
            return self._of(rel, phrase)
        rev = self.fb.reverse(rel)
        if rev and label_kind(self.fb.label(rev)) == "noun":
            return self._of(rev, phrase)
        if rev and label_kind(self.fb.label(rel)) == "noun":
            return self._of(rev, phrase)
        return self._passive(rel, bare)

    def _of(self, rel: str, phrase: str) -> str:
        label = self.fb.label(rel)
        kind = label_kind(label)
        if kind == "noun":
            return f"the {label} of {phrase}"
        target = self.fb.type_name(self.fb.range(rel))
        return f"the {target} that {phrase} {'is ' if kind == 'prep' else ''}{label}"

    def _passive(self, rel: str, bare: str) -> str:
        """A reverse hop read in the passive: ``the country whose currency used is ?entity1``."""
        label, dom = self.fb.label(rel), self.fb.type_name(self.fb.domain(rel))
        kind = label_kind(label)
        if kind == "prep":
            return f"the {dom} {label} {bare}"
        if kind == "verb":
            return f"the {dom} that {label} {bare}"
        return f"the {dom} whose {label} is {bare}"

    def _extras(self, g: _Graph, hops: list[tuple[Triple, bool]]) -> str:
        """Triples off the path (constraints on a mediator) as ``, with <label> <term>``."""
        used = {id(t) for t, _ in hops}
        parts = []
        for t in g.triples:
            if id(t) in used:
                continue
            parts.append(f"{self.fb.label(pred(t))} {term_text(t.o)}")
        return (", with " + " and ".join(parts)) if parts else ""
