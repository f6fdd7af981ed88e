"""Tune the adaptive recall thresholds (gamma1, gamma2) on a DEV split (never test).

    nice .venv/bin/python benchmarks/tune_recall.py --plans oracle --out runs/tune_recall_webqsp.json
    nice .venv/bin/python benchmarks/tune_recall.py --plans plans_dev.jsonl --limit 100
    nice .venv/bin/python benchmarks/tune_recall.py --dataset cwq --plans oracle      # EHR only

For every grid point, dev macro-F1, Hits@1, EHR (best over a question's parses, every question counts, a
failure scores 0), the mean number of statements recalled per find step (the rule's selection) and in
the final query (after the grounded choice and self-repair widening), and the share of questions where
self-repair ran (both per-step means over the questions that ran without an error). The grid: the
``adaptive`` rule over gamma1 x gamma2 (gamma2 <= gamma1) plus the ``memq-code`` rule, all with grounded
choice and self-repair on (the pipeline defaults); then grounded/repair on/off at the best point.

Fast by construction: the memory search of a step does not depend on gamma, so every step text is
searched once (one MiniLM batch, k=8 x 3 as ``recall_step`` asks); each grid point re-applies only the
selection, reconstruction and execution. A question's answer depends on gamma only through the statements
the rule keeps, so a (question, kept statements, grounded, repair) combination already run is reused.

Plans: ``oracle`` derives them from the gold queries (no LLM). Oracle find phrases are the template
describer's own sentences, so an in-memory statement scores ~1.0: oracle tuning mostly measures the
held-out statements. Tune on a real planner's plans for deployment: ``--plans FILE.jsonl`` with one JSON
object per line, ``{"id" | "question_id": ..., "plan" | "predicted" | "raw": "Find ...", "entities":
[[mid, name], ...] (optional)}``; the ``--out`` file of ``memq planner eval --split dev`` is accepted as is.

Held-out memory: the committed memory bank is built from all of WebQSP train, dev included. By default the
statements that come ONLY from dev questions are removed (their vectors are reused, nothing is re-embedded),
so a dev question meets the memory as a test question does; ``--keep-dev-statements`` turns that off.

CWQ dev (carved from CWQ train) has no gold answers: it is tuned on EHR alone, and the output says so.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memq.errors import MemQError  # noqa: E402
from memq.recall import RecallConfig, recall_step  # noqa: E402

GAMMA1 = (0.80, 0.85, 0.90, 0.95, 0.99)
GAMMA2 = (0.50, 0.60, 0.70, 0.80, 0.90)


class CachedSearch:
    """A memory bank whose ``search`` results are memoised per (text, k); ``warm`` batches the misses."""

    def __init__(self, bank) -> None:
        self.bank = bank
        self._cache: dict[tuple[str, int], list] = {}
        self.misses = 0

    def warm(self, texts: list[str], k: int) -> None:
        todo = sorted({t for t in texts if (t, k) not in self._cache})
        for i in range(0, len(todo), 256):
            chunk = todo[i:i + 256]
            for text, hits in zip(chunk, self.bank.search_many(chunk, k), strict=True):
                self._cache[(text, k)] = hits

    def search(self, text: str, k: int = 5) -> list:
        if (text, k) not in self._cache:
            self.misses += 1
            self._cache[(text, k)] = self.bank.search(text, k)
        return self._cache[(text, k)]

    def search_many(self, texts: list[str], k: int = 5) -> list[list]:
        return [self.search(t, k) for t in texts]

    def __getattr__(self, name):
        return getattr(self.bank, name)


def held_out_bank(bank, dev_ids: set[str]):
    """``bank`` without the statements whose every source question is a dev question (vectors reused)."""
    import faiss
    import numpy as np

    from memq.memory.bank import MemoryBank

    vectors = bank.index.reconstruct_n(0, bank.index.ntotal)
    keep_rows, records, sources, removed = [], [], [], 0
    row = 0
    for rec, src in zip(bank.records, bank.sources, strict=True):
        n = len(rec.descriptions)
        qids = rec.statement.question_ids
        if qids and all(q in dev_ids for q in qids):
            removed += 1
        else:
            records.append(rec)
            sources.append(src)
            keep_rows.extend(range(row, row + n))
        row += n
    index = faiss.IndexFlatIP(bank.index.d)
    index.add(np.ascontiguousarray(vectors[keep_rows], dtype=np.float32))
    return MemoryBank(records, index, bank.embedder, sources, dict(bank.info)), removed


# ----------------------------------------------------------------------------- questions and plans

def load_questions(dataset: str, limit: int | None) -> list:
    from memq.evaluate.run import questions_for

    questions = questions_for(dataset, "dev")
    return questions[:limit] if limit else questions


def oracle_plans(questions) -> dict[str, tuple]:
    """id -> (Plan | None, entities, error)."""
    from memq.evaluate.run import oracle_plan
    from memq.plan.data import template_describe

    describe = template_describe()
    out = {}
    for q in questions:
        try:
            plan, entities = oracle_plan(q, describe)
            out[q.id] = (plan, entities, None)
        except MemQError as exc:
            out[q.id] = (None, dict(q.parses[0].topic_entities), f"no oracle plan: {exc}")
    return out


def file_plans(path: str, questions) -> dict[str, tuple]:
    from memq.plan.format import parse_plan

    texts: dict[str, dict] = {}
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            obj = json.loads(line)
            qid = obj.get("id") or obj.get("question_id")
            text = next((obj[k] for k in ("plan", "predicted", "raw") if isinstance(obj.get(k), str)), None)
            if not qid or text is None:
                raise SystemExit(f"{path}:{n}: need an id/question_id and a plan/predicted/raw text")
            texts[qid] = {"text": text, "entities": obj.get("entities")}
    out = {}
    for q in questions:
        entities = dict(q.parses[0].topic_entities)
        got = texts.get(q.id)
        if got is None:
            out[q.id] = (None, entities, "no plan in the plans file")
            continue
        if got["entities"]:
            entities = {m: n for m, n in got["entities"]}
        try:
            out[q.id] = (parse_plan(got["text"], list(entities.values())), entities, None)
        except MemQError as exc:
            out[q.id] = (None, entities, f"unreadable plan: {exc}")
    missing = sum(1 for v in out.values() if v[2] == "no plan in the plans file")
    if missing == len(out):
        raise SystemExit(f"{path}: holds no plan for any of the {len(out)} dev questions")
    return out


def recall_texts(plans: dict[str, tuple]) -> list[str]:
    from memq.recall import query_text

    texts = []
    for plan, _, _ in plans.values():
        for step in (plan.steps if plan else []):
            if step.kind == "find" or (step.kind == "check" and step.relation and step.relation != step.target):
                texts.append(query_text(step))
    return texts


# ----------------------------------------------------------------------------- scoring

def signature(bank, plan, recall: RecallConfig) -> tuple:
    """What the recall rule keeps for each step: all the answer depends on besides grounded/repair."""
    sig = []
    for i, step in enumerate(plan.steps):
        if step.kind == "find":
            kept, _, fallback = recall_step(bank, step, i, recall)
        elif step.kind == "check" and step.relation and step.relation != step.target:
            kept, _, fallback = recall_step(bank, step, i, recall, structures=("filter",))
        else:
            continue
        sig.append((i, tuple(r.statement.id for r in kept), fallback is None))
    return tuple(sig)


def score(pipeline, q, plan, entities, error, golds_parsed) -> dict:
    from memq.evaluate.metrics import best_over_parses, ehr
    from memq.sparql import parse_query

    golds = [[a for a, _ in (p.answers or ())] for p in q.parses if p.answers is not None]
    rec = {"recalled": [], "in_query": [], "repaired": False, "error": error}
    predicted, pred_query = [], None
    if plan is not None:
        try:
            answer = pipeline.answer(q.question, entities, plan=plan)
            predicted = [i for i, _ in answer.answers]
            pred_query = parse_query(answer.sparql)
            finds = [i for i, s in enumerate(plan.steps) if s.kind == "find"]
            rec["in_query"] = [sum(1 for r in answer.recalled if r.step_index == i) for i in finds]
            rec["repaired"] = bool(answer.trace.attempts)
        except Exception as exc:  # noqa: BLE001 - every failure scores 0 and is counted
            rec["error"] = f"{type(exc).__name__}: {exc}"
    rec["hits@1"], rec["f1"] = best_over_parses(predicted, golds) if golds else (None, None)
    rec["ehr"] = max((ehr(pred_query, g) for g in golds_parsed), default=0.0)
    return rec


def summarise(records: list[dict]) -> dict:
    from memq.evaluate.metrics import mean

    scored = [r for r in records if r["f1"] is not None]
    steps = [n for r in records for n in r["recalled"]]
    in_query = [n for r in records for n in r["in_query"]]
    return {
        "questions": len(records),
        "answered": len(scored),
        "f1": round(mean(r["f1"] for r in scored), 4) if scored else None,
        "hits@1": round(mean(r["hits@1"] for r in scored), 4) if scored else None,
        "ehr": round(mean(r["ehr"] for r in records), 4),
        "recalled_per_step": round(mean(steps), 3),
        "in_query_per_step": round(mean(in_query), 3),
        "repaired": round(mean(float(r["repaired"]) for r in records), 4),
        "errors": sum(1 for r in records if r["error"]),
    }


class Tuner:
    def __init__(self, bank, kg, questions, plans, timeout: float) -> None:
        from memq.pipeline import Config
        from memq.schema import freebase_schema
        from memq.sparql import parse_query

        self.bank, self.kg, self.questions, self.plans = bank, kg, questions, plans
        self.base = Config(planner="given", timeout=timeout)
        self.memo: dict[tuple, dict] = {}
        self.per_question: dict[tuple, list[float]] = {}
        self.error_kinds: dict[tuple, Counter] = {}
        self.runs = 0
        freebase_schema()  # load the schema once, outside the timings (query_edges reads its reverse map)
        self.golds = {}
        for q in questions:
            parsed = []
            for p in q.parses:
                try:
                    parsed.append(parse_query(p.sparql))
                except MemQError:
                    continue
            self.golds[q.id] = parsed

    def point(self, recall: RecallConfig, grounded: bool = True, repair: bool = True) -> dict:
        from memq.pipeline import Pipeline

        pipeline = Pipeline(replace(self.base, recall=recall, grounded=grounded, repair=repair),
                            bank=self.bank, kg=self.kg)
        t0 = time.perf_counter()
        records = []
        for q in self.questions:
            plan, entities, error = self.plans[q.id]
            key = (q.id, grounded, repair, signature(self.bank, plan, recall) if plan else None)
            if key not in self.memo:
                self.runs += 1
                self.memo[key] = score(pipeline, q, plan, entities, error, self.golds[q.id])
            rec = dict(self.memo[key])
            if plan is not None and rec["error"] is None:  # depends on gamma even when the answer does not
                rec["recalled"] = [len(recall_step(self.bank, s, i, recall)[0])
                                   for i, s in enumerate(plan.steps) if s.kind == "find"]
            records.append(rec)
        row = {"rule": recall.rule, "gamma1": recall.gamma1 if recall.rule == "adaptive" else None,
               "gamma2": recall.gamma2 if recall.rule == "adaptive" else None, "k": recall.k,
               "grounded": grounded, "repair": repair, **summarise(records)}
        row["seconds"] = round(time.perf_counter() - t0, 2)
        metric = "f1" if any(r["f1"] is not None for r in records) else "ehr"
        self.per_question[point_key(row)] = [r[metric] or 0.0 for r in records]
        self.error_kinds[point_key(row)] = Counter(_error_kind(r["error"]) for r in records if r["error"])
        return row


def point_key(row: dict) -> tuple:
    return (row["rule"], row["gamma1"], row["gamma2"], row["grounded"], row["repair"])


def _error_kind(error: str) -> str:
    """``"MemQError: unknown entity id 'm.x': ..."`` -> ``"MemQError: unknown entity id"`` (for counting)."""
    return error.split("'", 1)[0].strip().rstrip(":").strip()[:80]


def paired_bootstrap(a: list[float], b: list[float], n: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Mean of a - b over the same questions and its 95% percentile bootstrap interval."""
    import random

    diffs = [x - y for x, y in zip(a, b, strict=True)]
    if not diffs:
        return 0.0, 0.0, 0.0
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(diffs, k=len(diffs))) / len(diffs) for _ in range(n))
    return sum(diffs) / len(diffs), means[int(0.025 * n)], means[int(0.975 * n) - 1]


