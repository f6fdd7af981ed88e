"""memq serve: POST /answer answers as memq.answer() does, GET /health, bad input -> 400, errors -> JSON.

The app is built by :func:`memq.serve.create_app` on a small real KG (Oxigraph), a memory bank of the
statements of two real questions (hashing embedder) and a scripted planner holding their oracle plans.
Concurrency and the full queue are tested on a real uvicorn server on a loopback port.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from contextlib import contextmanager
from dataclasses import replace

import pytest
from fastapi.testclient import TestClient
from test_answer import TRIPLES, SpyKG, _question

import memq
from memq import api
from memq.ask import answer_json
from memq.decompose import decompose_dataset
from memq.describe.template import TemplateDescriber
from memq.errors import KnowledgeGraphError, MemoryBankError
from memq.kg.oxigraph import OxigraphStore
from memq.memory.bank import MemoryBank
from memq.memory.embed import HashingEmbedder
from memq.pipeline import Config, Pipeline
from memq.plan import ScriptedPlanner
from memq.plan.derive import derive_plan
from memq.serve import create_app
from memq.serve.app import MAX_BODY_BYTES
from memq.types import MemoryRecord

JAMAICA = {"m.03_r3": "Jamaica"}


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """(config, bank, kg, oracle plan texts by question, the two questions)."""
    root = tmp_path_factory.mktemp("serve")
    (root / "kg.nt").write_text(TRIPLES, encoding="utf-8")
    kg = SpyKG(OxigraphStore.from_file(root / "kg.nt"))
    describer = TemplateDescriber()
    questions = [_question("webqsp", "test", "WebQTest-0"), _question("webqsp", "train", "WebQTrn-0")]
    statements = decompose_dataset(questions)
    records = [MemoryRecord(s, tuple(d), "template")
               for s, d in zip(statements, describer.describe(statements), strict=True)]
    bank = MemoryBank.build(records, HashingEmbedder())
    bank.save(root / "bank")
    plans = {q.question: "\n".join(s.text for s in derive_plan(q, lambda s: describer.describe([s])[0][0]).steps)
             for q in questions}
    from memq.link.index import build_index

    build_index(kg.kg).save(root / "index")  # for requests without entities
    config = Config(memory=str(root / "bank"), kg=str(root / "kg.nt"), planner="fewshot",
                    entity_index=str(root / "index"))
    return config, bank, kg, plans, questions


def _pipe(parts, planner=None, kg=None, **changes):
    config, bank, spy, plans, _ = parts
    return Pipeline(replace(config, **changes), bank=bank, kg=kg or spy,
                    planner=planner if planner is not None else ScriptedPlanner(plans))


@pytest.fixture(scope="module")
def client(parts):
    with TestClient(create_app(pipeline=_pipe(parts))) as c:
        yield c


def _without_timings(body: dict) -> dict:
    return {k: v for k, v in body.items() if k not in ("timings", "server")}


def test_answer_is_what_memq_answer_returns(parts, client, monkeypatch):
    config, _, _, _, (jamaica, bieber) = parts
    monkeypatch.setitem(api._PIPELINES, config, _pipe(parts))  # memq.answer(config=config) uses this pipeline
    for q in (jamaica, bieber):
        entities = dict(q.parses[0].topic_entities)
        r = client.post("/answer", json={"question": q.question, "entities": entities})
        assert r.status_code == 200, r.text
        body = r.json()
        assert _without_timings(body) == _without_timings(answer_json(memq.answer(q.question, entities, config=config)))
        assert sorted(a["id"] for a in body["answers"]) == sorted(i for i, _ in q.parses[0].answers)
        assert body["llm_calls"] == 1 and body["recalled"] and body["sparql"].startswith("SELECT")
        assert set(body["timings"]) >= {"plan", "recall", "execute", "total"}
        assert body["server"]["total_ms"] >= body["server"]["queued_ms"] >= 0


def test_a_plan_sent_with_the_request_skips_the_planner(parts):
    _, _, _, plans, (_, bieber) = parts
    planner = ScriptedPlanner({})  # knows no question: a planner call would fail the request
    with TestClient(create_app(pipeline=_pipe(parts, planner=planner))) as c:
        r = c.post("/answer", json={"question": bieber.question, "entities": dict(bieber.parses[0].topic_entities),
                                    "plan": plans[bieber.question].splitlines()})
    assert r.status_code == 200, r.text
    assert [a["id"] for a in r.json()["answers"]] == ["m.0gxnnwq"]
    assert r.json()["llm_calls"] == 0 and planner.calls == 0 and "plan" not in r.json()["timings"]


def test_a_server_without_planner_needs_the_plan(parts):
    config, bank, spy, plans, (jamaica, _) = parts
    with TestClient(create_app(pipeline=Pipeline(replace(config, planner="given"), bank=bank, kg=spy))) as c:
        before = len(spy.queries)
        r = c.post("/answer", json={"question": jamaica.question, "entities": JAMAICA})
        assert r.status_code == 400 and "no planner" in r.json()["detail"] and len(spy.queries) == before
        r = c.post("/answer", json={"question": jamaica.question, "entities": JAMAICA,
                                    "plan": plans[jamaica.question].splitlines()})
        assert r.status_code == 200 and r.json()["answers"]
        assert c.get("/health").json()["planner"]["kind"] == "given"


def test_health_names_what_is_loaded_without_machine_paths(parts, client):
    _, bank, _, _, _ = parts
    h = client.get("/health").json()
    assert h["status"] == "ok" and h["memq"] == memq.__version__
    assert h["memory"] == {"path": "bank", "bytes": h["memory"]["bytes"], "statements": len(bank),
                           "embedder": "hashing-256", "dim": 256}
    assert h["memory"]["bytes"] > 1000 and h["kg"]["path"] == "kg.nt" and h["kg"]["bytes"] == len(TRIPLES.encode())
    assert h["planner"]["name"] == "scripted" and h["queue"]["max_queue"] == 64
    assert "/" not in h["memory"]["path"] + h["kg"]["path"]  # outside the repository: the name alone


def test_health_shows_repository_paths_relative_and_endpoints_without_credentials():
    from memq.pipeline import ROOT
    from memq.serve.app import shown_path, shown_url

    assert shown_path(ROOT / "memory_bank" / "webqsp") == "memory_bank/webqsp"
    assert shown_url("http://user:secret@db.example:8890/sparql?key=1") == "http://db.example:8890/sparql"


# ---------------------------------------------------------------------------------------------- bad input
def _body(question="what does jamaican people speak?", entities=None, **extra) -> bytes:
    obj = {"question": question, "entities": JAMAICA if entities is None else entities, **extra}
    return json.dumps(obj).encode()


_MANY = {f"m.0{i:02d}": f"Thing {i}" for i in range(21)}
_STEP = "Find the languages spoken of the country Jamaica, assign it to ?x."

# (request body, what the 400 message must name)
BAD_REQUESTS = [
    # not JSON
    (b"", "empty"),
    (b"  \n ", "empty"),
    (b"not json", "not JSON"),
    (b"{'question': 'what?', 'entities': {}}", "not JSON"),
    (b'{"question": "what?", "entities": {"m.03_r3": "Jamaica"}', "not JSON"),
    (b'{"question": "what?", "entities": {"m.03_r3": "Jamaica"}} trailing', "not JSON"),
    (b"\xff\xfe\x00", "not JSON"),
    (b"question=what%3F&entities=m.03_r3", "not JSON"),
    # not an object, a missing or unknown field
    (b"[]", "should be an object, got []"),
    (b'"what does jamaican people speak?"', "should be an object"),
    (b"42", "should be an object, got 42"),
    (b"null", "should be an object, got null"),
    (b"{}", "missing field 'question'"),
    (json.dumps({"entities": JAMAICA}).encode(), "missing field 'question'"),
    (_body(entity=JAMAICA), "unknown field 'entity'"),
    # wrong types
    (_body(question=42), "question: Input should be a valid string, got 42"),
    (_body(question=None), "question: Input should be a valid string, got null"),
    (_body(question=True), "got true"),
    (_body(question=["what?"]), 'got ["what?"]'),
    (b'{"question": NaN, "entities": {"m.03_r3": "Jamaica"}}', "question"),
    (_body(entities=[["m.03_r3", "Jamaica"]]), 'got ["m.03_r3", "Jamaica"]'),
    (_body(entities="m.03_r3"), 'entities: Input should be an object of id -> name or a list of names, got "m.03_r3"'),
    (_body(entities=5), "entities: Input should be an object of id -> name or a list of names, got 5"),
    (_body(entities=["Jamaica", 5]), "entities.1: Input should be a valid string, got 5"),
    (_body(entities={"m.03_r3": 5}), "entities.m.03_r3: Input should be a valid string, got 5"),
    (_body(entities={"m.03_r3": None}), "entities.m.03_r3: Input should be a valid string, got null"),
    (_body(entities={"m.03_r3": ["Jamaica"]}), 'got ["Jamaica"]'),
    # the question
    (_body(question=""), "question must be a non-empty string, got ''"),
    (_body(question="  \n\t "), "question must be a non-empty string"),
    (_body(question="q" * 1001), "question is 1001 characters long; at most 1000"),
    (_body(question="what? " * 2000), "question is 12000 characters long"),
    # the entities
    (_body(entities={}), "at least one topic entity"),
    (_body(entities=[]), "leave entities out to have memq link them"),
    (_body(entities=[f"Thing {i}" for i in range(21)]), "21 topic entities given; at most 20"),
    (_body(entities=["Jam\x00aica"]), "entity name 'Jam\\x00aica' contains characters a name cannot have"),
    (_body(entities=["Jamaica } UNION { ?s ?p ?o"]), "contains characters a name cannot have"),
    (_body(entities=["  "]), "an entity name must be a non-empty string, got '  '"),
    (_body(entities=["x" * 201]), "longer than 200 characters"),
    (_body(entities=["Jamaica"], plan=[_STEP]), "a request with a plan needs its entities as ids with names"),
    (json.dumps({"question": "what?", "plan": [_STEP]}).encode(), "a request with a plan needs its entities"),
    (_body(entities=_MANY), "21 topic entities given; at most 20"),
    (_body(entities={"M.03_R3": "Jamaica"}), "not a Freebase entity id (expected m.xxx or g.xxx): 'M.03_R3'"),
    (_body(entities={"m.03_r3>": "Jamaica"}), "'m.03_r3>'"),
    (_body(entities={"<http://example.org/x>": "Jamaica"}), "'<http://example.org/x>'"),
    (_body(entities={"m.03_r3> ?p ?o } UNION { ?s": "Jamaica"}), "not a Freebase entity id"),
    (_body(entities={"ns:m.03_r3": "Jamaica"}), "'ns:m.03_r3'"),
    (_body(entities={"m.": "Jamaica"}), "'m.'"),
    (_body(entities={"": "Jamaica"}), "not a Freebase entity id (expected m.xxx or g.xxx): ''"),
    (_body(entities={"q.03_r3": "Jamaica"}), "'q.03_r3'"),
    (_body(entities={"m.03_r3\n": "Jamaica"}), "'m.03_r3\\n'"),
    (_body(entities={"Jamaica": "m.03_r3"}), "'Jamaica'"),
    # names holding SPARQL syntax or characters a name cannot have
    (_body(entities={"m.03_r3": 'Jamaica" } ; DROP ALL ; #'}), "entity name 'Jamaica\" } ; DROP ALL ; #' of 'm.03_r3'"),
    (_body(entities={"m.03_r3": "Jamaica } UNION { ?s ?p ?o"}), "contains characters a name cannot have"),
    (_body(entities={"m.03_r3": "<http://rdf.freebase.com/ns/m.03_r3>"}), "contains characters a name cannot have"),
    (_body(entities={"m.03_r3": "Jamaica\nSELECT * WHERE { ?s ?p ?o }"}), "of 'm.03_r3'"),
    (_body(entities={"m.03_r3": "Jamaica\\"}), "contains characters a name cannot have"),
    (_body(entities={"m.03_r3": "Jam\x00aica"}), "contains characters a name cannot have"),
    (_body(entities={"m.03_r3": "x" * 201}), "contains characters a name cannot have"),
    (_body(entities={"m.03_r3": ""}), "entity 'm.03_r3' needs a non-empty name, got ''"),
    (_body(entities={"m.03_r3": "  "}), "needs a non-empty name"),
    # a plan sent with the request
    (_body(plan=_STEP), f"plan: Input should be a valid array, got {json.dumps(_STEP)}"),
    (_body(plan=[1, 2]), "plan.0: Input should be a valid string, got 1"),
    (_body(plan=[]), "plan must hold at least one step, got []"),
    (_body(plan=[_STEP] * 21), "plan has 21 steps; at most 20"),
    (_body(plan=["   "]), "plan step 1 must be a non-empty line"),
    (_body(plan=[_STEP, "x" * 1001]), "plan step 2 must be a non-empty line of at most 1000 characters"),
    (_body(plan=["nonsense words"]), "no readable plan step in planner output 'nonsense words'"),
]


@pytest.mark.parametrize("body, named", BAD_REQUESTS, ids=range(len(BAD_REQUESTS)))
def test_bad_input_is_a_400_naming_the_bad_value_and_nothing_reaches_the_kg(parts, client, body, named):
    spy, planner = parts[2], client.app.state.pipeline.planner
    before, calls = len(spy.queries), planner.calls
    r = client.post("/answer", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert r.json()["error"] == "bad_request"
    assert named in r.json()["detail"]
    assert "Traceback" not in r.text and 'File "' not in r.text
    assert len(spy.queries) == before and planner.calls == calls


def _api_shaped(body: bytes):
    """(question, entities) of a request body that memq.answer() could be called with, else None."""
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    if not isinstance(obj, dict) or set(obj) != {"question", "entities"}:
        return None
    if not isinstance(obj["question"], str) or not isinstance(obj["entities"], dict):
        return None
    if not all(isinstance(v, str) for v in obj["entities"].values()):
        return None
    return obj["question"], obj["entities"]


SAME_AS_API = [b for b, _ in BAD_REQUESTS if _api_shaped(b) is not None]


@pytest.mark.parametrize("body", SAME_AS_API, ids=range(len(SAME_AS_API)))
def test_serve_and_memq_answer_reject_the_same_input_with_the_same_message(parts, client, monkeypatch, body):
    config, spy = parts[0], parts[2]
    monkeypatch.setitem(api._PIPELINES, config, _pipe(parts))
    before = len(spy.queries)
    with pytest.raises(ValueError) as err:
        memq.answer(*_api_shaped(body), config=config)
    assert client.post("/answer", content=body).json()["detail"] == str(err.value)
    assert len(spy.queries) == before


def test_there_are_enough_bad_inputs_pinned():
    from test_answer import BAD_INPUTS

    assert len(BAD_REQUESTS) + len(BAD_INPUTS) >= 50 and len(SAME_AS_API) >= 20


@pytest.mark.parametrize("name", ["Jamaica's", "Select Comfort", "SELECT ?x WHERE", "Ja'maica; -- (1999) #1 ?x"])
def test_names_that_only_read_like_sparql_are_accepted(parts, client, name):
    # Names never enter a query (entities reach the KG by id), so apostrophes and keywords are fine. The
    # scripted plan says "Jamaica", which these names do not match: the request passes validation, reaches
    # the KG with the id alone, and the pipeline answers or says why it cannot.
    spy = parts[2]
    before = len(spy.queries)
    r = client.post("/answer", json={"question": "what does jamaican people speak?", "entities": {"m.03_r3": name}})
    assert r.status_code in (200, 422), r.text
    assert spy.queries[before:] and not any(name in q for q in spy.queries[before:])


def test_a_body_over_the_limit_is_refused_before_it_is_read(client):
    r = client.post("/answer", content=b"{" + b" " * MAX_BODY_BYTES + b"}")
    assert r.status_code == 413 and r.json()["error"] == "too_large" and str(MAX_BODY_BYTES) in r.json()["detail"]


# --------------------------------------------------------------------------------------- pipeline errors
class FailingKG:
    def __init__(self, exc):
        self.exc = exc

    def select(self, query, timeout=None):
        raise self.exc

    def names(self, ids):
        raise self.exc


class RaisingPlanner:
    name = "raising"

    def __init__(self, exc):
        self.exc, self.calls = exc, 0

    def plan(self, question, entities):
        self.calls += 1
        raise self.exc


@pytest.mark.parametrize("pipe_kwargs, status, kind, named", [
    ({"kg": FailingKG(KnowledgeGraphError("endpoint http://db.example/sparql timed out"))}, 503, "unavailable",
     "db.example"),
    ({"planner": RaisingPlanner(MemoryBankError("index.faiss: sha256 mismatch"))}, 503, "unavailable", "sha256"),
    ({"planner": ScriptedPlanner({"what does jamaican people speak?": "I cannot plan this."})}, 422,
     "unanswerable", "no readable plan step"),
    ({"planner": ScriptedPlanner({})}, 422, "unanswerable", "scripted planner has no plan"),
    ({"planner": RaisingPlanner(RuntimeError("a bug with a secret path /somewhere"))}, 500, "internal",
     "RuntimeError"),
])
def test_pipeline_errors_are_json_with_a_fitting_status(parts, pipe_kwargs, status, kind, named):
    with TestClient(create_app(pipeline=_pipe(parts, **pipe_kwargs), warm=False)) as c:
        r = c.post("/answer", json={"question": "what does jamaican people speak?", "entities": JAMAICA})
        assert (r.status_code, r.json()["error"]) == (status, kind), r.text
        assert named in r.json()["detail"] and "Traceback" not in r.text and "/somewhere" not in r.text
        assert c.get("/health").status_code == 200  # still serving


def test_an_unknown_entity_id_is_a_422_after_only_escaped_queries(parts, client):
    spy = parts[2]
    before = len(spy.queries)
    r = client.post("/answer", json={"question": "who?", "entities": {"m.0nosuchthing": "Nobody"}})
    assert r.status_code == 422 and "unknown entity id 'm.0nosuchthing'" in r.json()["detail"]
    assert spy.queries[before:] and all("<http://rdf.freebase.com/ns/m.0nosuchthing>" in q
                                        for q in spy.queries[before:])


# ------------------------------------------------------------------------------- a real server, concurrency
@contextmanager
def live_server(app):
    """``app`` on uvicorn in a thread, on a free loopback port; stops on exit."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(20)
        sock.close()


