"""Execute SPARQL on a knowledge graph: an embedded Oxigraph store or an HTTP endpoint.

>>> kg = OxigraphStore.from_file("data/kg/benchmark.nq.gz")      # doctest: +SKIP
>>> kg.select("PREFIX ns: <http://rdf.freebase.com/ns/> SELECT ?x WHERE { ns:m.03_r3 "
...           "ns:location.country.languages_spoken ?x }", timeout=10)   # doctest: +SKIP
[{'x': Iri(value='http://rdf.freebase.com/ns/m.01428y')}, ...]

Names resolve lazily, so ``import memq.kg`` loads neither pyoxigraph nor SPARQLWrapper.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path

from memq.errors import MemQError
from memq.kg.base import KnowledgeGraph, Row, Term

_LAZY = {
    "OxigraphStore": "memq.kg.oxigraph", "OxigraphConfig": "memq.kg.oxigraph",
    "SparqlEndpoint": "memq.kg.endpoint", "EndpointConfig": "memq.kg.endpoint",
    "VirtuosoServer": "memq.kg.virtuoso", "VirtuosoConfig": "memq.kg.virtuoso",
}

__all__ = ["EndpointConfig", "KnowledgeGraph", "OxigraphConfig", "OxigraphStore", "Row", "SparqlEndpoint",
           "Term", "VirtuosoConfig", "VirtuosoServer", "open_kg"]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'memq.kg' has no attribute {name!r}")


def open_kg(data: str, endpoint: str | None = None):
    """An HTTP endpoint when ``endpoint`` is given, else the embedded Oxigraph store of ``data``.

    ``data`` is an RDF file, opened through the on-disk store built from it once under the memq cache and checked
    against the file's hash (:meth:`~memq.kg.oxigraph.OxigraphStore.cached`), or an Oxigraph store directory."""
    if endpoint:
        from memq.kg.endpoint import SparqlEndpoint

        return SparqlEndpoint(endpoint)
    from memq.kg.oxigraph import OxigraphStore

    path = Path(data)
    if path.is_dir():
        return OxigraphStore(path, read_only=True)
    if not path.exists():
        raise MemQError(f"knowledge graph file {data} does not exist; build it with `memq kg build-benchmark`")
    return OxigraphStore.cached(path)
