"""The KG side of the grounded planner: the edges at a node, whether a statement binds after a partial plan, and
what a statement assigns by the schema.

Only the KG interface (``kg.select``) is used, so an embedded Oxigraph store and
a SPARQL endpoint such as Virtuoso behave the same.
"""

from __future__ import annotations

import time
from dataclasses import replace

from memq.schema import Schema, freebase_schema
from memq.sparql import to_standard
from memq.sparql.model import Group, Iri, Projection, Query, Triple, Var

__all__ = ["Edge", "Neighbourhood", "any_of", "assigned_types", "assigns_cvt", "bank_edges", "first_edges",
           "path_options", "statement_edges"]

Edge = tuple[str, str]  # (relation id, "out" | "in") seen from a node
EDGES_FORMAT = 1  # of bank_edges' cache


def statement_edges(statement, placeholder: str = "entity1") -> set[Edge]:
    """The edges a path statement has at ``?<placeholder>``: ``?entity1 ns:r ?x`` is (r, "out")."""
    from memq.decompose.assemble import fragment

    var = Var(placeholder)
    out: set[Edge] = set()
    for t in fragment(statement.sparql, statement.structure).where.all_triples():
        if not isinstance(t.p, Iri) or not t.p.is_freebase:
            continue
        if t.s == var:
            out.add((t.p.local, "out"))
        if t.o == var:
            out.add((t.p.local, "in"))
    return out


def assigns_cvt(statement, schema: Schema | None = None, types: set[str | None] | None = None) -> bool:
    """Whether the ?variable a path statement (structures 1-3) assigns is a CVT node by the schema (one of its
    :func:`assigned_types`, given as ``types`` when known, is a mediator type): ``?entity1 ns:people.person.spouse_s
    ?entity2`` assigns a marriage. A plan may walk through such a node (a *Make sure* then checks its dates), but no
    question is answered with one: it has no name."""
    schema = schema or freebase_schema()
    return any(schema.is_cvt_type(t) for t in (assigned_types(statement, schema) if types is None else types))


def assigned_types(statement, schema: Schema | None = None) -> set[str | None]:
    """The schema types of the ?variable a path statement assigns, one for each of its triples that touches it:
    the relation's range where it is the object, its domain where the subject; None where the schema does not
    say. ``type.datetime``, ``type.int``, ... are literals, the other types entities."""
    target, triples = _target_of(statement)
    schema = schema or freebase_schema()
    out: set[str | None] = set()
    for t in triples if target is not None else ():
        if isinstance(t.p, Iri) and t.p.is_freebase and target in (t.s, t.o):
            out.add(schema.range(t.p.local) if t.o == target else schema.domain(t.p.local))
    return out


def _target_of(statement) -> tuple[Var | None, list[Triple]]:
    target, where = _pattern_of(statement)
    return target, where.all_triples() if where is not None else []


def _pattern_of(statement) -> tuple[Var | None, Group | None]:
    """The ?variable a path statement assigns and its graph pattern (None, None for other statements)."""
    from memq.decompose.assemble import fragment

    if statement.structure not in ("1", "2", "3"):
        return None, None
    target = Var("entity3" if statement.structure == "3" else "entity2")
    return target, fragment(statement.sparql, statement.structure).where


def bank_edges(records, cache: bool = True) -> dict[str, tuple[set[Edge], set[Edge]]]:
    """:func:`statement_edges` at ``?entity1`` and (structure 3) ``?entity2`` of every path statement in ``records``,
    by statement id. Parsing 63,000 statements takes several seconds, so the result is kept in
    ``$MEMQ_CACHE/statement_edges/<key>.json``, keyed by the statements' ids, structures and SPARQL (FORMAT first)."""
    import hashlib
    import json

    paths = [r.statement for r in records if r.statement.structure in ("1", "2", "3")]
    digest = hashlib.sha256(f"{EDGES_FORMAT}\0".encode())
    for st in paths:
        digest.update(f"{st.id}\0{st.structure}\0{st.sparql}\0".encode())
    path = None
    if cache:
        from memq.llm import cache_root

        path = cache_root() / "statement_edges" / f"{digest.hexdigest()[:24]}.json"
        try:
            saved = json.loads(path.read_text())
            if saved.keys() == {st.id for st in paths}:
                return {k: ({tuple(e) for e in a}, {tuple(e) for e in b}) for k, (a, b) in saved.items()}
        except (OSError, ValueError, TypeError, AttributeError):
            pass  # not built yet, unreadable or incomplete: parsed again below
    out = {st.id: (statement_edges(st, "entity1"), statement_edges(st, "entity2") if st.structure == "3" else set())
           for st in paths}
    if path is not None:
        from memq.files import write_atomic

        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, json.dumps({k: [sorted(a), sorted(b)] for k, (a, b) in out.items()}).encode())
        except OSError:  # a read-only cache: parsed again by the next process, nothing more
            pass
    return out


