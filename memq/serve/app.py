"""The HTTP application of ``memq serve``: :func:`create_app` builds it around one loaded pipeline.

``POST /answer`` takes ``{"question": str, "entities": {"m.x": "Name", ...}}`` (``entities`` may be names alone,
``["Jamaica"]``, or left out: then they are linked from the question, :mod:`memq.link`) and, optionally,
``"plan": ["Find ..., assign it to ?x.", ..., "Finally the answer is ?x."]`` (one step a string; the
planner is then skipped, as with ``memq.answer(..., plan=)``). It answers with:

* 200: the JSON that ``memq ask --json`` prints (:func:`memq.ask.answer_json`: answers, SPARQL, plan,
  recalled statements, fallbacks, self-repair attempts, timings per stage, LLM calls) plus
  ``"server": {"queued_ms", "total_ms"}``;
* 400: bad input, checked before anything reaches the KG, with the same checks and messages as
  :func:`memq.answer` (:func:`memq.api.check_request`): a body that is not a JSON object, a missing, unknown
  or mistyped field, an empty question or one over 1,000 characters, an empty entities or more than 20, an id that
  is not a Freebase id, a name with characters a name cannot have; also a plan that is not a list of at most
  20 step strings, or has no readable step, a plan without entities as ids with names, and a request without a
  plan to a server that has no planner;
* 413: a body over :data:`MAX_BODY_BYTES`;
* 422: the pipeline could not answer (a :class:`~memq.errors.MemQError` such as an entity id the KG does
  not know, a question in which no entity is found, planner output with no readable step, statements that do not
  fit together);
* 503: the KG or the memory bank failed (:class:`~memq.errors.KnowledgeGraphError`,
  :class:`~memq.errors.MemoryBankError`, :class:`~memq.errors.EntityIndexError`), or ``max_queue`` requests are
  already waiting;
* 500: only for a bug: ``{"error": "internal", ...}`` without the traceback, which goes to the log.

Every error body is ``{"error": kind, "detail": message}``. ``GET /health`` reports the loaded memory bank,
KG and planner (paths relative to the repository or the working directory, sizes in bytes) and the queue.

Concurrency: the pipeline is not thread-safe (the embedded store talks to its timeout worker over one pipe;
the planner's model and the recall state are shared), so one worker thread runs every pipeline call, in
arrival order. The event loop only parses, validates and waits, so ``/health`` and bad input are answered
at once while a question is being answered; at most ``max_queue`` requests are admitted (running or
waiting) and the next gets a 503.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, ValidationError

from memq import __version__
from memq.api import MAX_QUESTION_CHARS, check_request
from memq.api import pipeline as shared_pipeline
from memq.ask import answer_json
from memq.errors import EntityIndexError, KnowledgeGraphError, MemoryBankError, MemQError
from memq.pipeline import Config, Pipeline, shown_path
from memq.plan import parse_plan
from memq.plan.prompt import entity_names
from memq.types import Plan

__all__ = ["MAX_BODY_BYTES", "MAX_PLAN_STEPS", "AnswerRequest", "SerialWorker", "create_app"]

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
MAX_PLAN_STEPS = 20


class AnswerRequest(BaseModel):
    """The body of ``POST /answer``; types are strict (no number read as a string) and unknown fields refused."""

    model_config = ConfigDict(extra="forbid", strict=True)

    question: str
    entities: dict[str, str] | list[str] | None = None
    plan: list[str] | None = None


class BadRequest(Exception):
    """An input error: answered with ``status`` and the message."""

    def __init__(self, message: str, status: int = 400, kind: str = "bad_request") -> None:
        super().__init__(message)
        self.status, self.kind = status, kind


class SerialWorker:
    """Runs calls one at a time on one thread, in arrival order; at most ``max_pending`` admitted at once."""

    def __init__(self, max_pending: int) -> None:
        if max_pending < 1:
            raise ValueError(f"max_queue must be >= 1, got {max_pending}")
        self.max_pending = max_pending
        self.pending = 0  # admitted, running or waiting
        self.finished = 0
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memq-serve-pipeline")

    async def call(self, fn):
        """``(fn(), seconds it waited for the worker)``; raises BadRequest (503) when the queue is full."""
        with self._lock:
            if self.pending >= self.max_pending:
                raise BadRequest(f"the server is busy: {self.pending} requests are running or waiting "
                                 f"(max_queue {self.max_pending}); try again shortly", 503, "busy")
            self.pending += 1
        submitted = time.perf_counter()

        def job():
            waited = time.perf_counter() - submitted
            return fn(), waited

        future = self._pool.submit(job)
        future.add_done_callback(self._done)
        return await asyncio.wrap_future(future)

    def _done(self, _: Future) -> None:
        with self._lock:
            self.pending -= 1
            self.finished += 1

    def close(self) -> None:
        """Drop the waiting calls and wait for the running one."""
        self._pool.shutdown(wait=True, cancel_futures=True)


def shown_url(url: str) -> str:
    """An endpoint URL without credentials, query or fragment."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _bytes(path: str | Path | None) -> int | None:
    """The size of a file, or of the files directly in a directory; None if there is none."""
    if path is None:
        return None
    p = Path(path)
    if p.is_file():
        return p.stat().st_size
    if p.is_dir():
        return sum(f.stat().st_size for f in p.iterdir() if f.is_file())
    return None