def _post(port, obj, timeout=30):
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", "/answer", body=json.dumps(obj), headers={"content-type": "application/json"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def _get(port, path):
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


class OverlapPlanner:
    """The scripted planner, slowed down, counting how many calls ever ran at once."""

    name = "overlap"

    def __init__(self, plans, delay=0.01):
        self.inner, self.delay = ScriptedPlanner(plans), delay
        self.active = self.most = self.calls = 0
        self.lock = threading.Lock()

    def plan(self, question, entities):
        with self.lock:
            self.active += 1
            self.calls += 1
            self.most = max(self.most, self.active)
        try:
            time.sleep(self.delay)
            return self.inner.plan(question, entities)
        finally:
            with self.lock:
                self.active -= 1


def test_concurrent_requests_are_serialised_and_answer_as_one_at_a_time(parts):
    _, _, _, plans, (jamaica, bieber) = parts
    planner = OverlapPlanner(plans)
    pipe = _pipe(parts, planner=planner)
    asks = [(q.question, dict(q.parses[0].topic_entities)) for q in (jamaica, bieber)]
    expected = {q: _without_timings(answer_json(pipe.answer(q, e))) for q, e in asks}
    results, bad = [], [(b, n) for b, n in BAD_REQUESTS[::6]]
    with live_server(create_app(pipeline=pipe)) as port:
        def client(i):
            for j in range(5):
                if (i + j) % 4 == 3:  # bad input mixed in: answered at once, never disturbing the rest
                    body, _ = bad[(i + j) % len(bad)]
                    import http.client

                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                    conn.request("POST", "/answer", body=body)
                    results.append(("bad", conn.getresponse().status, None))
                    conn.close()
                    continue
                q, e = asks[(i + j) % 2]
                status, body = _post(port, {"question": q, "entities": e})
                results.append((q, status, body))

        threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        status, health = _get(port, "/health")
    assert len(results) == 40
    assert planner.most == 1 and planner.calls == sum(1 for q, _, _ in results if q != "bad") + 2
    for q, status, body in results:
        if q == "bad":
            assert status == 400
        else:
            assert status == 200 and _without_timings(body) == expected[q]
    assert status == 200 and health["queue"]["pending"] == 0


