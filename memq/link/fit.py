"""Fit with the question through the memory: does a memory statement relevant to the question bind at a candidate?

The question is embedded once and the ``recall`` statements of the memory bank closest to it are read
(:meth:`memq.memory.bank.MemoryBank.search`). A statement binds at a candidate entity when its first edge, the
relation that touches ``?entity1`` in the direction the statement writes it
(:func:`memq.plan.neighbourhood.statement_edges`), is among the candidate's edges in the KG (one ``SELECT DISTINCT``
of the predicates out of and into it, :class:`memq.plan.neighbourhood.Neighbourhood`, cached across questions). A
candidate's fit is the best similarity of a recalled statement that binds at it, 0 when none does: "lincoln" in
"who was lincoln's vice president?" recalls the government-position statements, which bind at the president and not
at the city of Lincoln.

The linker (:class:`memq.link.linker.Linker`) adds ``fit_weight`` x fit to a candidate's score, and, once its first
entity is chosen, ``coherence_weight`` to the candidates that one CVT joins with it (:meth:`MemoryFit.connected`).
Both parts can be given lazily (zero-argument callables), so that a linker opened for a pipeline loads the KG and
the bank only when the first question is linked.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from memq.errors import KnowledgeGraphError
from memq.kg.base import NAME_PREDICATE, check_ids
from memq.plan.neighbourhood import Edge, Neighbourhood, statement_edges
from memq.sparql.model import FB, Iri

__all__ = ["MemoryFit", "one_thread"]

log = logging.getLogger(__name__)

MAX_CACHED = 200_000  # entities whose edges are kept; the cache starts afresh beyond this


class MemoryFit:
    """The fit of candidate entities with a question through the statements a memory bank recalls for it."""

    def __init__(self, kg, bank, *, timeout: float | None = 10.0) -> None:
        self._kg_source, self._bank_source = kg, bank
        self._kg = None if callable(kg) else kg  # a loader (zero-argument callable) is called on first use
        self._bank = None if callable(bank) else bank
        self.timeout = timeout
        self._neigh: Neighbourhood | None = None
        self._edges: dict[str, frozenset[Edge]] = {}
        self._statement_edges: dict[str, frozenset[Edge]] = {}
        self._connected: dict[frozenset[str], bool] = {}
        self._contained: dict[tuple[str, str], bool] = {}
        self._beside: dict[tuple[str, int], tuple[frozenset[str], bool]] = {}
        self.queries = 0
        self.seconds = 0.0

    @property
    def kg(self):
        if self._kg is None:
            self._kg = self._kg_source()
        return self._kg

    @property
    def bank(self):
        if self._bank is None:
            self._bank = self._bank_source()
        return self._bank

    def edges(self, mid: str) -> frozenset[Edge]:
        """The (relation, "out" | "in") edges at the entity ``mid`` in the KG, cached."""
        found = self._edges.get(mid)
        if found is None:
            if self._neigh is None or len(self._edges) >= MAX_CACHED:
                self._neigh, self._edges = Neighbourhood(self.kg, self.timeout), {}
            t0 = time.perf_counter()
            try:
                found = frozenset(self._neigh.predicates(Iri(FB + mid), None))
            except KnowledgeGraphError as exc:  # a timeout, say: this candidate binds nothing (not asked again)
                log.warning("entity linking: the edges of %s could not be read: %s", mid, exc)
                found = frozenset()
            self.seconds += time.perf_counter() - t0
            self.queries += 1
            self._edges[mid] = found
        return found

    def connected(self, pairs: Iterable[tuple[str, str]]) -> set[frozenset[str]]:
        """The pairs of entities that one CVT joins in the KG (a path of two edges through a node without a name:
        the performance between a character and a film, the position a president held), in one query for the pairs
        not asked before (cached). A direct edge does not count: in a question that names an entity, the other end
        of a direct edge is most often the answer ("what language is spoken in singapore?": English). Ids are
        checked (:func:`memq.kg.base.check_ids`); a query that fails joins nothing (logged, not asked again)."""
        keys = [frozenset(p) for p in pairs]
        found = self._ask(self._connected, [k for k in keys if len(k) == 2],
                          lambda todo: connected_query([tuple(sorted(k)) for k in todo]), frozenset, "connects")
        return {k for k in keys if k in found}

    def beside(self, mid: str, limit: int) -> tuple[frozenset[str], bool]:
        """The entities that one CVT joins with ``mid`` in the KG (as :meth:`connected` joins a pair), up to
        ``limit`` of them, and whether that is all of them; one query, cached. The id is checked; a query that fails
        finds none (logged, not asked again)."""
        found = self._beside.get((mid, limit))
        if found is None:
            check_ids({mid})
            t0 = time.perf_counter()
            try:
                nodes = self.kg.select(cvt_query(mid), timeout=self.timeout)
                ends = [(r["m"].value, getattr(r.get("out"), "value", "") in ("true", "1")) for r in nodes
                        if isinstance(r.get("m"), Iri)]
                out, into = [m for m, forward in ends if forward], [m for m, forward in ends if not forward]
                rows = self.kg.select(beside_query(mid, out, into, limit + 1), timeout=self.timeout) \
                    if out or into else []
                ids = [r["x"].local for r in rows if isinstance(r.get("x"), Iri) and r["x"].is_freebase]
                found = frozenset(ids[:limit]), len(ids) <= limit
            except KnowledgeGraphError as exc:
                log.warning("entity linking: the entities one CVT joins with %s could not be read: %s", mid, exc)
                found = frozenset(), False
            self.seconds += time.perf_counter() - t0
            self.queries += 1
            if len(self._beside) >= MAX_CACHED:
                self._beside.clear()
            self._beside[(mid, limit)] = found
        return found

    def contained(self, pairs: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
        """The ``(place, region)`` pairs where the KG puts the place in the region (:func:`contained_query`: one
        ``location.location.containedby`` or ``contains`` edge, or two ``containedby`` edges), in one query for the
        pairs not asked before (cached with the others); checked ids; a query that fails finds none (logged)."""
        keys = [tuple(p) for p in pairs]
        found = self._ask(self._contained, [k for k in keys if k[0] != k[1]], contained_query, tuple, "contains")
        return {k for k in keys if k in found}

    def _ask(self, cache: dict, keys: list, query, key, what: str) -> set:
        """The ``keys`` (pairs of ids) that the KG holds, by ``query(pairs not in cache)``, whose rows' ``?a ?b``
        make a pair by ``key((a, b))``; the answers are kept in ``cache``."""
        todo = list(dict.fromkeys(k for k in keys if k not in cache))
        if todo:
            check_ids(set().union(*todo))
            t0 = time.perf_counter()
            try:
                rows = self.kg.select(query(todo), timeout=self.timeout)
                found = {key((r["a"].local, r["b"].local)) for r in rows
                         if isinstance(r.get("a"), Iri) and isinstance(r.get("b"), Iri)}
            except KnowledgeGraphError as exc:
                log.warning("entity linking: which of %d pairs the KG %s could not be read: %s", len(todo), what, exc)
                found = set()
            self.seconds += time.perf_counter() - t0
            self.queries += 1
            if len(cache) >= MAX_CACHED:
                cache.clear()
            cache.update((k, k in found) for k in todo)
        return {k for k in keys if cache.get(k)}

    def first_edges(self, statement) -> frozenset[Edge]:
        """A statement's edges at ``?entity1`` (its first edge, as it writes it), cached by statement id."""
        found = self._statement_edges.get(statement.id)
        if found is None:
            try:
                found = frozenset(statement_edges(statement, "entity1"))
            except Exception:  # a statement whose fragment does not parse binds nowhere
                found = frozenset()
            self._statement_edges[statement.id] = found
        return found

    def recalled(self, question: str, recall: int = 20) -> list[tuple[object, float, frozenset[Edge]]]:
        """Of the ``recall`` statements closest to ``question``, those with an edge at ``?entity1``: (statement,
        similarity, edges), most similar first."""
        out = []
        for record, _text, score in one_thread(lambda: self.bank.search(question, k=recall)):
            edges = self.first_edges(record.statement)
            if edges:
                out.append((record.statement, score, edges))
        return out

    def scores(self, question: str, mids: Iterable[str], recall: int = 20) -> dict[str, tuple[float, str | None]]:
        """Each candidate's (fit, id of the statement that gave it): the best similarity of the ``recall``
        statements closest to ``question`` that binds at it, (0.0, None) when none does."""
        recalled = self.recalled(question, recall)
        out: dict[str, tuple[float, str | None]] = {}
        for mid in mids:
            if mid in out:
                continue
            edges = self.edges(mid) if recalled else frozenset()
            out[mid] = next(((score, st.id) for st, score, first in recalled if score > 0 and first & edges),
                            (0.0, None))
        return out