def describe_loaded(pipe: Pipeline) -> dict:
    """What ``GET /health`` reports about the loaded parts (computed once, at start-up)."""
    config = pipe.config
    bank = pipe.bank
    embedder = getattr(bank, "embedder", None)
    memory = {"path": shown_path(config.memory), "bytes": _bytes(config.memory), "statements": len(bank),
              "embedder": getattr(embedder, "name", None), "dim": getattr(embedder, "dim", None)}
    if getattr(embedder, "fallback", None):
        memory["embedder_fallback"] = embedder.fallback
    if config.endpoint:
        kg = {"endpoint": shown_url(config.endpoint)}
    else:
        kg = {"path": shown_path(config.kg_file), "bytes": _bytes(config.kg_file), "store": type(pipe.kg).__name__}
    planner: dict = {"kind": config.planner}
    if config.planner != "given":
        adapter = getattr(pipe.planner, "adapter", None)
        planner.update(name=getattr(pipe.planner, "name", type(pipe.planner).__name__),
                       adapter=shown_path(adapter), adapter_bytes=_bytes(adapter))
        llm = getattr(pipe.planner, "llm", None)
        if getattr(llm, "weights", None):  # llama.cpp: f16 or shipped weights, what it drafts from, its threads
            planner.update(weights=llm.weights, drafts=llm.drafts,
                           threads="governed (memq.llm.threads)" if getattr(llm, "governed", False) else llm.threads)
    else:
        planner["name"] = "none: each request sends its plan"
    if hasattr(config, "backend"):
        planner["backend"] = config.backend
    return {"memory": memory, "kg": kg, "planner": planner,
            "grounded": config.grounded, "repair": config.repair, "kg_timeout_s": config.timeout}


def _error(status: int, kind: str, detail: str) -> JSONResponse:
    return JSONResponse({"error": kind, "detail": detail}, status_code=status)


