"""Benchmark the memory stage: describers, embedding, and the WebQSP-train memory build.

    .venv/bin/python benchmarks/bench_memory.py                  # template + embedding + build
    .venv/bin/python benchmarks/bench_memory.py --llm-sample 50  # + local Qwen describer on 50 statements
    .venv/bin/python benchmarks/bench_memory.py --skip-build --llm-only --llm-sample 40 --llm-threads 1 --batch-size 8
    .venv/bin/python benchmarks/bench_memory.py --load-only     # load the default banks with the schema they include

Prints one line per measurement (and ``--json-out FILE`` writes them). The
local-LLM part loads Qwen2.5-Coder-0.5B-Instruct through :mod:`memq.llm` on
llama.cpp (``--llm-backend``, ``--llm-threads``; ``--batch-size`` prompts decoded
together) or transformers, describes a seeded sample of structure 1/2/3 statements in
the order a build takes them (by structure, then id) and ``--batch-size`` at a time,
reports how many answers passed validation first time, after the retry, or fell
back to the template, and shows five side by side with the template descriptions.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _statements():
    from memq.memory.build import source_statements

    return source_statements("webqsp-train")


def bench_template(statements, repeat: int) -> dict:
    from memq.describe import TemplateDescriber

    d = TemplateDescriber()
    d.describe(statements[:5])  # schema load
    start = time.perf_counter()
    for _ in range(repeat):
        out = d.describe(statements)
    secs = time.perf_counter() - start
    return {"template_statements_per_s": round(repeat * len(statements) / secs, 1),
            "template_descriptions_per_statement": round(sum(map(len, out)) / len(out), 2)}


def bench_embed(statements, threads: int | None) -> dict:
    from memq.describe import TemplateDescriber
    from memq.memory import MiniLMEmbedder

    texts = [t for ds in TemplateDescriber().describe(statements) for t in ds]
    emb = MiniLMEmbedder(threads=threads)
    start = time.perf_counter()
    emb.encode(texts[:2])
    load = time.perf_counter() - start
    start = time.perf_counter()
    emb.encode(texts)
    cold = time.perf_counter() - start
    start = time.perf_counter()
    emb.encode(texts)
    warm = time.perf_counter() - start
    # The first pass over new batch shapes is slower on CPU (kernel set-up per shape).
    return {"minilm_load_s": round(load, 2), "minilm_sentences_per_s_first_pass": round(len(texts) / cold, 1),
            "minilm_sentences_per_s": round(len(texts) / warm, 1), "minilm_sentences": len(texts)}


def bench_build(threads: int | None) -> dict:
    from memq.describe import TemplateDescriber
    from memq.memory import BuildConfig, MiniLMEmbedder, build_from_sources

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        bank = build_from_sources(["webqsp-train"], TemplateDescriber(), MiniLMEmbedder(threads=threads),
                                  Path(tmp) / "m", config=BuildConfig(progress=False, keep_cache=False))
        secs = time.perf_counter() - start
    c = bank.counts()
    return {"build_webqsp_train_s": round(secs, 2), "build_statements": c["statements"],
            "build_descriptions": c["descriptions"], "build_by_structure": c["by_structure"]}


def bench_load(repeat: int) -> dict:
    """The committed default banks loaded as the pipeline loads them, with the schema bank they include (the issue's
    limit: 2 s). Best and median of ``repeat`` loads, each in a fresh bank object (the OS file cache is warm)."""
    from memq.memory import MemoryBank

    root = Path(__file__).resolve().parent.parent / "memory_bank"
    out: dict = {}
    for name in ("webqsp", "cwq"):
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            bank = MemoryBank.load(root / name)
            times.append(time.perf_counter() - start)
        times.sort()
        out[f"load_{name}_s_best"] = round(times[0], 2)
        out[f"load_{name}_s_median"] = round(times[len(times) // 2], 2)
        out[f"load_{name}_statements"] = len(bank)
    return out


def bench_llm(statements, n: int, model: str, max_new_tokens: int, batch_size: int, show: int,
              backend: str = "llamacpp", threads: int | None = None, chunk: int | None = None) -> dict:
    from memq.describe import LLMDescriber, LLMDescriberConfig, TemplateDescriber
    from memq.llm.llamacpp import make_llm
    from memq.types import STRUCTURES

    pool = [s for s in statements if s.structure in ("1", "2", "3")]
    sample = sorted(random.Random(0).sample(pool, min(n, len(pool))),
                    key=lambda s: (STRUCTURES.index(s.structure), s.id))  # a build's order: prompts share prefixes
    llm, note = make_llm(backend, model, batch_size=batch_size, threads=threads, parallel=batch_size)
    describer = LLMDescriber(llm, LLMDescriberConfig(max_new_tokens=max_new_tokens), backend_fallback=note)
    start = time.perf_counter()
    llm.load()
    load = time.perf_counter() - start
    chunk = chunk or batch_size  # statements per describe call, as memq memory build hands them over
    start = time.perf_counter()
    got = [d for i in range(0, len(sample), chunk) for d in describer.describe_with_info(sample[i:i + chunk])]
    secs = time.perf_counter() - start
    template = TemplateDescriber().describe(sample)
    rows = [{"structure": s.structure, "sparql": s.sparql, "llm": d.descriptions[0], "fallback": d.fallback,
             "template": t[0]} for s, d, t in zip(sample, got, template, strict=True)]
    print(f"\nlocal LLM ({model}) vs template, {show} of {len(sample)}:")
    for r in [r for r in rows if not r["fallback"]][:show]:
        print(f"  [{r['structure']}] {r['sparql']!r}\n      llm:      {r['llm']}\n      template: {r['template']}")
    st = describer.stats
    for sid, attempt, why, text in describer.rejected:
        print(f"  rejected {sid} (attempt {attempt}): {why}: {text!r}")
    return {"llm_model": model, "llm_runtime": describer.runtime, "llm_batch_size": batch_size, "llm_chunk": chunk,
            "llm_load_s": round(load, 1), "llm_sample": len(sample),
            "llm_statements_per_s": round(len(sample) / secs, 3), "llm_seconds": round(secs, 1),
            "llm_seconds_per_statement": round(secs / len(sample), 2),
            "load_average_1min_after": round(os.getloadavg()[0], 2),
            "llm_valid_first": st["valid_first"], "llm_valid_after_retry": st["valid_retry"],
            "llm_fallback_to_template": st["fallback"], "llm_prompts": st["prompts"],
            "llm_new_tokens": getattr(llm, "tokens", None), "llm_rows": rows,
            "llm_rejected": [list(r) for r in describer.rejected]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads (embedding and LLM)")
    ap.add_argument("--repeat", type=int, default=5, help="template describer repetitions")
    ap.add_argument("--llm-sample", type=int, default=0, help="statements for the local LLM describer (0: skip)")
    ap.add_argument("--llm-model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--llm-backend", choices=("llamacpp", "transformers"), default="llamacpp")
    ap.add_argument("--llm-threads", type=int, default=None, help="llama.cpp threads (default: CPUs - 1)")
    ap.add_argument("--llm-only", action="store_true", help="only the local LLM describer")
    ap.add_argument("--chunk", type=int, default=None,
                    help="statements per describe call (default --batch-size, as memq memory build; "
                         "more: finished sequences take waiting prompts)")
    ap.add_argument("--max-new-tokens", type=int, default=40)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--skip-build", action="store_true")
    ap.add_argument("--load-only", action="store_true", help="only load the committed default banks (with the schema)")
    ap.add_argument("--json-out", help="write the numbers to this JSON file")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(args.threads)
    results: dict = {"threads": args.threads}
    statements = _statements()
    results["webqsp_train_statements"] = len(statements)
    if args.load_only:
        args.llm_only, args.llm_sample = True, 0
    for step in ((lambda: bench_load(args.repeat)) if args.load_only else None,
                 None if args.llm_only else lambda: bench_template(statements, args.repeat),
                 None if args.llm_only else lambda: bench_embed(statements, args.threads),
                 None if args.skip_build or args.llm_only else lambda: bench_build(args.threads),
                 (lambda: bench_llm(statements, args.llm_sample, args.llm_model, args.max_new_tokens,
                                    args.batch_size, 5, args.llm_backend, args.llm_threads,
                                    args.chunk)) if args.llm_sample else None):
        if step is None:
            continue
        got = step()
        results.update(got)
        for k, v in got.items():
            if k not in ("llm_rows", "llm_rejected"):
                print(f"{k}: {v}", flush=True)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