def rank_key(row: dict, answers: bool) -> tuple:
    """F1, Hits@1, then fewer statements per step (EHR never penalises extra UNION branches), then EHR."""
    if answers:
        return (row["f1"], row["hits@1"], -row["recalled_per_step"], row["ehr"])
    return (row["ehr"], -row["recalled_per_step"])


def grid_points(gamma1s, gamma2s, k: int) -> list[RecallConfig]:
    out = [RecallConfig("adaptive", g1, g2, k) for g1 in gamma1s for g2 in gamma2s if g2 <= g1]
    return out + [RecallConfig("memq-code", k=k)]


def fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


COLUMNS = ("rule", "gamma1", "gamma2", "grounded", "repair", "f1", "hits@1", "ehr", "recalled_per_step",
           "in_query_per_step", "repaired", "errors", "seconds")


def print_table(rows: list[dict]) -> None:
    cells = [[fmt(r.get(c)) for c in COLUMNS] for r in rows]
    widths = [max(len(c), *(len(x[i]) for x in cells)) for i, c in enumerate(COLUMNS)]
    print("  ".join(c.rjust(w) for c, w in zip(COLUMNS, widths, strict=True)))
    for x in cells:
        print("  ".join(v.rjust(w) for v, w in zip(x, widths, strict=True)))


