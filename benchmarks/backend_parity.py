"""Do the llama.cpp and transformers backends write the same plans? One command, both backends, one JSON.

    nice .venv/bin/python benchmarks/backend_parity.py                       # first 200 WebQSP dev questions
    nice .venv/bin/python benchmarks/backend_parity.py --adapter DIR --out benchmarks/results/backend_parity.json
    nice .venv/bin/python benchmarks/backend_parity.py --backends llamacpp --gguf F16.gguf --out /tmp/f16.json
    nice .venv/bin/python benchmarks/backend_parity.py \
        --transformers-plans benchmarks/results/backend_parity_transformers_plans.json   # llama.cpp only, ~10 min

The fine-tuned planner (default: the committed adapter, memory_bank/<dataset>/planner, whatever it holds now)
plans the first ``--limit`` questions of the dev split (memq.plan.data.load_split) twice with the same prompt:
with llama.cpp (the base GGUF + the adapter converted to a GGUF LoRA adapter, built or verified in the memq
cache) and with transformers (the dequantised base + the adapter merged by peft, batched). It reports

* agreement: the share of questions whose raw plan texts are identical (and, looser, whose normalised plans
  are, as memq.plan.evaluate compares them);
* each backend's exact-plan match against the derived gold plan (memq.plan.evaluate) and their difference
  in points;
* seconds per question of each backend (llama.cpp one prompt at a time, transformers in batches).

Every per-question row holds the plan text of each backend that ran. ``--gguf`` runs llama.cpp on another GGUF
file with the same adapter (say an F16 or F32 copy of the base made by llama.cpp's quantizer, to see what its
quantised matrix products cost); the adapter manifest's base sha256 is then not checked, and the JSON records the
file's name and sha256. ``--backends`` runs one backend only (no agreement is computed) and ``--ids`` plans only
the named questions of the first ``--limit``. ``--weights`` picks llama.cpp's weights (memq.llm.gguf_weights: ``f16``,
the default, or ``shipped``).

``--transformers-plans FILE`` takes transformers' plan texts from a JSON file (``{"plans": {id: text}, "source":
...}``) instead of planning again: transformers takes about 24 s a question on the 2-core CPU, 80 minutes for 200.
The committed ``benchmarks/results/backend_parity_transformers_plans.json`` holds them, with how they were obtained;
they are scored as a run would score them, and the JSON says where they came from.

The targets (agreement >= 95%, exact-match difference <= 1 point) are checked and printed; the exit code is 0
either way (the JSON records whether they held). A backend that falls back (llama-cpp-python missing) is an
error here, not a comparison of transformers with itself.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

AGREEMENT_TARGET = 0.95
EXACT_GAP_TARGET = 1.0  # points


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return path.name


def run_backend(backend: str, adapter: Path, golds, batch_size: int, progress: bool,
                gguf: Path | None = None) -> dict:
    from memq.plan.evaluate import evaluate
    from memq.plan.planner import FineTunedPlanner

    planner = FineTunedPlanner(adapter, backend=backend, batch_size=batch_size)
    if gguf is not None and backend == "llamacpp":
        from memq.llm.llamacpp import LlamaCppLLM

        # another file than the adapter's base on purpose (an F16/F32 copy): skip the planner's base-sha256 check
        planner._llm = LlamaCppLLM(str(gguf), adapter=adapter, batch_size=batch_size)
    t0 = time.perf_counter()
    llm = planner.llm
    if planner.fallbacks:
        raise SystemExit(f"the {backend} backend did not run: {'; '.join(planner.fallbacks)}")
    loaded = llm.load()
    load_s = time.perf_counter() - t0
    bar = None
    if progress:
        from tqdm import tqdm

        def bar(chunks):
            return tqdm(chunks, desc=f"{backend} ({batch_size} a call)", unit="batch", file=sys.stderr)
    t0 = time.perf_counter()
    metrics, scores = evaluate(planner, golds, bar)
    plan_s = time.perf_counter() - t0
    prepared = [{"built": what, "s": round(s, 1)} for what, s in getattr(loaded, "prepared", ())]
    return {"backend": planner.backend_used, "model": llm.name, "load_s": round(load_s, 2), "caches_built": prepared,
            "plan_s": round(plan_s, 1), "s_per_question": round(plan_s / len(golds), 3),
            "new_tokens": llm.tokens, **_passes(llm), "metrics": metrics, "scores": scores}


def _passes(llm) -> dict:
    """llama.cpp's forward passes and the drafts it decoded with (speculative decoding, memq.llm.draft)."""
    if not hasattr(llm, "counters"):
        return {}
    passes, tokens = llm.counters
    return {"drafts": llm.drafts, "forward_passes": passes, "tokens_evaluated": tokens}