def first_edges(records, edges_of) -> dict[Edge, list[int]]:
    """For :func:`path_options`: each edge, and the positions in ``records`` of the path statements whose
    ``?entity1`` has it (``edges_of`` as there)."""
    index: dict[Edge, list[int]] = {}
    for i, record in enumerate(records):
        if record.statement.structure in ("1", "2", "3"):
            for edge in edges_of(record.statement)[0]:
                index.setdefault(edge, []).append(i)
    return index


def path_options(records, entities: dict[str, str], assigned, draft, neigh, edges_of,
                 index: dict[Edge, list[int]] | None = None) -> list[tuple[object, dict]]:
    """The path statements (structures 1-3) among ``records`` whose edges exist at the known nodes, each with how its
    known placeholders are named: ``(record, {"?entity1": label})``, and ``"?entity2"`` for structure 3. The known
    nodes are the topic ``entities`` (id -> name, labelled by name) and the ``assigned`` ``?variables`` that ``draft``
    binds; ``edges_of(statement)`` gives a statement's edges at ``?entity1`` and at ``?entity2``. Not probed yet: a
    structure-3 statement's second edge to the CVT is checked by the grounded planner's probe. ``index``
    (:func:`first_edges` of the same records) only saves time: the statements it cannot name are left out unread."""
    from memq.sparql.model import FB

    nodes = [(Iri(FB + mid), name) for mid, name in entities.items()]
    nodes += [(Var(v[1:]), v) for v in assigned]
    edges = {label: neigh.predicates(term, draft) for term, label in nodes}
    options: list[tuple[object, dict[str, str]]] = []
    if index is not None:
        records = [records[i] for i in sorted({i for found in edges.values() for e in found
                                               for i in index.get(e, ())})]
    for record in records:
        st = record.statement
        if st.structure not in ("1", "2", "3"):
            continue
        first, second = edges_of(st)
        for _, label in nodes:
            if not first & edges[label]:
                continue
            if st.structure != "3":
                options.append((record, {"?entity1": label}))
                continue
            for _, label2 in nodes:
                if label2 != label and second & edges[label2]:
                    options.append((record, {"?entity1": label, "?entity2": label2}))
    return options