def _short(value: object, limit: int = 80) -> str:
    """``value`` as JSON (as the client wrote it), cut to ``limit`` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):  # NaN, Infinity: not JSON, though Python's parser reads them
        text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def explain(exc: ValidationError) -> str:
    """A pydantic error on the request body as one line naming the field and the bad value."""
    parts = []
    errors = exc.errors(include_url=False)
    # entities is an object (ids with names) or a list of names: pydantic reports each branch of the union, tagged
    # in the location; a branch the value is not even the type of is left out when the other has a closer error
    wrong_kind = [e for e in errors if e["loc"][1:] in (("dict[str,str]",), ("list[str]",))]
    for err in wrong_kind:
        errors.remove(err)
    if wrong_kind and not any(e["loc"][:1] == ("entities",) for e in errors):
        errors.insert(0, {**wrong_kind[0], "loc": ("entities",), "type": "entities_type",
                          "msg": "Input should be an object of id -> name or a list of names"})
    for err in errors[:3]:
        err = {**err, "loc": tuple(x for x in err["loc"] if x not in ("dict[str,str]", "list[str]"))}
        where = ".".join(str(x) for x in err["loc"])
        if err["type"] == "json_invalid":
            return f"the request body is not JSON: {err.get('ctx', {}).get('error', err['msg'])}"
        if err["type"] == "missing":
            parts.append(f"missing field {where!r}")
        elif err["type"] == "extra_forbidden":
            parts.append(f"unknown field {where!r} (expected question, entities and optionally plan)")
        else:
            parts.append(f"{where or 'the request body'}: {err['msg']}, got {_short(err['input'])}")
    return "; ".join(parts)


async def read_body(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The request body, refused (413) past ``limit`` bytes without reading the rest."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise BadRequest(f"the request body is {length} bytes; at most {limit} are accepted", 413, "too_large")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BadRequest(f"the request body is over {limit} bytes", 413, "too_large")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_request(body: bytes, has_planner: bool) -> tuple[str, dict[str, str] | list[str] | None, Plan | None]:
    """Question, entities and plan of a request body, all checked; raises BadRequest naming the bad value."""
    if not body.strip():
        raise BadRequest('the request body is empty; send JSON: {"question": ..., "entities": {"m.x": "Name"}}')
    try:
        req = AnswerRequest.model_validate_json(body)
    except ValidationError as exc:  # a ValueError too: caught first
        raise BadRequest(explain(exc)) from None
    try:
        question, entities = check_request(req.question, req.entities)
        if req.plan is not None and not isinstance(entities, dict):
            raise ValueError("a request with a plan needs its entities as ids with names "
                             '({"m.x": "Name"}): the plan names them')
        plan = None if req.plan is None else request_plan(req.plan, entities)
    except ValueError as exc:  # PlanParseError included
        raise BadRequest(str(exc)) from None
    if plan is None and not has_planner:
        raise BadRequest('this server has no planner (memq serve --planner given): send the plan as '
                         '"plan": ["Find ..., assign it to ?x.", ..., "Finally the answer is ?x."]')
    return question, entities, plan


def request_plan(steps: list[str], entities: dict[str, str]) -> Plan:
    """A plan sent with the request: at most MAX_PLAN_STEPS non-empty step strings, read like planner output."""
    if not steps:
        raise ValueError("plan must hold at least one step, got []")
    if len(steps) > MAX_PLAN_STEPS:
        raise ValueError(f"plan has {len(steps)} steps; at most {MAX_PLAN_STEPS} are accepted")
    for i, step in enumerate(steps):
        if not step.strip() or len(step) > MAX_QUESTION_CHARS or "\x00" in step:
            raise ValueError(f"plan step {i + 1} must be a non-empty line of at most {MAX_QUESTION_CHARS} "
                             f"characters, got {_short(step)}")
    return parse_plan("\n".join(steps), entity_names(entities))


def create_app(config: Config | None = None, *, pipeline: Pipeline | None = None, max_queue: int = 64,
               warm: bool = True) -> FastAPI:
    """The FastAPI application serving ``pipeline`` (default: :func:`memq.api.pipeline` of ``config``).

    The memory bank, the KG and the planner's model load here, once (``warm``), so a bad path or a missing
    model fails at start-up with its MemQError, and the first request is as fast as the next.
    """
    pipe = pipeline if pipeline is not None else shared_pipeline(config)
    if warm:
        t0 = time.perf_counter()
        pipe.warm_up()
        log.info("memq serve: loaded in %.1f s", time.perf_counter() - t0)
    loaded = describe_loaded(pipe)
    has_planner = pipe.config.planner != "given"
    worker = SerialWorker(max_queue)
    started = time.time()

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        yield
        # uvicorn ends on SIGTERM/SIGINT by re-raising the signal after this: no atexit handler runs, so the
        # embedded store's timeout worker process is stopped here or it would outlive the server
        await asyncio.to_thread(worker.close)
        close = getattr(pipe.kg, "close", None)
        if callable(close):
            close()

    app = FastAPI(title="memq", version=__version__, lifespan=lifespan,
                  description="Question answering over knowledge graphs (MemQ): POST /answer, GET /health.")
    app.state.pipeline, app.state.worker = pipe, worker

    @app.post("/answer", openapi_extra={"requestBody": {"required": True, "content": {
        "application/json": {"schema": AnswerRequest.model_json_schema()}}}})
    async def answer(request: Request) -> JSONResponse:
        t0 = time.perf_counter()
        try:
            question, entities, plan = parse_request(await read_body(request), has_planner)
            result, waited = await worker.call(lambda: pipe.answer(question, entities, plan=plan))
        except BadRequest as exc:
            return _error(exc.status, exc.kind, str(exc))
        except (KnowledgeGraphError, MemoryBankError, EntityIndexError) as exc:
            return _error(503, "unavailable", str(exc))
        except MemQError as exc:
            return _error(422, "unanswerable", str(exc))
        except Exception as exc:  # noqa: BLE001 - a bug: logged with its traceback, reported without it
            log.exception("memq serve: internal error on /answer")
            return _error(500, "internal", f"{type(exc).__name__} (see the server log)")
        body = answer_json(result)
        body["server"] = {"queued_ms": round(1000 * waited, 2), "total_ms": round(1000 * (time.perf_counter() - t0), 2)}
        return JSONResponse(body)

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "memq": __version__, **loaded,
                "queue": {"pending": worker.pending, "max_queue": worker.max_pending},
                "finished": worker.finished, "uptime_s": round(time.time() - started, 1)}

    return app