def connected_query(pairs: list[tuple[str, str]]) -> str:
    """Standard SPARQL: the ``(?a ?b)`` of ``pairs`` (checked Freebase ids) joined by two edges through a node that
    has no ``type.object.name`` (a CVT), either way."""
    values = " ".join(f"(<{FB}{a}> <{FB}{b}>)" for a, b in pairs)
    unnamed = f"FILTER NOT EXISTS {{ ?m <{NAME_PREDICATE}> ?n }}"
    return (f"SELECT DISTINCT ?a ?b WHERE {{ VALUES (?a ?b) {{ {values} }} "
            f"{{ ?a ?p ?m . ?m ?q ?b . {unnamed} }} UNION {{ ?b ?p ?m . ?m ?q ?a . {unnamed} }} }}")


def cvt_query(mid: str) -> str:
    """Standard SPARQL: the nodes without a ``type.object.name`` (CVTs) at one edge from ``mid`` (a checked
    Freebase id), each with ``?out`` true where ``mid`` is the edge's subject."""
    entity, unnamed = f"<{FB}{mid}>", f"FILTER NOT EXISTS {{ ?m <{NAME_PREDICATE}> ?n }}"
    return (f"SELECT DISTINCT ?m ?out WHERE {{ {{ {entity} ?p ?m . BIND(true AS ?out) }} UNION "
            f"{{ ?m ?p {entity} . BIND(false AS ?out) }} FILTER(isIRI(?m)) {unnamed} }}")