class Neighbourhood:
    """The KG predicates at a node (one query per node, cached for one question) and binding probes."""

    def __init__(self, kg, timeout: float | None = None) -> None:
        self.kg = kg
        self.timeout = timeout
        self.queries = 0
        self.seconds = 0.0
        self._cache: dict[str, set[Edge]] = {}
        self._classes: dict[str, bool | set[str]] = {}  # class membership and the classes of a variable's values
        self._takes: dict[tuple[str, str], bool] = {}  # (statement id, value IRI) -> whether it assigns it anywhere

    def _select(self, text: str) -> list:
        self.queries += 1
        t0 = time.perf_counter()
        try:
            return self.kg.select(text, timeout=self.timeout)
        finally:
            self.seconds += time.perf_counter() - t0

    def predicates(self, node, draft) -> set[Edge]:
        """Edges at ``node``: an entity :class:`Iri`, or a :class:`Var` bound by ``draft`` (the plan so far)."""
        p, q = Var("memq_p"), Var("memq_q")
        probe = Group(unions=((Group(triples=(Triple(node, p, Var("memq_o")),)),
                               Group(triples=(Triple(Var("memq_s"), q, node),))),))
        if isinstance(node, Var):
            where = Group(triples=tuple(draft.triples), unions=tuple(draft.unions) + probe.unions,
                          filters=tuple(draft.filters))
        else:
            where = probe
        key = to_standard(Query(where=where, projection=(Projection(p), Projection(q)), distinct=True))
        if key not in self._cache:
            found: set[Edge] = set()
            for row in self._select(key):
                for name, way in (("memq_p", "out"), ("memq_q", "in")):
                    term = row.get(name)
                    if isinstance(term, Iri) and term.is_freebase:
                        found.add((term.local, way))
            self._cache[key] = found
        return self._cache[key]

    def binds(self, draft, group: Group, target: Var) -> bool:
        probe = draft.copy()
        probe.add_alternatives([group])
        return bool(self._select(to_standard(probe.probe(target))))

    def passing(self, draft, rec, steps) -> list[bool]:
        """For each check in ``steps`` (Make sure lines), whether some row of ``draft`` (the plan so far) passes it,
        written by the plan's reconstructor ``rec`` as it would write the query's FILTER (``rec`` is copied once and
        not changed)."""
        import copy

        from memq.errors import ReconstructionError

        rec = copy.deepcopy(rec)
        out: list[bool] = []
        for step in steps:
            try:
                expr = rec.check(step)
            except ReconstructionError:
                out.append(False)
                continue
            probe = draft.copy()
            probe.filters.append(expr)
            out.append(bool(self._select(to_standard(probe.probe(rec.var(step.target))))))
        return out

    def takes(self, statement, value: Iri) -> bool:
        """Whether ``value`` is anywhere in the KG what ``statement`` assigns: its triples with the ?variable it
        assigns written as ``value`` and the other ends left free have a row. "Make sure ?containedby is Country."
        after "the location that ?x is contained by" cannot pass at any node, as no location is contained by the
        class Country. True for a statement that assigns no ?variable (nothing to say). One query a pair, cached."""
        from memq.sparql.model import substitute_group

        key = (statement.id, value.value)
        if key not in self._takes:
            target, pattern = _pattern_of(statement)
            if target is None or not pattern.all_triples():
                return True

            def put(term):
                return value if term == target else term

            def bare(g: Group) -> Group:  # no FILTER: lang() of an IRI is an error, and filters only narrow
                return replace(g, filters=(), unions=tuple(tuple(bare(a) for a in u) for u in g.unions))

            where = bare(substitute_group(pattern, put))
            free = next((term for t in where.all_triples() for term in (t.s, t.o) if isinstance(term, Var)), None)
            query = Query(where=where, projection=(Projection(free),), limit=1) if free is not None else None
            self._takes[key] = query is None or bool(self._select(to_standard(query)))
        return self._takes[key]

    def has_members(self, class_id: str) -> bool:
        """Whether some node of the KG has the class ``class_id`` (``type.object.type``)."""
        from memq.sparql.model import FB
        from memq.sparql.safety import iri_ref

        iri_ref(FB + class_id)  # validated before it is written (a ValueError names it)
        if class_id not in self._classes:
            triple = Triple(Var("memq_s"), Iri(FB + "type.object.type"), Iri(FB + class_id))
            query = Query(where=Group(triples=(triple,)), projection=(Projection(Var("memq_s")),), limit=1)
            self._classes[class_id] = bool(self._select(to_standard(query)))
        return self._classes[class_id]

    def reaches_value(self, class_id: str, checks: list, var: Var, hops: int = 2) -> bool:
        """Whether some node of the class ``class_id`` has a value, one edge away or (``hops`` 2) two, that passes
        one of ``checks`` (FILTER expressions on ``var``, as :meth:`memq.reconstruct.Reconstructor.check` writes
        them). One query a hop count, the nearer first; each answer is cached."""
        from memq.sparql.model import FB
        from memq.sparql.safety import iri_ref

        iri_ref(FB + class_id)  # validated before it is written (a ValueError names it)
        s, y = Var("memq_s"), Var("memq_y")
        member = Triple(s, Iri(FB + "type.object.type"), Iri(FB + class_id))
        passes = any_of(checks)
        paths = [(Triple(s, Var("memq_p"), var),), (Triple(s, Var("memq_p"), y), Triple(y, Var("memq_q"), var))]
        for path in paths[:hops]:
            query = Query(where=Group(triples=(member, *path), filters=(passes,)), projection=(Projection(s),),
                          limit=1)
            key = to_standard(query)
            if key not in self._classes:
                self._classes[key] = bool(self._select(key))
            if self._classes[key]:
                return True
        return False

    def value_near(self, draft, var: Var, checks: list, hops: int = 0) -> bool:
        """Whether some value that ``draft`` (the plan so far) binds to ``var`` passes one of ``checks`` (``hops`` 0:
        FILTER expressions on ``var``), or has a value one edge away that does (``hops`` 1: expressions on
        ``?memq_v``)."""
        probe = draft.copy()
        if hops:
            probe.triples.append(Triple(var, Var("memq_p2"), Var("memq_v")))
        probe.filters.append(any_of(checks))
        return bool(self._select(to_standard(probe.probe(var))))

    def types(self, var: Var, draft, limit: int = 200) -> set[str]:
        """The classes (``type.object.type``) of the values ``draft`` (the plan so far) binds to ``var``."""
        from memq.sparql.model import FB

        t = Var("memq_class")  # not the probes' memq_t, whose classes these may be
        where = Group(triples=tuple(draft.triples) + (Triple(var, Iri(FB + "type.object.type"), t),),
                      unions=tuple(draft.unions), filters=tuple(draft.filters))
        key = to_standard(Query(where=where, projection=(Projection(t),), distinct=True, limit=limit))
        if key not in self._classes:
            self._classes[key] = {term.local for row in self._select(key)
                                  if isinstance(term := row.get(t.name), Iri) and term.is_freebase}
        return self._classes[key]


def any_of(checks: list):
    """One FILTER expression that holds where any of ``checks`` does (``a || b || ...``)."""
    from functools import reduce

    from memq.sparql.model import Call

    return reduce(lambda a, b: Call("||", (a, b)), checks)
