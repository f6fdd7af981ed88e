"""SparqlEndpoint against a scripted local HTTP server: retries, truncation, timeouts, errors."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memq.errors import KnowledgeGraphError
from memq.kg import EndpointConfig, KnowledgeGraph, SparqlEndpoint
from memq.kg.endpoint import parse_results
from memq.sparql.model import XSD, Iri, Literal

QUERY = "SELECT ?x WHERE { <http://example.org/a> <http://example.org/p> ?x }"
FAST = EndpointConfig(timeout=5, retries=2, backoff=0.01)


def _json(rows: list[dict]) -> bytes:
    return json.dumps({"head": {"vars": ["x"]}, "results": {"bindings": rows}}).encode()


ONE_ROW = _json([{"x": {"type": "uri", "value": "http://example.org/b"}}])


class Scripted:
    """A local server answering from a list of ``(status, headers, body, delay)``; the last one repeats."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.requests: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server API
                length = int(self.headers.get("Content-Length", 0))
                owner.requests.append(self.rfile.read(length).decode())
                status, headers, body, delay = owner.replies[min(len(owner.requests), len(owner.replies)) - 1]
                time.sleep(delay)
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Type", "application/sparql-results+json" if status == 200
                                     else "text/plain")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/sparql"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def test_is_a_knowledge_graph():
    assert isinstance(SparqlEndpoint("http://127.0.0.1:1/sparql"), KnowledgeGraph)
    with pytest.raises(ValueError, match="must start with http"):
        SparqlEndpoint("localhost:8890/sparql")


def test_closed_port_names_the_url():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/sparql"
    endpoint = SparqlEndpoint(url, EndpointConfig(retries=1, backoff=0.01))
    with pytest.raises(KnowledgeGraphError, match=f"after 2 attempts at {url}.*refused.*query: SELECT"):
        endpoint.select(QUERY)
    assert endpoint.requests == 2


def test_retries_5xx_then_succeeds(caplog):
    replies = [(503, {}, b"busy", 0), (502, {}, b"bad gateway", 0), (200, {}, ONE_ROW, 0)]
    with Scripted(replies) as server, caplog.at_level(logging.WARNING, "memq.kg.endpoint"):
        rows = SparqlEndpoint(server.url, FAST).select(QUERY)
    assert rows == [{"x": Iri("http://example.org/b")}]
    assert len(server.requests) == 3
    assert "retry 2/2" in caplog.text
    assert "query=SELECT" in server.requests[0]  # POSTed, form-encoded


def test_gives_up_after_bounded_retries():
    with Scripted([(500, {}, b"internal trouble", 0)]) as server:
        with pytest.raises(KnowledgeGraphError, match="after 3 attempts"):
            SparqlEndpoint(server.url, FAST).select(QUERY)
        assert len(server.requests) == 3


def test_bad_request_is_not_retried():
    body = b"Virtuoso 37000 Error SP030: SPARQL compiler, line 1: syntax error\n\nSPARQL query:\nSELECT"
    with Scripted([(400, {}, body, 0)]) as server:
        with pytest.raises(KnowledgeGraphError, match="SP030.*query: SELECT \\?x WHERE"):
            SparqlEndpoint(server.url, FAST).select(QUERY)
        assert len(server.requests) == 1


def test_deterministic_virtuoso_500_is_not_retried():
    body = b"Virtuoso 22007 Error DT006: Cannot convert x to datetime\n\nSPARQL query:\nSELECT"
    with Scripted([(500, {}, body, 0)]) as server:
        with pytest.raises(KnowledgeGraphError, match="DT006"):
            SparqlEndpoint(server.url, FAST).select(QUERY)
        assert len(server.requests) == 1


def test_slow_server_times_out_without_retry():
    with Scripted([(200, {}, ONE_ROW, 1.5)]) as server:
        started = time.perf_counter()
        with pytest.raises(KnowledgeGraphError, match=f"timed out after 0.3 s at {server.url}.*query: SELECT"):
            SparqlEndpoint(server.url, FAST).select(QUERY, timeout=0.3)
        assert time.perf_counter() - started < 1.4
        assert len(server.requests) == 1


def test_truncation_header_warns_or_raises(caplog):
    with Scripted([(200, {"X-SPARQL-MaxRows": "1"}, ONE_ROW, 0)]) as server:
        endpoint = SparqlEndpoint(server.url, FAST)
        with caplog.at_level(logging.WARNING, "memq.kg.endpoint"):
            assert len(endpoint.select(QUERY)) == 1
        assert "truncated (the server cut it at ResultSetMaxRows=1)" in caplog.text
        assert endpoint.truncated == 1
        strict = SparqlEndpoint(server.url, EndpointConfig(on_truncation="error"))
        with pytest.raises(KnowledgeGraphError, match="truncated"):
            strict.select(QUERY)