def test_a_full_queue_answers_503_and_the_server_keeps_serving(parts):
    _, _, _, plans, (jamaica, _) = parts
    release = threading.Event()

    class Blocking(OverlapPlanner):
        def plan(self, question, entities):
            release.wait(30)
            return super().plan(question, entities)

    app = create_app(pipeline=_pipe(parts, planner=Blocking(plans)), max_queue=2, warm=False)
    ask = {"question": jamaica.question, "entities": JAMAICA}
    with live_server(app) as port:
        held = []
        threads = [threading.Thread(target=lambda: held.append(_post(port, ask))) for _ in range(2)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 20
        while app.state.worker.pending < 2:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        status, body = _post(port, ask)
        assert status == 503 and body["error"] == "busy" and "max_queue 2" in body["detail"]
        assert _get(port, "/health")[1]["queue"] == {"pending": 2, "max_queue": 2}
        release.set()
        for t in threads:
            t.join(30)
        assert [s for s, _ in held] == [200, 200]
        assert _post(port, ask)[0] == 200


def test_models_load_once_when_the_app_is_built(parts):
    class LoadingPlanner(ScriptedPlanner):
        def __init__(self, plans):
            super().__init__(plans)
            self.loads, self.warm_ups = [], 0
            self.llm = type("LLM", (), {"load": lambda _: self.loads.append(1)})()

        def warm_up(self):  # the grounded planner's indexes, the few-shot planner's example embeddings
            self.warm_ups += 1

    planner = LoadingPlanner(parts[3])
    with TestClient(create_app(pipeline=_pipe(parts, planner=planner))) as c:
        assert (planner.loads, planner.warm_ups) == ([1], 1)
        for _ in range(2):
            assert c.post("/answer", json={"question": "what does jamaican people speak?",
                                           "entities": JAMAICA}).status_code == 200
    assert (planner.loads, planner.warm_ups, planner.calls) == ([1], 1, 2)


def test_stopping_the_app_stops_the_kg_worker(parts):
    class ClosingKG(SpyKG):
        closed = 0

        def close(self):
            self.closed += 1

    kg = ClosingKG(parts[2].kg)
    with TestClient(create_app(pipeline=_pipe(parts, kg=kg))) as c:
        assert c.post("/answer", json={"question": "what does jamaican people speak?",
                                       "entities": JAMAICA}).status_code == 200
        assert kg.closed == 0
    assert kg.closed == 1


def test_the_cli_has_a_serve_command_that_checks_its_flags(capsys):
    from memq.cli import build_parser, main

    args = build_parser().parse_args(["serve", "--port", "8123", "--planner", "given"])
    assert (args.host, args.port, args.planner, args.max_queue) == ("127.0.0.1", 8123, "given", 64)
    assert main(["serve", "--port", "70000"]) == 2
    assert "--port must be in 1..65535, got 70000" in capsys.readouterr().err
    assert main(["serve", "--max-queue", "0"]) == 2
