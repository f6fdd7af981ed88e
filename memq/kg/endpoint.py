"""A SPARQL endpoint over HTTP (Virtuoso, or any SPARQL 1.1 server) with JSON results.

* Timeouts: ``timeout`` is the socket timeout of the HTTP request; a server that
  computes without sending anything for that long is given up on. The server
  may keep computing (Virtuoso stops at its own ``MaxQueryExecutionTime``).
* Retries: connection failures and 5xx answers are retried ``retries`` times
  with exponential backoff (``backoff``, ``2*backoff``, ...). A 4xx answer (a
  malformed query), a Virtuoso error that will not change on retry (syntax,
  a failed cast, its own timeout) and a client-side timeout are not retried.
* Truncation: Virtuoso cuts a result at ``ResultSetMaxRows`` without failing.
  It then sends an ``X-SPARQL-MaxRows`` header; a result with exactly
  ``max_rows`` rows is treated the same way. Either logs a warning (or raises,
  with ``on_truncation="error"``) and counts in :attr:`SparqlEndpoint.truncated`.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import time
import urllib.error
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NoReturn

from SPARQLWrapper import JSON, POST, SPARQLWrapper
from SPARQLWrapper.SPARQLExceptions import SPARQLWrapperException

from memq.errors import KnowledgeGraphError
from memq.kg.base import Row, Term, lookup_names, make_literal, short_query
from memq.kg.dialect import spec_order, to_standard
from memq.sparql.model import Iri

log = logging.getLogger(__name__)

TRUNCATION_MODES = ("warn", "error")
_VIRTUOSO_ERROR = re.compile(r"Virtuoso (\w{5}) Error (\w+)")
_RETRYABLE_STATES = ("08", "40")  # connection exceptions, transaction rollback (deadlock)


@dataclass(frozen=True)
class EndpointConfig:
    """How a :class:`SparqlEndpoint` talks to its server.

    ``max_rows`` is the server's ``ResultSetMaxRows`` (Virtuoso's default is
    10,000; ``None`` turns the row-count check off). ``rewrite`` sends the
    standard form of a gold-dialect query (:func:`memq.kg.dialect.to_standard`);
    ``spec_order`` (with ``rewrite``) also applies :func:`memq.kg.dialect.spec_order`,
    so that ``SELECT DISTINCT ... ORDER BY`` on a key that is not projected
    orders as the standard (and Oxigraph) does, not as Virtuoso does.
    """

    timeout: float | None = 60.0
    retries: int = 2
    backoff: float = 0.5
    max_rows: int | None = 10000
    on_truncation: str = "warn"
    rewrite: bool = True
    spec_order: bool = True

    def __post_init__(self) -> None:
        if self.timeout is not None and self.timeout <= 0:
            raise ValueError(f"timeout must be positive, got {self.timeout!r}")
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, got {self.retries!r}")
        if self.on_truncation not in TRUNCATION_MODES:
            raise ValueError(f"on_truncation {self.on_truncation!r}; expected one of {TRUNCATION_MODES}")


class _Retryable(Exception):
    """A failure worth another try."""


def _term(binding: dict) -> Term:
    kind = binding.get("type")
    value = binding.get("value", "")
    if kind == "uri":
        return Iri(value)
    if kind == "bnode":
        return Iri(value if value.startswith("_:") else "_:" + value)
    return make_literal(value, binding.get("datatype"), binding.get("xml:lang"))


def parse_results(body: bytes) -> tuple[list[str], list[Row]]:
    """Variables and rows of a SPARQL 1.1 JSON results document (``typed-literal`` accepted)."""
    doc = json.loads(body)
    if "boolean" in doc:
        raise ValueError("an ASK result, not a SELECT result")
    names = doc["head"]["vars"]
    rows = [{k: _term(v) for k, v in b.items()} for b in doc["results"]["bindings"]]
    return names, rows


class SparqlEndpoint:
    """A :class:`~memq.kg.base.KnowledgeGraph` behind a SPARQL HTTP URL."""

    def __init__(self, url: str, config: EndpointConfig = EndpointConfig()) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"endpoint URL must start with http:// or https://, got {url!r}")
        self.url = url
        self.config = config
        self.truncated = 0
        self.requests = 0

    def select(self, query: str, timeout: float | None = None) -> list[Row]:
        """Rows of a SELECT query; see :class:`~memq.kg.base.KnowledgeGraph`."""
        if not isinstance(query, str) or not query.strip():
            raise KnowledgeGraphError(f"empty SPARQL query for {self.url}: {query!r}")
        if not self.config.rewrite:
            text = query
        else:
            text = to_standard(query, spec_order if self.config.spec_order else None)
        return self._run(text, query, timeout if timeout is not None else self.config.timeout)

    def names(self, ids: Iterable[str]) -> dict[str, str]:
        """English names of Freebase ids (``type.object.name``, ``@en`` preferred)."""
        return lookup_names(lambda q: self._run(q, q, self.config.timeout), ids)

    def _error(self, what: str, query: str, reason: object = "") -> KnowledgeGraphError:
        why = f": {short_query(str(reason), 300)}" if reason else ""
        return KnowledgeGraphError(f"{what} at {self.url}{why} | query: {short_query(query)}")

    def _run(self, text: str, original: str, timeout: float | None) -> list[Row]:
        attempts = self.config.retries + 1
        for attempt in range(attempts):
            try:
                return self._once(text, original, timeout)
            except _Retryable as exc:
                if attempt + 1 == attempts:
                    raise self._error(f"SPARQL endpoint failed after {attempts} attempts", original,
                                      exc.args[0]) from exc
                delay = self.config.backoff * 2 ** attempt
                log.warning("SPARQL endpoint %s failed (%s); retry %d/%d in %.2g s", self.url,
                            exc.args[0], attempt + 1, self.config.retries, delay)
                time.sleep(delay)
        raise AssertionError("unreachable")

    def _once(self, text: str, original: str, timeout: float | None) -> list[Row]:
        wrapper = SPARQLWrapper(self.url)
        wrapper.setQuery(text)
        wrapper.setMethod(POST)
        wrapper.setReturnFormat(JSON)
        wrapper.timeout = timeout  # type: ignore[assignment]  # setTimeout() rounds to whole seconds
        self.requests += 1
        try:
            response = wrapper.query().response
            headers = response.info()
            body = response.read()
        except SPARQLWrapperException as exc:
            self._raise_http(exc, original, timeout)
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace") if exc.fp else exc.reason
            if exc.code >= 500:
                raise _Retryable(f"HTTP {exc.code} {detail}") from exc
            raise self._error(f"SPARQL endpoint answered HTTP {exc.code}", original, detail) from exc
        except TimeoutError as exc:
            raise self._error(f"SPARQL query timed out after {timeout:g} s", original) from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, (TimeoutError, socket.timeout)):
                raise self._error(f"SPARQL query timed out after {timeout:g} s", original) from exc
            raise _Retryable(f"cannot connect: {exc.reason}") from exc
        except (ConnectionError, OSError) as exc:
            raise _Retryable(f"connection failed: {exc}") from exc
        try:
            _, rows = parse_results(body)
        except (ValueError, KeyError, TypeError) as exc:
            raise self._error("SPARQL endpoint sent no JSON SELECT result", original,
                              f"{exc}; body starts {body[:200]!r}") from exc
        self._check_truncation(headers, rows, original)
        return rows

    def _raise_http(self, exc: SPARQLWrapperException, original: str, timeout: float | None) -> NoReturn:
        detail = str(exc)
        if "Response:" in detail:  # keep the server's own words, not the wrapper's preamble
            detail = detail.split("Response:", 1)[1].strip()
            detail = detail.split("SPARQL query:", 1)[0].replace("\\n", " ").strip()
            detail = detail[2:] if detail[:2] in ("b'", 'b"') else detail
        state = _VIRTUOSO_ERROR.search(detail)
        if state and state.group(1) == "S1T00":
            raise self._error(f"SPARQL query timed out on the server (limit {timeout} s here)",
                              original, detail) from exc
        internal = type(exc).__name__ == "EndPointInternalError"
        if internal and not (state and state.group(1)[:2] not in _RETRYABLE_STATES):
            raise _Retryable(f"HTTP 500 {detail}") from exc
        raise self._error(f"SPARQL endpoint rejected the query ({type(exc).__name__})",
                          original, detail) from exc

    def _check_truncation(self, headers, rows: list[Row], original: str) -> None:
        header = headers.get("X-SPARQL-MaxRows") if headers is not None else None
        limit = self.config.max_rows
        if header is None and not (limit is not None and len(rows) == limit):
            return
        self.truncated += 1
        why = (f"the server cut it at ResultSetMaxRows={header}" if header is not None
               else f"it has exactly max_rows={limit} rows")
        message = f"result of {len(rows)} rows is probably truncated ({why})"
        if self.config.on_truncation == "error":
            raise self._error(message, original)
        log.warning("%s at %s | query: %s", message, self.url, short_query(original, 200))