# ----------------------------------------------------------------------------- main

class NoKG:
    """A stand-in KG for structure-only tuning (``--kg none``): every entity exists, every query finds nothing.

    With grounded choice and self-repair off the pipeline then builds exactly the query recall dictates;
    EHR needs no KG. Used for CWQ dev, whose questions the benchmark KG does not hold.
    """

    def select(self, query: str, timeout: float | None = None) -> list[dict]:
        from memq.sparql.model import Iri

        if query.lstrip().startswith("SELECT ?p WHERE {"):  # Pipeline._check_entities_known
            return [{"p": Iri("http://rdf.freebase.com/ns/type.object.type")}]
        return []

    def names(self, ids) -> dict[str, str]:
        return {}


def open_store(path: str, mode: str):
    from memq.kg.oxigraph import OxigraphStore

    if path == "none":
        return NoKG()

    if not Path(path).is_file():
        raise SystemExit(f"knowledge graph file {path} does not exist (build it with `memq kg build-benchmark`, "
                         "or pass --kg)")
    return OxigraphStore.cached(path) if mode == "cached" else OxigraphStore.from_file(path)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", choices=("webqsp", "cwq"), default="webqsp")
    p.add_argument("--plans", default="oracle", help="'oracle' or a JSONL file of planner output for dev")
    p.add_argument("--kg", help="RDF file of the KG, or 'none' for structure only (EHR; grounded choice and "
                                "self-repair off). Default: data/kg/benchmark.nq.gz for webqsp, none for cwq "
                                "(the benchmark KG holds no CWQ train/dev question)")
    p.add_argument("--store", choices=("cached", "memory"), default="cached",
                   help="cached: an on-disk Oxigraph store built once per file (default); memory: load each run")
    p.add_argument("--memory", help="memory bank directory (default: memory_bank/<dataset>)")
    p.add_argument("--keep-dev-statements", action="store_true",
                   help="keep the statements that only dev questions contributed to the memory")
    p.add_argument("--limit", type=int, help="only the first N dev questions")
    p.add_argument("--gamma1", type=float, nargs="+", default=list(GAMMA1))
    p.add_argument("--gamma2", type=float, nargs="+", default=list(GAMMA2))
    p.add_argument("--k", type=int, default=8, help="candidates per step")
    p.add_argument("--timeout", type=float, default=20.0, help="per-query timeout, seconds")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads for MiniLM")
    p.add_argument("--out", help="write the grid as JSON here")
    args = p.parse_args(argv)
    if args.kg is None:
        args.kg = str(ROOT / "data" / "kg" / "benchmark.nq.gz") if args.dataset == "webqsp" else "none"
    if args.limit is not None and args.limit < 1:
        p.error(f"--limit must be >= 1, got {args.limit}")
    return args