def beside_query(mid: str, out: list[str], into: list[str], limit: int) -> str:
    """Standard SPARQL: up to ``limit`` entities ``?x`` at the far edge of the CVTs ``out`` (nodes ``mid`` has an
    edge to; full IRIs from :func:`cvt_query`) and ``into`` (nodes with an edge to ``mid``), in the direction of the
    path: :func:`connected_query`'s shape with one end open. Asked apart from :func:`cvt_query` because a store may
    otherwise read every edge into the far end first (a US state: half a second against 10 ms)."""
    entity = f"<{FB}{mid}>"
    parts = [f"{{ VALUES ?m {{ {' '.join(f'<{m}>' for m in out)} }} ?m ?q ?x }}"] if out else []
    parts += [f"{{ VALUES ?m {{ {' '.join(f'<{m}>' for m in into)} }} ?x ?p ?m }}"] if into else []
    return f"SELECT DISTINCT ?x WHERE {{ {' UNION '.join(parts)} FILTER(isIRI(?x) && ?x != {entity}) }} LIMIT {limit}"


CONTAINEDBY, CONTAINS = f"<{FB}location.location.containedby>", f"<{FB}location.location.contains>"


def contained_query(pairs: list[tuple[str, str]]) -> str:
    """Standard SPARQL: the ``(?a ?b)`` of ``pairs`` (checked Freebase ids) where ``?a`` is in ``?b``: one
    containment edge either way, or two ``containedby`` edges (a city's county, then its state)."""
    values = " ".join(f"(<{FB}{a}> <{FB}{b}>)" for a, b in pairs)
    return (f"SELECT DISTINCT ?a ?b WHERE {{ VALUES (?a ?b) {{ {values} }} {{ ?a {CONTAINEDBY} ?b }} UNION "
            f"{{ ?b {CONTAINS} ?a }} UNION {{ ?a {CONTAINEDBY} ?m . ?m {CONTAINEDBY} ?b }} }}")


def one_thread(search):
    """``search()`` with FAISS on one OpenMP thread: one question's search over a flat index of ~64k rows takes
    ~8 ms so, and 28-33 ms on two threads of the shared 2-core machine (threads wait on each other); the previous
    thread count is restored."""
    import faiss

    threads = faiss.omp_get_max_threads()
    if threads == 1:
        return search()
    faiss.omp_set_num_threads(1)
    try:
        return search()
    finally:
        faiss.omp_set_num_threads(threads)