def recorded_run(path: Path, golds) -> dict:
    """transformers' plans read from ``path`` and scored as :func:`run_backend` scores a run's."""
    from memq.plan.evaluate import score_plan, summarise

    data = json.loads(path.read_text(encoding="utf-8"))
    missing = [g.question_id for g in golds if g.question_id not in data["plans"]]
    if missing:
        raise SystemExit(f"{path} has no transformers plan for {len(missing)} question(s): {', '.join(missing[:5])}")
    scores = [score_plan(g, data["plans"][g.question_id]) for g in golds]
    return {"backend": "transformers", "recorded": {"file": _relative(path), "source": data.get("source")},
            "s_per_question": data.get("s_per_question"), "new_tokens": data.get("new_tokens"),
            "metrics": summarise(scores), "scores": scores}


def main(argv=None) -> int:
    from memq.plan.base import BACKENDS

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", choices=("webqsp", "cwq"), default="webqsp")
    p.add_argument("--limit", type=int, default=200, help="first N dev questions (default 200)")
    p.add_argument("--adapter", help="fine-tuned planner adapter (default: memory_bank/<dataset>/planner)")
    p.add_argument("--batch-size", type=int, default=8, help="transformers prompts per generate call")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="torch CPU threads (llama.cpp uses every CPU)")
    p.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS),
                   help="backends to run (default both; with one, no agreement is computed)")
    p.add_argument("--gguf", help="run llama.cpp on this GGUF file (e.g. an F16 copy of the base) with the adapter")
    p.add_argument("--ids", nargs="+", help="plan only these question ids (of the first --limit)")
    p.add_argument("--out", help="result JSON (default benchmarks/results/backend_parity.json; required with "
                                 "--backends, --gguf or --ids, which do not make that measurement)")
    p.add_argument("--weights", choices=("f16", "shipped"), default=None,
                   help="llama.cpp's base weights (default $MEMQ_LLAMA_WEIGHTS, else f16)")
    p.add_argument("--transformers-plans", help="JSON of transformers' plan texts to compare with, instead of a run")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    if args.limit < 1:
        p.error(f"--limit must be >= 1, got {args.limit}")
    partial = len(set(args.backends)) < 2 or args.gguf or args.ids
    if partial and not args.out:
        p.error("--backends, --gguf and --ids need --out (the default file holds the full two-backend measurement)")
    out_path = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / "backend_parity.json"
    import torch

    torch.set_num_threads(args.threads)
    from memq.files import sha256_file
    from memq.llm.gguf_weights import weights_from_env
    from memq.llm.llamacpp import default_threads
    from memq.plan.data import load_split
    from memq.plan.format import normalise
    from memq.plan.planner import default_adapter, read_manifest

    adapter = Path(args.adapter) if args.adapter else default_adapter(args.dataset)
    gguf = Path(args.gguf) if args.gguf else None
    if gguf is not None and not (gguf.is_file() and gguf.suffix == ".gguf"):
        p.error(f"--gguf must be a .gguf file, got {args.gguf}")
    golds = load_split(args.dataset, "dev")[:args.limit]
    if args.ids:
        missing = set(args.ids) - {g.question_id for g in golds}
        if missing:
            p.error(f"--ids not among the first {args.limit} dev questions: {', '.join(sorted(missing))}")
        golds = [g for g in golds if g.question_id in set(args.ids)]
    if args.weights:
        os.environ["MEMQ_LLAMA_WEIGHTS"] = args.weights
    backends = [b for b in BACKENDS if b in args.backends]
    runs = {}
    if args.transformers_plans:
        runs["transformers"] = recorded_run(Path(args.transformers_plans), golds)
        backends = [b for b in backends if b != "transformers"]
    for backend in backends:
        print(f"{backend}: planning {len(golds)} {args.dataset} dev questions with {_relative(adapter)} ...",
              file=sys.stderr, flush=True)
        runs[backend] = run_backend(backend, adapter, golds, args.batch_size if backend == "transformers" else 1,
                                    not args.no_progress, gguf)
        print(f"{backend}: {runs[backend]['s_per_question']} s a question", file=sys.stderr, flush=True)

    both = len(runs) == 2
    rows, same_raw, same_norm = [], 0, 0
    for i, g in enumerate(golds):
        row: dict = {"id": g.question_id}
        if both:
            a, b = runs["llamacpp"]["scores"][i].predicted, runs["transformers"]["scores"][i].predicted
            row["same"] = a == b
            row["same_normalised"] = normalise(a, g.entity_names) == normalise(b, g.entity_names)
            same_raw += row["same"]
            same_norm += row["same_normalised"]
        for k, r in runs.items():
            row[f"exact_{k}"] = r["scores"][i].exact
        for k, r in runs.items():
            row[k] = r["scores"][i].predicted
        rows.append(row)
    n = len(golds)
    em = {k: runs[k]["metrics"]["exact_match"] for k in runs}
    gap = round(100 * abs(em["llamacpp"] - em["transformers"]), 2) if both else None
    manifest = read_manifest(adapter)
    out = {
        "command": " ".join(["python", *sys.argv]),
        "dataset": args.dataset, "split": "dev", "questions": n,
        "adapter": _relative(adapter),
        "adapter_sha256": {f: sha256_file(adapter / f)[:16] for f in ("adapter_config.json",
                                                                       "adapter_model.safetensors")},
        "base_model": manifest.get("base_model"),
        **({"llamacpp_gguf": {"name": gguf.name, "sha256": sha256_file(gguf)}} if gguf is not None else {}),
        "llama_weights": weights_from_env(), "llama_threads": default_threads(),
        "threads": args.threads, "cpus": os.cpu_count(),
        "agreement": round(same_raw / n, 4) if both else None,
        "agreement_normalised": round(same_norm / n, 4) if both else None,
        "exact_match": em,
        "exact_match_gap_points": gap,
        "targets": {"agreement_min": AGREEMENT_TARGET, "exact_match_gap_max_points": EXACT_GAP_TARGET,
                    "met": both and same_raw / n >= AGREEMENT_TARGET and gap <= EXACT_GAP_TARGET},
        "backends": {k: {key: v for key, v in r.items() if key != "scores"} for k, r in runs.items()},
        "speedup_s_per_question": (round(runs["transformers"]["s_per_question"] / runs["llamacpp"]["s_per_question"],
                                         2) if both else None),
        "per_question": rows,
    }
    path = out_path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    if both:
        print(f"{args.dataset} dev, {n} questions: plans identical {same_raw}/{n} ({same_raw / n:.1%}; normalised "
              f"{same_norm / n:.1%}); exact plan match llama.cpp {em['llamacpp']:.3f} vs transformers "
              f"{em['transformers']:.3f} ({gap} points); s/question {runs['llamacpp']['s_per_question']} vs "
              f"{runs['transformers']['s_per_question']}; targets {'met' if out['targets']['met'] else 'NOT met'}")
    else:
        print(f"{args.dataset} dev, {n} questions, {backends[0]} only: exact plan match {em[backends[0]]:.3f}; "
              f"s/question {runs[backends[0]]['s_per_question']}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