def test_row_count_at_max_rows_warns(caplog):
    with Scripted([(200, {}, ONE_ROW, 0)]) as server:
        endpoint = SparqlEndpoint(server.url, EndpointConfig(max_rows=1))
        with caplog.at_level(logging.WARNING, "memq.kg.endpoint"):
            endpoint.select(QUERY)
        assert "exactly max_rows=1 rows" in caplog.text and endpoint.truncated == 1
        unlimited = SparqlEndpoint(server.url, EndpointConfig(max_rows=None))
        unlimited.select(QUERY)
        assert unlimited.truncated == 0


def test_non_json_answer_is_an_error():
    with Scripted([(200, {}, b"<html>hello</html>", 0)]) as server:
        with pytest.raises(KnowledgeGraphError, match="no JSON SELECT result"):
            SparqlEndpoint(server.url, FAST).select(QUERY)


def test_names_over_http():
    body = json.dumps({"head": {"vars": ["s", "n"]}, "results": {"bindings": [
        {"s": {"type": "uri", "value": "http://rdf.freebase.com/ns/m.1"},
         "n": {"type": "literal", "value": "Un", "xml:lang": "fr"}},
        {"s": {"type": "uri", "value": "http://rdf.freebase.com/ns/m.1"},
         "n": {"type": "literal", "value": "One", "xml:lang": "en"}}]}}).encode()
    with Scripted([(200, {}, body, 0)]) as server:
        assert SparqlEndpoint(server.url, FAST).names(["m.1"]) == {"m.1": "One"}
        assert "VALUES" in server.requests[0]


def test_json_term_conventions():
    body = json.dumps({"head": {"vars": ["a", "b", "c", "d", "e", "f"]}, "results": {"bindings": [{
        "a": {"type": "uri", "value": "http://x/"},
        "b": {"type": "literal", "value": "hi", "xml:lang": "EN"},
        "c": {"type": "typed-literal", "datatype": XSD + "integer", "value": "3"},
        "d": {"type": "literal", "datatype": XSD + "string", "value": "s"},
        "e": {"type": "bnode", "value": "b0"},
        "f": {"type": "literal", "value": "plain"}}]}}).encode()
    names, rows = parse_results(body)
    assert names == ["a", "b", "c", "d", "e", "f"]
    assert rows == [{"a": Iri("http://x/"), "b": Literal("hi", None, "en"), "c": Literal("3", XSD + "integer"),
                     "d": Literal("s"), "e": Iri("_:b0"), "f": Literal("plain")}]
    with pytest.raises(ValueError, match="ASK"):
        parse_results(b'{"head": {}, "boolean": true}')


ORDERED = ("PREFIX ns: <http://rdf.freebase.com/ns/>\nSELECT DISTINCT ?x WHERE { ns:m.0b90_r ns:a.b.c ?x . "
           "?x ns:a.b.pop ?sk0 . } ORDER BY DESC(xsd:float(?sk0)) LIMIT 1")


def test_spec_order_groups_a_distinct_query_ordered_by_an_unprojected_key():
    from urllib.parse import parse_qs

    from memq.kg.dialect import spec_order
    from memq.sparql import parse_query, to_standard

    sent = to_standard(spec_order(parse_query(ORDERED)))
    assert "GROUP BY ?x" in sent and f"ORDER BY DESC(MAX(<{XSD}float>(?sk0)))" in sent
    ascending = to_standard(spec_order(parse_query(ORDERED.replace("DESC(xsd:float(?sk0))", "?sk0"))))
    assert "ORDER BY ASC(MIN(?sk0))" in ascending
    for same in (ORDERED.replace("DISTINCT ", ""),            # no DISTINCT: the standard order holds
                 ORDERED.replace("SELECT DISTINCT ?x", "SELECT DISTINCT ?x ?sk0"),  # key projected
                 ORDERED.replace("DESC(xsd:float(?sk0))", "?x")):
        assert spec_order(parse_query(same)) == parse_query(same)
    with Scripted([(200, {}, _json([]), 0)]) as server:
        SparqlEndpoint(server.url, FAST).select(ORDERED)
        SparqlEndpoint(server.url, EndpointConfig(timeout=5, spec_order=False)).select(ORDERED)
        first, second = (parse_qs(r)["query"][0] for r in server.requests)
    assert "GROUP BY" in first and "GROUP BY" not in second
