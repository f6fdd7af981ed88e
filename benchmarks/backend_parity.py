"""Do the llama.cpp and transformers backends write the same plans? One command, both backends, one JSON.

    nice .venv/bin/python benchmarks/backend_parity.py                       # first 200 WebQSP dev questions
    nice .venv/bin/python benchmarks/backend_parity.py --adapter DIR --out benchmarks/results/backend_parity.json

The fine-tuned planner (default: the committed adapter, memory_bank/<dataset>/planner, whatever it holds now)
plans the first ``--limit`` questions of the dev split (memq.plan.data.load_split) twice with the same prompt:
with llama.cpp (the base GGUF + the adapter converted to a GGUF LoRA adapter, built or verified in the memq
cache) and with transformers (the dequantised base + the adapter merged by peft, batched). It reports

* agreement: the share of questions whose raw plan texts are identical (and, looser, whose normalised plans
  are, as memq.plan.evaluate compares them);
* each backend's exact-plan match against the derived gold plan (memq.plan.evaluate) and their difference
  in points;
* seconds per question of each backend (llama.cpp one prompt at a time, transformers in batches).

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


def run_backend(backend: str, adapter: Path, golds, batch_size: int, progress: bool) -> dict:
    from memq.plan.evaluate import evaluate
    from memq.plan.planner import FineTunedPlanner

    planner = FineTunedPlanner(adapter, backend=backend, batch_size=batch_size)
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
            "new_tokens": llm.tokens, "metrics": metrics, "scores": scores}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", choices=("webqsp", "cwq"), default="webqsp")
    p.add_argument("--limit", type=int, default=200, help="first N dev questions (default 200)")
    p.add_argument("--adapter", help="fine-tuned planner adapter (default: memory_bank/<dataset>/planner)")
    p.add_argument("--batch-size", type=int, default=8, help="transformers prompts per generate call")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="torch CPU threads (llama.cpp uses every CPU)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "backend_parity.json"))
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    if args.limit < 1:
        p.error(f"--limit must be >= 1, got {args.limit}")
    import torch

    torch.set_num_threads(args.threads)
    from memq.hashing import sha256_file
    from memq.plan.data import load_split
    from memq.plan.format import normalise
    from memq.plan.planner import default_adapter, read_manifest

    adapter = Path(args.adapter) if args.adapter else default_adapter(args.dataset)
    golds = load_split(args.dataset, "dev")[:args.limit]
    runs = {}
    for backend in ("llamacpp", "transformers"):
        print(f"{backend}: planning {len(golds)} {args.dataset} dev questions with {_relative(adapter)} ...",
              file=sys.stderr, flush=True)
        runs[backend] = run_backend(backend, adapter, golds, args.batch_size if backend == "transformers" else 1,
                                    not args.no_progress)
        print(f"{backend}: {runs[backend]['s_per_question']} s a question", file=sys.stderr, flush=True)

    rows, same_raw, same_norm = [], 0, 0
    for g, a, b in zip(golds, runs["llamacpp"]["scores"], runs["transformers"]["scores"], strict=True):
        raw = a.predicted == b.predicted
        norm = normalise(a.predicted, g.entity_names) == normalise(b.predicted, g.entity_names)
        same_raw += raw
        same_norm += norm
        rows.append({"id": g.question_id, "same": raw, "same_normalised": norm, "exact_llamacpp": a.exact,
                     "exact_transformers": b.exact, **({} if raw else {"llamacpp": a.predicted,
                                                                        "transformers": b.predicted})})
    n = len(golds)
    em = {k: runs[k]["metrics"]["exact_match"] for k in runs}
    gap = round(100 * abs(em["llamacpp"] - em["transformers"]), 2)
    manifest = read_manifest(adapter)
    out = {
        "command": " ".join(["python", *sys.argv]),
        "dataset": args.dataset, "split": "dev", "questions": n,
        "adapter": _relative(adapter),
        "adapter_sha256": {f: sha256_file(adapter / f)[:16] for f in ("adapter_config.json",
                                                                       "adapter_model.safetensors")},
        "base_model": manifest.get("base_model"),
        "threads": args.threads, "cpus": os.cpu_count(),
        "agreement": round(same_raw / n, 4),
        "agreement_normalised": round(same_norm / n, 4),
        "exact_match": em,
        "exact_match_gap_points": gap,
        "targets": {"agreement_min": AGREEMENT_TARGET, "exact_match_gap_max_points": EXACT_GAP_TARGET,
                    "met": same_raw / n >= AGREEMENT_TARGET and gap <= EXACT_GAP_TARGET},
        "backends": {k: {key: v for key, v in r.items() if key != "scores"} for k, r in runs.items()},
        "speedup_s_per_question": round(runs["transformers"]["s_per_question"] / runs["llamacpp"]["s_per_question"],
                                        2),
        "per_question": rows,
    }
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    print(f"{args.dataset} dev, first {n}: plans identical {same_raw}/{n} ({same_raw / n:.1%}; normalised "
          f"{same_norm / n:.1%}); exact plan match llama.cpp {em['llamacpp']:.3f} vs transformers "
          f"{em['transformers']:.3f} ({gap} points); s/question {runs['llamacpp']['s_per_question']} vs "
          f"{runs['transformers']['s_per_question']}; targets {'met' if out['targets']['met'] else 'NOT met'}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
