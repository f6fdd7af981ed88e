"""Latency of answer() per question on the embedded store, split by stage; LLM calls per question.

    nice .venv/bin/python benchmarks/bench_answer.py --kg data/kg/benchmark.nq.gz
    nice .venv/bin/python benchmarks/bench_answer.py --planner none --limit-oracle 300     # oracle plans only
    nice .venv/bin/python benchmarks/bench_answer.py --planner fewshot --limit 20 --threads 2
    nice .venv/bin/python benchmarks/bench_answer.py --planner finetuned --backend llamacpp transformers --fresh 3

Two settings on the first questions of a split (default: WebQSP dev):

(a) ``oracle``: plans derived from the gold queries and passed in (no LLM); measures recall (MiniLM
    encoding of each step + FAISS), reconstruction (with the grounded-choice probes), execution (with
    self-repair) and name lookup;
(b) the local planner (``--planner fewshot``, Qwen2.5-Coder-0.5B with k retrieved examples, or
    ``finetuned``): the same plus planning, once per ``--backend`` (``llamacpp`` and ``transformers`` by
    default: the same questions, one after the other, and the ratio of their latencies). transformers is
    slow on CPU (~6 tokens/s), hence ``--limit`` 20.

``--fresh N`` also times ``memq ask`` in a fresh process (the README's example question), N times per backend
after one untimed run that builds any missing cache: wall time from process start to exit.

Stages come from ``Answer.trace.timings`` (plan, recall, reconstruct, execute, names; ``total`` also holds
the topic-entity check). One-time costs (memory bank, KG, MiniLM, LLM, few-shot example index) are timed
separately and one warm-up question is not counted. Percentiles are nearest-rank over the questions that
answered without raising (errors are counted). LLM calls per question come from ``Answer.trace.llm_calls``
and must be exactly 1 for a real planner (self-repair never calls the LLM).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

STAGES = ("plan", "recall", "reconstruct", "execute", "names", "total")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def stage_table(records: list[dict]) -> dict:
    ok = [r for r in records if r["error"] is None]
    out = {}
    for stage in STAGES:
        vals = [r["timings"][stage] for r in ok if stage in r["timings"]]
        if vals:
            out[stage] = {"p50_ms": round(1000 * percentile(vals, 50), 2),
                          "p95_ms": round(1000 * percentile(vals, 95), 2),
                          "mean_ms": round(1000 * statistics.fmean(vals), 2)}
    return out


def run_setting(pipeline, questions, plans: dict | None) -> list[dict]:
    """Answer each question; ``plans`` maps id -> (Plan, entities) for oracle plans, None to plan with the LLM."""
    from memq.evaluate.metrics import best_over_parses

    records = []
    for q in questions:
        if plans is not None:
            plan, entities = plans[q.id]
        else:
            plan, entities = None, dict(q.parses[0].topic_entities)
        rec = {"id": q.id, "error": None, "timings": {}, "llm_calls": 0, "repaired": False}
        planner = pipeline._planner if plans is None else None  # the LLM's own counter, exceptions included
        calls0 = getattr(planner, "calls", 0)
        t0 = time.perf_counter()
        predicted = []
        try:
            answer = pipeline.answer(q.question, entities, plan=plan)
            rec["timings"] = dict(answer.trace.timings)
            rec["trace_llm_calls"] = answer.trace.llm_calls
            rec["repaired"] = bool(answer.trace.attempts)
            predicted = [i for i, _ in answer.answers]
        except Exception as exc:  # noqa: BLE001 - counted, and the question scores 0
            rec["error"] = f"{type(exc).__name__}: {exc}"
        rec["wall_s"] = time.perf_counter() - t0
        rec["llm_calls"] = getattr(planner, "calls", 0) - calls0
        golds = [[a for a, _ in (p.answers or ())] for p in q.parses if p.answers is not None]
        rec["hits@1"], rec["f1"] = best_over_parses(predicted, golds) if golds else (None, None)
        records.append(rec)
    return records


def summary(name: str, records: list[dict]) -> dict:
    calls = [r["llm_calls"] for r in records]
    scored = [r for r in records if r["f1"] is not None]
    walls = [r["wall_s"] for r in records if r["error"] is None]  # same questions as the stage percentiles
    return {
        "setting": name,
        "questions": len(records),
        "errors": sum(1 for r in records if r["error"]),
        "stages": stage_table(records),
        "wall_p50_ms": round(1000 * percentile(walls, 50), 2) if walls else None,
        "wall_p95_ms": round(1000 * percentile(walls, 95), 2) if walls else None,
        "llm_calls_per_question": round(statistics.fmean(calls), 3) if calls else None,
        "llm_calls_min_max": [min(calls), max(calls)] if calls else None,
        "trace_agrees_on_llm_calls": all(r.get("trace_llm_calls", r["llm_calls"]) == r["llm_calls"] for r in records),
        "repaired": sum(1 for r in records if r["repaired"]),
        "f1": round(statistics.fmean(r["f1"] for r in scored), 4) if scored else None,
        "hits@1": round(statistics.fmean(r["hits@1"] for r in scored), 4) if scored else None,
        "error_examples": [r["error"] for r in records if r["error"]][:3],
    }


def print_table(rows: list[dict]) -> None:
    head = f"{'setting':<10} {'n':>4} {'stage':<12} {'p50 ms':>9} {'p95 ms':>9} {'mean ms':>9}"
    print(head)
    print("-" * len(head))
    for row in rows:
        first = True
        for stage in STAGES:
            s = row["stages"].get(stage)
            if s is None:
                continue
            label = (row["setting"], str(row["questions"])) if first else ("", "")
            print(f"{label[0]:<10} {label[1]:>4} {stage:<12} {s['p50_ms']:>9.2f} {s['p95_ms']:>9.2f} "
                  f"{s['mean_ms']:>9.2f}")
            first = False
        if row["wall_p50_ms"] is not None:
            print(f"{'':<10} {'':>4} {'wall':<12} {row['wall_p50_ms']:>9.2f} {row['wall_p95_ms']:>9.2f} {'':>9}")
        print("-" * len(head))
    for row in rows:
        calls = row["llm_calls_per_question"]
        extra = f", min/max {row['llm_calls_min_max']}" if row["llm_calls_min_max"] else ""
        f1 = "-" if row["f1"] is None else f"{row['f1']:.3f}"
        h1 = "-" if row["hits@1"] is None else f"{row['hits@1']:.3f}"
        print(f"{row['setting']}: LLM calls per question {calls}{extra}; errors {row['errors']}; "
              f"self-repair ran on {row['repaired']}; F1 {f1}, Hits@1 {h1} on these questions")
        for e in row["error_examples"]:
            print(f"    error: {e[:160]}")


def backend_ratios(rows: list[dict]) -> dict:
    """transformers' latency over llama.cpp's (same questions, same run): wall p50 and plan p50."""
    by = {r.get("backend"): r for r in rows if r.get("backend")}
    if not {"llamacpp", "transformers"} <= set(by):
        return {}
    fast, slow = by["llamacpp"], by["transformers"]
    out = {}
    if fast["wall_p50_ms"] and slow["wall_p50_ms"]:
        out["wall_p50"] = round(slow["wall_p50_ms"] / fast["wall_p50_ms"], 2)
    if "plan" in fast["stages"] and "plan" in slow["stages"]:
        out["plan_p50"] = round(slow["stages"]["plan"]["p50_ms"] / fast["stages"]["plan"]["p50_ms"], 2)
    return out


ASK = ("what does jamaican people speak?", "m.03_r3=Jamaica")


def fresh_ask(backend: str, n: int) -> dict:
    """Wall seconds of ``memq ask`` in a new process: one untimed run (builds missing caches), then ``n`` timed."""
    import subprocess

    cmd = [sys.executable, "-m", "memq", "ask", ASK[0], "--entity", ASK[1], "--backend", backend, "--json"]
    walls, reported = [], None
    for _ in range(n + 1):
        t0 = time.perf_counter()
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
        wall = round(time.perf_counter() - t0, 2)
        if done.returncode != 0:
            raise SystemExit(f"memq ask --backend {backend} failed: {done.stderr[-500:]}")
        reported = json.loads(done.stdout)
        walls.append(wall)
    return {"command": f"memq ask '{ASK[0]}' --entity {ASK[1]} --backend {backend} --json",
            "first_s": walls[0], "wall_s": walls[1:], "median_s": statistics.median(walls[1:]),
            "backend_in_trace": reported.get("backend"), "fallbacks": reported.get("fallbacks"),
            "plan_ms": round(1000 * reported["timings"].get("plan", 0.0), 1)}


def timed(label: str, fn, loads: dict):
    t0 = time.perf_counter()
    out = fn()
    loads[label] = round(time.perf_counter() - t0, 2)
    return out


def load_planner(args, questions, loads: dict, backend: str):
    """The LLM planner, loaded and warmed (model, few-shot index); None, with the reason printed, if unavailable."""
    if args.planner == "none":
        print("(b) LLM planner: not run (--planner none)")
        return None
    try:
        from memq.plan import make_planner
    except ImportError as exc:
        print(f"(b) LLM planner unavailable: memq.plan.make_planner cannot be imported ({exc})")
        return None
    try:
        planner = make_planner(args.planner, model=args.llm, adapter=args.adapter, dataset=args.dataset,
                               batch_size=1, backend=backend)
        llm = planner.llm
        for note in getattr(planner, "fallbacks", ()):
            print(f"(b) {backend}: {note}")
        if hasattr(llm, "load"):
            timed(f"LLM load ({getattr(llm, 'backend', '?')}: {llm.name})", llm.load, loads)
        if hasattr(planner, "nearest"):
            timed("few-shot example index", lambda: planner.nearest(questions[0].question), loads)
    except Exception as exc:  # noqa: BLE001 - no model here: report it and keep setting (a)
        print(f"(b) LLM planner unavailable: {type(exc).__name__}: {exc}")
        return None
    return planner


def parse_args(argv=None) -> argparse.Namespace:
    from memq.plan.base import BACKENDS

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", choices=("webqsp", "cwq"), default="webqsp")
    p.add_argument("--split", choices=("dev", "test"), default="dev")
    p.add_argument("--kg", default=str(ROOT / "data" / "kg" / "benchmark.nq.gz"))
    p.add_argument("--store", choices=("memory", "cached"), default="memory",
                   help="memory: the RDF file loaded in RAM, as answer() does (default); cached: on-disk store")
    p.add_argument("--memory", help="memory bank directory (default: memory_bank/<dataset>)")
    p.add_argument("--limit-oracle", type=int, default=100, help="questions for the oracle-plan setting")
    p.add_argument("--limit", type=int, default=20, help="questions for the LLM-planner setting")
    p.add_argument("--planner", choices=("fewshot", "finetuned", "none"), default="fewshot")
    p.add_argument("--llm", default="qwen2.5-coder-0.5b", help="few-shot planner model")
    p.add_argument("--adapter", help="LoRA adapter for --planner finetuned")
    p.add_argument("--backend", nargs="+", choices=BACKENDS, default=list(BACKENDS),
                   help="planner backends to time on the same questions (the ratio is printed for both)")
    p.add_argument("--fresh", type=int, default=0, metavar="N",
                   help="also time `memq ask` in a fresh process N times per backend")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    p.add_argument("--no-ground", action="store_true")
    p.add_argument("--no-repair", action="store_true")
    p.add_argument("--json", metavar="FILE", help="write the numbers here")
    args = p.parse_args(argv)
    for name in ("limit", "limit_oracle"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch

    torch.set_num_threads(args.threads)
    from memq.evaluate.run import oracle_plan, questions_for
    from memq.kg.oxigraph import OxigraphStore
    from memq.memory.bank import MemoryBank
    from memq.pipeline import Config, Pipeline
    from memq.plan.data import template_describe

    print(f"CPU: {os.cpu_count()} cores visible, torch threads {torch.get_num_threads()}, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}")
    if not Path(args.kg).is_file():
        raise SystemExit(f"knowledge graph file {args.kg} does not exist; pass --kg")
    loads: dict[str, float] = {}
    memory = args.memory or str(ROOT / "memory_bank" / args.dataset)
    bank = timed("memory bank load", lambda: MemoryBank.load(memory), loads)
    timed("MiniLM load + first search", lambda: bank.search("?entity2 is the spouse of ?entity1", 8), loads)
    kg = timed(f"KG open ({args.store})", lambda: OxigraphStore.cached(args.kg) if args.store == "cached"
               else OxigraphStore.from_file(args.kg), loads)
    config = Config(memory=memory, kg=args.kg, planner="given", grounded=not args.no_ground,
                    repair=not args.no_repair)
    questions = questions_for(args.dataset, args.split)
    rows, all_records = [], {}

    # (a) oracle plans
    describe = template_describe()
    oracle, skipped = {}, 0
    for q in questions:
        if len(oracle) >= args.limit_oracle + 1:
            break
        try:
            oracle[q.id] = oracle_plan(q, describe)
        except Exception:  # noqa: BLE001 - a question without an oracle plan is not timed
            skipped += 1
    pipeline = Pipeline(config, bank=bank, kg=kg)
    qs = [q for q in questions if q.id in oracle]
    run_setting(pipeline, qs[:1], oracle)  # warm-up, not counted
    recs = run_setting(pipeline, qs[1:args.limit_oracle + 1], oracle)
    rows.append(summary("oracle", recs))
    all_records["oracle"] = recs
    if skipped:
        print(f"(oracle: {skipped} questions without a derivable plan were skipped)")

    # (b) the local LLM planner, per backend
    for backend in args.backend:
        planner = load_planner(args, questions, loads, backend)
        if planner is None:
            continue
        llm = planner.llm
        pipe_b = Pipeline(replace(config, planner=args.planner, backend=backend), bank=bank, kg=kg, planner=planner)
        run_setting(pipe_b, questions[:1], None)  # warm-up, not counted
        tokens0 = getattr(llm, "tokens", None)
        passes0 = llm.counters[0] if hasattr(llm, "counters") else None
        recs = run_setting(pipe_b, questions[1:args.limit + 1], None)
        name = f"{args.planner}/{planner.backend_used}"
        row = summary(name, recs)
        if tokens0 is not None:
            plan_s = sum(r["timings"].get("plan", 0.0) for r in recs)
            row["new_tokens_per_question"] = round((llm.tokens - tokens0) / len(recs), 1)
            row["new_tokens_per_plan_s"] = round((llm.tokens - tokens0) / plan_s, 2) if plan_s else None
        row["planner"] = f"{getattr(planner, 'name', args.planner)} ({planner.backend_used})"
        row["backend"] = planner.backend_used
        row["fallbacks"] = list(getattr(planner, "fallbacks", ()))
        if passes0 is not None:  # llama.cpp: forward passes (speculative decoding keeps several tokens a pass)
            row["forward_passes_per_question"] = round((llm.counters[0] - passes0) / len(recs), 1)
            row["drafts"] = llm.drafts
        rows.append(row)
        all_records[name] = recs
    ratios = backend_ratios(rows)
    fresh = {backend: fresh_ask(backend, args.fresh) for backend in args.backend} if args.fresh else {}

    print(f"\n{args.dataset} {args.split}, KG {args.kg} ({args.store} Oxigraph store), memory {memory}, "
          f"grounded {'off' if args.no_ground else 'on'}, repair {'off' if args.no_repair else 'on'}")
    print("one-time costs (s): " + ", ".join(f"{k} {v}" for k, v in loads.items()))
    print()
    print_table(rows)
    for row in rows:
        if "new_tokens_per_plan_s" in row:
            print(f"{row['planner']}: {row['new_tokens_per_question']} new tokens per question, "
                  f"{row['new_tokens_per_plan_s']} new tokens per second of planning (prompt prefill included)")
    for key, value in ratios.items():
        print(f"transformers / llama.cpp, {key.replace('_', ' ')}: {value}x")
    for backend, times in fresh.items():
        print(f"memq ask in a fresh process ({backend}): median {times['median_s']} s over {len(times['wall_s'])} "
              f"runs {times['wall_s']} (first, untimed run {times['first_s']} s)")
    if args.json:
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
        kg_shown = os.path.relpath(args.kg, ROOT) if Path(args.kg).is_absolute() else args.kg  # no machine paths
        from memq.llm.gguf_weights import weights_from_env
        from memq.llm.llamacpp import default_threads

        tmp.write_text(json.dumps({"threads": torch.get_num_threads(), "cpus": os.cpu_count(), "loads_s": loads,
                                   "llama_threads": default_threads(),
                                   "llama_weights": weights_from_env(),
                                   "settings": rows, "kg": kg_shown, "store": args.store,
                                   "transformers_over_llamacpp": ratios, "fresh_ask": fresh,
                                   "command": " ".join(sys.argv)}, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, out)
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
