"""Load test of ``memq serve`` on loopback: p50/p95 latency, errors and 5xx under concurrent clients.

    nice .venv/bin/python benchmarks/bench_serve.py                                   # 200 requests, 8 clients
    nice .venv/bin/python benchmarks/bench_serve.py --planner scripted --requests 100 --clients 4
    nice .venv/bin/python benchmarks/bench_serve.py --json benchmarks/results/bench_serve.json

It starts a server on a free port of 127.0.0.1, sends ``--requests`` requests from ``--clients`` threads,
stops the server and prints the numbers. Everything is bounded: each request has a ``--timeout``, the run a
``--deadline`` after which no new request is sent, the server start ``--start-timeout``; the server is
stopped with SIGTERM (then SIGKILL) whatever happens. Nothing but loopback is contacted.

Plans are cheap, so the numbers are the server's and the pipeline's, not an LLM's: each question's plan is
derived from its gold query (as ``bench_answer.py``'s oracle setting does), for the first ``--questions``
questions of the split that have one, cycled.

* ``--planner oracle`` (default): the server is the real command, ``memq serve --planner given``, and each
  request sends its plan (``"plan": [...]``);
* ``--planner scripted``: the server (this script with ``--serve``) runs :func:`memq.serve.create_app` with
  a :class:`~memq.plan.ScriptedPlanner` holding the same plans, and requests send none, so the server's own
  planning path runs.

A share ``--bad`` of the requests is bad input (not JSON, a missing field, a non-Freebase id, a name with
SPARQL syntax, an over-long question, too many entities, an empty question), which must get a 400.

Reported: latency percentiles (nearest-rank, client side, over the questions answered with 200), the time
the pipeline took (``timings.total``) and the time requests waited for the worker (``server.queued_ms``);
``errors``: a question without a 200, a bad input without a 400, or no response (timeout, refused
connection); the 5xx count (the bar is zero); whether every repeat of a question got the same answers; F1
and Hits@1 of the answers against the gold answers.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HOST = "127.0.0.1"
_NAME = {"m.03_r3": "Jamaica"}
BAD_BODIES = [  # each must be answered 400
    b"this is not JSON",
    json.dumps({"question": "what does jamaican people speak?"}).encode(),
    json.dumps({"question": "what?", "entities": {"m.03_r3 } . ?s ?p ?o": "Jamaica"}}).encode(),
    json.dumps({"question": "what?", "entities": {"m.03_r3": 'Jamaica" } UNION { ?s ?p ?o'}}).encode(),
    json.dumps({"question": "why? " * 250, "entities": _NAME}).encode(),
    json.dumps({"question": "what?", "entities": {f"m.0{i:02d}": f"Thing {i}" for i in range(21)}}).encode(),
    json.dumps({"question": "   ", "entities": _NAME}).encode(),
    json.dumps({"question": 42, "entities": _NAME}).encode(),
]


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def oracle_questions(dataset: str, split: str, limit: int) -> list[dict]:
    """The first ``limit`` questions with an oracle plan that a request may carry: id, question, entities,
    plan steps and gold answers of every parse."""
    from memq.api import check_request
    from memq.evaluate.run import oracle_plan, questions_for
    from memq.plan.data import template_describe

    describe = template_describe()
    out = []
    for q in questions_for(dataset, split):
        if len(out) >= limit:
            break
        try:
            plan, entities = oracle_plan(q, describe)
            check_request(q.question, entities)
        except Exception:  # noqa: BLE001 - no derivable plan, or over the request limits: not asked
            continue
        out.append({"id": q.id, "question": q.question, "entities": entities, "plan": [s.text for s in plan.steps],
                    "gold": [[a for a, _ in p.answers] for p in q.parses if p.answers is not None]})
    return out


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def request(port: int, body: bytes, timeout: float) -> tuple[int | None, dict | None, float]:
    """(status or None when no response came, JSON body, seconds), on a fresh loopback connection."""
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("POST", "/answer", body=body, headers={"content-type": "application/json"})
        resp = conn.getresponse()
        raw = resp.read()
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        return resp.status, data, time.perf_counter() - t0
    except (OSError, http.client.HTTPException):
        return None, None, time.perf_counter() - t0
    finally:
        conn.close()


def health(port: int) -> dict | None:
    try:
        conn = http.client.HTTPConnection(HOST, port, timeout=5)
        conn.request("GET", "/health")
        resp = conn.getresponse()
        return json.loads(resp.read()) if resp.status == 200 else None
    except (OSError, http.client.HTTPException, ValueError):
        return None


def start_server(args, port: int, log_path: Path) -> subprocess.Popen:
    if args.planner == "oracle":
        cmd = [sys.executable, "-m", "memq", "serve", "--planner", "given", "--host", HOST, "--port", str(port)]
    else:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--serve", "--port", str(port),
               "--dataset", args.dataset, "--split", args.split, "--questions", str(args.questions)]
    for flag in ("memory", "kg"):
        if getattr(args, flag):
            cmd += [f"--{flag}", getattr(args, flag)]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with open(log_path, "wb") as log:
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def stop_server(proc: subprocess.Popen) -> int | None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return proc.returncode


def wait_until_up(proc: subprocess.Popen, port: int, limit: float) -> dict:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with code {proc.returncode} before answering")
        h = health(port)
        if h is not None:
            return h
        time.sleep(0.25)
    raise RuntimeError(f"the server did not answer /health within {limit:g} s")


def load(args, port: int, questions: list[dict]) -> tuple[list[dict], float]:
    """Send the requests from ``args.clients`` threads; one record per request."""
    plans_in_request = args.planner == "oracle"
    jobs = []
    for i in range(args.requests):
        if int((i + 1) * args.bad) > int(i * args.bad):
            jobs.append(("bad", BAD_BODIES[len(jobs) % len(BAD_BODIES)], None))
        else:
            q = questions[sum(1 for kind, _, _ in jobs if kind == "question") % len(questions)]
            obj = {"question": q["question"], "entities": q["entities"]}
            if plans_in_request:
                obj["plan"] = q["plan"]
            jobs.append(("question", json.dumps(obj).encode(), q))
    records: list[dict] = []
    lock = threading.Lock()
    nxt = iter(range(len(jobs)))
    stop_at = time.monotonic() + args.deadline

    def client() -> None:
        while time.monotonic() < stop_at:
            with lock:
                i = next(nxt, None)
            if i is None:
                return
            kind, body, q = jobs[i]
            status, data, seconds = request(port, body, args.timeout)
            rec = {"kind": kind, "status": status, "seconds": seconds, "id": q["id"] if q else None}
            if kind == "question" and status == 200 and data is not None:
                rec["answers"] = sorted(a["id"] for a in data["answers"])
                rec["pipeline_s"] = data["timings"].get("total")
                rec["queued_s"] = data["server"]["queued_ms"] / 1000
            elif data is not None:
                rec["detail"] = str(data.get("detail", ""))[:200]
            with lock:
                records.append(rec)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, name=f"client-{k}", daemon=True) for k in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(args.deadline + args.timeout + 5)
    return records, time.perf_counter() - t0


def summarise(records: list[dict], questions: list[dict], wall: float, args) -> dict:
    from memq.evaluate.metrics import best_over_parses

    good = [r for r in records if r["kind"] == "question"]
    bad = [r for r in records if r["kind"] == "bad"]
    ok = [r for r in good if r["status"] == 200]
    ms = [1000 * r["seconds"] for r in ok]
    pipe_ms = [1000 * r["pipeline_s"] for r in ok if r.get("pipeline_s") is not None]
    queued_ms = [1000 * r["queued_s"] for r in ok]
    by_id: dict[str, set] = {}
    for r in ok:
        by_id.setdefault(r["id"], set()).add(tuple(r["answers"]))
    gold = {q["id"]: q["gold"] for q in questions}
    scores = [best_over_parses(list(next(iter(a))), gold[i]) for i, a in by_id.items() if gold[i]]
    errors = ([r for r in good if r["status"] != 200] + [r for r in bad if r["status"] != 400])
    stat = lambda v, q: round(percentile(v, q), 1) if v else None  # noqa: E731
    return {
        "requests": args.requests, "sent": len(records), "clients": args.clients, "planner": args.planner,
        "questions": len(good), "bad_inputs": len(bad), "distinct_questions": len(by_id),
        "wall_s": round(wall, 2), "requests_per_s": round(len(records) / wall, 2) if wall else None,
        "p50_ms": stat(ms, 50), "p95_ms": stat(ms, 95), "max_ms": round(max(ms), 1) if ms else None,
        "pipeline_p50_ms": stat(pipe_ms, 50), "pipeline_p95_ms": stat(pipe_ms, 95),
        "queued_p50_ms": stat(queued_ms, 50), "queued_p95_ms": stat(queued_ms, 95),
        "status": dict(sorted(Counter(str(r["status"]) for r in records).items())),
        "errors": len(errors), "5xx": sum(1 for r in records if r["status"] is not None and r["status"] >= 500),
        "no_response": sum(1 for r in records if r["status"] is None),
        "bad_inputs_400": sum(1 for r in bad if r["status"] == 400),
        "same_answers_on_repeats": all(len(v) == 1 for v in by_id.values()),
        "f1": round(statistics.fmean(f for _, f in scores), 4) if scores else None,
        "hits@1": round(statistics.fmean(h for h, _ in scores), 4) if scores else None,
        "error_examples": [f"{r['kind']} {r['id'] or ''} -> {r['status']}: {r.get('detail', '')}" for r in errors][:5],
    }


def report(s: dict, h: dict, start_s: float) -> None:
    mem, kg = h["memory"], h["kg"]
    print(f"server: planner {h['planner']['name']!r} ({s['planner']}); memory {mem['path']} ({mem['statements']} "
          f"statements, {mem['embedder']}); KG {kg.get('path') or kg.get('endpoint')}; up in {start_s:.1f} s")
    print(f"{s['sent']}/{s['requests']} requests ({s['questions']} questions, {s['distinct_questions']} distinct; "
          f"{s['bad_inputs']} bad inputs) from {s['clients']} clients in {s['wall_s']} s: "
          f"{s['requests_per_s']} requests/s")
    print(f"latency, questions answered (client side): p50 {s['p50_ms']} ms, p95 {s['p95_ms']} ms, "
          f"max {s['max_ms']} ms")
    print(f"  of which the pipeline (timings.total): p50 {s['pipeline_p50_ms']} ms, p95 {s['pipeline_p95_ms']} ms; "
          f"waiting for the worker: p50 {s['queued_p50_ms']} ms, p95 {s['queued_p95_ms']} ms")
    print(f"status codes: {s['status']}")
    print(f"errors: {s['errors']} (no response: {s['no_response']}; bad inputs answered 400: "
          f"{s['bad_inputs_400']}/{s['bad_inputs']})")
    print(f"5xx: {s['5xx']}")
    print(f"same answers on every repeat of a question: {'yes' if s['same_answers_on_repeats'] else 'NO'}; "
          f"F1 {s['f1']}, Hits@1 {s['hits@1']} over the distinct questions")
    for e in s["error_examples"]:
        print(f"    error: {e}")


def serve(args) -> int:
    """``--serve``: the server of ``--planner scripted``, on the same questions' oracle plans."""
    import uvicorn

    from memq.pipeline import Config, Pipeline
    from memq.plan import ScriptedPlanner
    from memq.serve import create_app

    questions = oracle_questions(args.dataset, args.split, args.questions)
    planner = ScriptedPlanner({q["question"]: "\n".join(q["plan"]) for q in questions})
    changes = {k: getattr(args, k) for k in ("memory", "kg") if getattr(args, k)}
    pipe = Pipeline(Config(planner="fewshot", **changes), planner=planner)  # the planner given is the one used
    uvicorn.run(create_app(pipeline=pipe), host=HOST, port=args.port, log_level="warning")
    return 0


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--planner", choices=("oracle", "scripted"), default="oracle")
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--questions", type=int, default=50, help="distinct questions, cycled")
    p.add_argument("--bad", type=float, default=0.1, help="share of requests that are bad input (0..1)")
    p.add_argument("--dataset", choices=("webqsp", "cwq"), default="webqsp")
    p.add_argument("--split", choices=("dev", "test"), default="dev")
    p.add_argument("--memory", help="memory bank directory (default: the server's, memory_bank/webqsp)")
    p.add_argument("--kg", help="RDF file (default: the server's, data/kg/benchmark.nq.gz)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    p.add_argument("--deadline", type=float, default=600.0, help="no request is sent after this many seconds")
    p.add_argument("--start-timeout", type=float, default=600.0, help="seconds for the server to come up")
    p.add_argument("--json", metavar="FILE", help="write the numbers here")
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    for name in ("requests", "clients", "questions"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if not 0 <= args.bad < 1:
        p.error(f"--bad must be in [0, 1), got {args.bad}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.serve:
        return serve(args)
    questions = oracle_questions(args.dataset, args.split, args.questions)
    if not questions:
        raise SystemExit(f"no question of {args.dataset} {args.split} has an oracle plan")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="memq-bench-serve-") as tmp:
        log_path = Path(tmp) / "server.log"
        t0 = time.perf_counter()
        proc = start_server(args, port, log_path)
        try:
            h = wait_until_up(proc, port, args.start_timeout)
            start_s = time.perf_counter() - t0
            records, wall = load(args, port, questions)
            after = health(port)
        except RuntimeError as exc:
            stop_server(proc)
            print(log_path.read_text(errors="replace")[-3000:], file=sys.stderr)
            raise SystemExit(f"bench_serve: {exc}") from None
        finally:
            code = stop_server(proc)
    s = summarise(records, questions, wall, args)
    s["server_alive_after"] = after is not None
    s["server_exit_code"] = code
    print(f"memq serve load test on {HOST} ({os.cpu_count()} CPUs visible), {args.dataset} {args.split}")
    report(s, h, start_s)
    print(f"server answered /health after the load: {'yes' if after else 'NO'}; exit code after SIGTERM: {code}")
    if args.json:
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
        tmp.write_text(json.dumps({**s, "health_before": h, "command": " ".join(sys.argv)}, indent=2) + "\n",
                       encoding="utf-8")
        os.replace(tmp, out)
        print(f"wrote {out}")
    return 1 if s["5xx"] or s["no_response"] else 0


if __name__ == "__main__":
    sys.exit(main())