def _rel(path: str) -> str:
    """``path`` relative to the repository when it lies inside it (commands to copy stay portable)."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return path


def report(args, argv, ranked: list[dict], ablation: list[dict], *, answers: bool, structural: bool, why: str,
           extra: dict) -> None:
    """Print the grid, the ablation and the winner with the commands; write ``--out``."""
    best = ranked[0]
    print(f"\ngrid ({len(ranked)} points, grounded + repair {'off' if structural else 'on'}), ranked by "
          + ("F1, Hits@1, fewer statements, EHR" if answers else "EHR, fewer statements") + ":")
    print_table(ranked)
    if ablation:
        print("\ngrounded choice / self-repair at the best point:")
        print_table(ablation)
    pairs = extra["questions"] * (len(ranked) + max(0, len(ablation) - 1))
    print(f"\npipeline runs: {extra['pipeline_runs']} of {pairs} question x point pairs (the rest reused)")
    print(f"runtime: grid {extra['grid_s']} s, total {extra['runtime_s']} s")
    if best["rule"] == "adaptive":
        flags = f"--rule adaptive --gamma1 {best['gamma1']} --gamma2 {best['gamma2']}"
        what = f"RecallConfig(rule='adaptive', gamma1={best['gamma1']}, gamma2={best['gamma2']}, k={args.k})"
    else:
        flags, what = "--rule memq-code", f"RecallConfig(rule='memq-code', k={args.k})"
    metric = (f"F1 {best['f1']:.4f}, Hits@1 {best['hits@1']:.4f}, EHR {best['ehr']:.4f}" if answers
              else f"EHR {best['ehr']:.4f} ({why})")
    ties = sum(1 for r in ranked if rank_key(r, answers) == rank_key(best, answers)) - 1
    if ties:
        print(f"\n{ties} other grid point(s) tie with the winner on every ranking key: the data does not "
              "separate them")
    print(f"\nwinner: {what}: dev {metric}, {best['recalled_per_step']:.2f} statements recalled per step")
    vs = extra["vs_default"]
    print(f"winner - {vs['default']}: {vs['metric']} {vs['delta']:+.4f}, paired bootstrap 95% interval "
          f"[{vs['ci95'][0]:+.4f}, {vs['ci95'][1]:+.4f}] over {extra['questions']} questions")
    if extra["winner_errors"]:
        print("winner's errors (each scores 0): " + ", ".join(f"{k} x{v}" for k, v in extra["winner_errors"].items()))
    cmd = " ".join(["nice", ".venv/bin/python", "benchmarks/tune_recall.py",
                    *[a if " " not in a else repr(a) for a in (argv if argv is not None else sys.argv[1:])]])
    print(f"reproduce: {cmd}")
    planner = "oracle" if args.plans == "oracle" else "<fewshot|finetuned: the planner that wrote the plans>"
    print(f"check it:  .venv/bin/python -m memq evaluate --dataset {args.dataset} --split dev --planner {planner} "
          f"{flags}" + ("  (needs a KG that holds these questions)" if structural else f" --kg {_rel(args.kg)}"))
    if extra["held_out_dev_statements"]:
        print("           (memq evaluate recalls from the full memory bank, dev-only statements included: "
              "expect higher numbers there)")
    if not answers:
        print("note: EHR never penalises extra recalled statements, so EHR-only tuning leans to loose thresholds")
    if args.out:
        result = {"dataset": args.dataset, "split": "dev", "plans": args.plans, "kg": _rel(args.kg),
                  "tuned_on": "f1" if answers else f"ehr ({why})", "structure_only": structural, **extra,
                  "winner": best, "ties_with_winner": ties, "grid": ranked, "ablation": ablation, "command": cmd}
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
        tmp.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, out)
        print(f"wrote {out}")


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    from memq.memory.bank import MemoryBank

    t_start = time.perf_counter()
    structural = args.kg == "none"
    answers = args.dataset == "webqsp" and not structural
    questions = load_questions(args.dataset, args.limit)
    why = ("CWQ dev has no gold answers" if args.dataset == "cwq" else "no KG (--kg none)")
    print(f"{args.dataset} dev: {len(questions)} questions" + ("" if answers else
          f" ({why}: tuned on EHR only; F1/Hits@1 are not measured)"))

    t0 = time.perf_counter()
    plans = oracle_plans(questions) if args.plans == "oracle" else file_plans(args.plans, questions)
    no_plan = sum(1 for p, _, _ in plans.values() if p is None)
    print(f"plans: {args.plans} ({no_plan} questions without a usable plan score 0) "
          f"[{time.perf_counter() - t0:.1f} s]")

    t0 = time.perf_counter()
    memory = args.memory or str(ROOT / "memory_bank" / args.dataset)
    bank = MemoryBank.load(memory)
    removed = 0
    if not args.keep_dev_statements:
        from memq.evaluate.run import questions_for

        bank, removed = held_out_bank(bank, {q.id for q in questions_for(args.dataset, "dev")})
    print(f"memory: {_rel(memory)}, {len(bank)} statements ({removed} dev-only statements held out)")
    cache = CachedSearch(bank)
    texts = recall_texts(plans)
    cache.warm(texts, args.k * 3)
    print(f"searched {len(set(texts))} distinct step texts once [{time.perf_counter() - t0:.1f} s with "
          "MiniLM load]")

    t0 = time.perf_counter()
    kg = open_store(args.kg, args.store)
    print("kg: none (structure only: grounded choice and self-repair off)" if structural else
          f"kg: {_rel(args.kg)} ({args.store} Oxigraph store) [{time.perf_counter() - t0:.1f} s]")

    tuner = Tuner(cache, kg, questions, plans, args.timeout)
    rows = []
    t0 = time.perf_counter()
    for recall in grid_points(args.gamma1, args.gamma2, args.k):
        rows.append(tuner.point(recall, grounded=not structural, repair=not structural))
    ranked = sorted(rows, key=lambda r: rank_key(r, answers), reverse=True)
    best = ranked[0]
    best_recall = RecallConfig(best["rule"], best["gamma1"] or 0.9, best["gamma2"] or 0.8, args.k)
    ablation = [] if structural else [tuner.point(best_recall, g, r)
                                      for g, r in ((True, False), (False, True), (False, False))]
    grid_s = time.perf_counter() - t0

    ranked_ablation = [best, *ablation] if ablation else []
    default = RecallConfig()
    on = not structural
    default_row = next((r for r in rows if point_key(r) == (default.rule, default.gamma1, default.gamma2, on, on)),
                       None) or tuner.point(default, on, on)
    delta, lo, hi = paired_bootstrap(tuner.per_question[point_key(best)], tuner.per_question[point_key(default_row)])
    vs_default = {"default": f"RecallConfig() = {default.rule} {default.gamma1}/{default.gamma2}",
                  "metric": "f1" if answers else "ehr", "delta": round(delta, 4), "ci95": [round(lo, 4), round(hi, 4)]}
    report(args, argv, ranked, ranked_ablation, answers=answers, structural=structural, why=why,
           extra={"memory": _rel(memory), "held_out_dev_statements": removed, "questions": len(questions),
                  "pipeline_runs": tuner.runs, "vs_default": vs_default,
                  "winner_errors": dict(tuner.error_kinds[point_key(best)]), "grid_s": round(grid_s, 1),
                  "runtime_s": round(time.perf_counter() - t_start, 1)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
