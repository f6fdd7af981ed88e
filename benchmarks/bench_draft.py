"""How many tokens speculative decoding keeps per forward pass, for drafter settings, on WebQSP dev plans.

    .venv/bin/python benchmarks/bench_draft.py                      # the grid, and the cost of a pass of k tokens
    .venv/bin/python benchmarks/bench_draft.py --no-cost --interleave 0 --json /tmp/draft.json   # replay only

Greedy decoding with drafts (memq.llm.draft, memq.llm.llamacpp) writes exactly the greedy tokens, so its passes can be
counted without the model: replay each plan's greedy tokens (the llama.cpp plans in a backend_parity JSON, first
200 WebQSP dev questions) and, at each pass, keep the drafted tokens up to the first that differs. The drafter is
built from the committed adapter's training plans (the train part; dev is held out). Each setting reports the
tokens kept per pass and an estimated time relative to one token a pass, from the measured cost of one pass over
1 to 8 tokens on the planner's f16 weights (``--no-cost`` uses the ratios stored below instead). ``--interleave N``
then decodes the first N prompts for real without drafts, with the first settings tried and with memq's, taking
turns on each question, and checks that the three write the same texts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# seconds of one pass over k tokens / one pass over one token, measured with this script on the 2-core CPU
# (f16 weights, 1 thread); used with --no-cost
COST = {1: 1.0, 2: 1.5, 3: 1.55, 4: 1.8, 5: 1.85, 6: 2.0, 7: 2.15, 8: 2.3}


def pass_costs(llm, prompt: str, repeats: int = 5) -> dict[int, float]:
    """Median seconds of one pass over k = 1..8 new tokens after ``prompt``, relative to k = 1."""
    runner = llm.load().runner
    ids = llm.prompt_ids(prompt)
    runner.logits(ids, len(ids))
    times: dict[int, list[float]] = {k: [] for k in COST}
    for _ in range(repeats):
        for k in times:
            runner.truncate(len(ids))
            start = time.perf_counter()
            runner.logits(ids + list(range(100, 100 + k)), len(ids) + 1, keep=False)  # the k tokens, one pass
            times[k].append(time.perf_counter() - start)
    one = statistics.median(times[1])
    return {k: round(statistics.median(v) / one, 3) for k, v in times.items()}


def replay(drafter, prompts: list[list[int]], outputs: list[list[int]], k: int) -> tuple[int, int, float]:
    """(tokens, passes, cost in one-token passes) of drafted greedy decoding that writes ``outputs``."""
    tokens = passes = 0
    cost = 0.0
    for prompt, out in zip(prompts, outputs, strict=True):
        done = 1  # the prompt's pass chooses the first token
        while done < len(out):
            guess = drafter.draft(prompt + out[:done], k)
            kept = 0
            while kept < len(guess) and done + kept < len(out) and out[done + kept] == guess[kept]:
                kept += 1
            done = min(len(out), done + kept + 1)  # the kept tokens, then the pass's own choice after them
            passes += 1
            cost += COST[len(guess) + 1]
        tokens += len(out) - 1
    return tokens, passes, cost


def interleaved(llm, golds, seqs: list[list[int]], n: int) -> dict:
    """Seconds and passes of real decoding of the first ``n`` dev prompts without drafts, with the first drafter
    settings tried and with memq's, taking turns on each question (so a busier moment hits all three alike).
    Each prompt is decoded once untimed first, so every setting starts from the same KV cache (generation only)."""
    import memq.llm.kv_state as backend  # greedy_steps reads its DRAFT (tokens drafted a pass)
    from memq.llm import draft
    from memq.plan.prompt import planner_prompt

    runner = llm.load().runner
    settings = {"none": (None, 0),
                "first tried (order 4, contexts of 2+, 50%, 6 a pass)": (
                    draft.NgramDrafter(seqs, eos=runner.eos, order=4, min_context=2, min_share=0.5), 6),
                "memq (memq.llm.draft defaults)": (draft.NgramDrafter(seqs, eos=runner.eos), draft.DRAFT)}
    out = {name: {"s": 0.0, "passes": 0, "texts": []} for name in settings}
    default = llm.drafter, backend.DRAFT
    try:
        for g in golds[:n]:
            prompt = planner_prompt(g.question, g.entity_names)
            for name, (drafter, k) in settings.items():
                llm.drafter, backend.DRAFT = drafter, k
                llm.generate([prompt], max_new_tokens=160)
                passes, start = runner.decodes, time.perf_counter()
                out[name]["texts"].append(llm.generate([prompt], max_new_tokens=160)[0])
                out[name]["s"] += time.perf_counter() - start
                out[name]["passes"] += runner.decodes - passes
    finally:
        llm.drafter, backend.DRAFT = default
    same = all(v["texts"] == out["none"]["texts"] for v in out.values())
    return {"questions": n, "same_texts": same,
            **{name: {"s": round(v["s"], 2), "passes": v["passes"]} for name, v in out.items()}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--plans", default=str(ROOT / "benchmarks/results/backend_parity.json"),
                   help="backend_parity JSON whose llama.cpp plan texts are replayed")
    p.add_argument("--no-cost", action="store_true", help="do not time passes on the model; use the stored ratios")
    p.add_argument("--interleave", type=int, default=30, metavar="N",
                   help="also time real decoding of the first N dev prompts, the settings taking turns (0: skip)")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)

    from memq.llm.draft import NgramDrafter
    from memq.plan.data import load_split
    from memq.plan.planner import FineTunedPlanner, default_adapter, training_plans
    from memq.plan.prompt import planner_prompt

    rows = json.loads(Path(args.plans).read_text())["per_question"]
    golds = {g.question_id: g for g in load_split("webqsp", "dev")}
    planner = FineTunedPlanner(default_adapter("webqsp"))
    llm = planner.llm
    if planner.fallbacks:
        raise SystemExit(f"llama.cpp did not load: {planner.fallbacks}")
    loaded = llm.load()
    if not args.no_cost:
        COST.update(pass_costs(llm, planner_prompt(golds[rows[0]["id"]].question, golds[rows[0]["id"]].entity_names)))
        print("cost of a pass over k tokens / one token:", COST, flush=True)
    eos = loaded.runner.eos
    prompts = [llm.prompt_ids(planner_prompt(golds[r["id"]].question, golds[r["id"]].entity_names)) for r in rows]
    outputs = [llm.token_ids(r["llamacpp"]) + [eos] for r in rows]
    texts = training_plans(planner.manifest)
    seqs = [llm.token_ids(t) for t in texts]
    results = []
    for order in (3, 4, 5):
        for min_context in (1, 2, 3):
            for share in (0.3, 0.5, 0.7):
                drafter = NgramDrafter(seqs, eos=eos, order=order, min_context=min_context, min_share=share)
                for k in (3, 4, 6, 7):
                    tokens, passes, cost = replay(drafter, prompts, outputs, k)
                    results.append({"order": order, "min_context": min_context, "min_share": share, "draft": k,
                                    "tokens_per_pass": round(tokens / passes, 3),
                                    "relative_time": round(cost / tokens, 3)})
    results.sort(key=lambda r: r["relative_time"])
    for r in results[:10]:
        print(r)
    from memq.llm import draft

    chosen = next(r for r in results if (r["order"], r["min_context"], r["min_share"], r["draft"]) == (
        draft.ORDER, draft.MIN_CONTEXT, draft.MIN_SHARE, draft.DRAFT))
    print("memq's setting:", chosen)
    timed = None
    if args.interleave:
        timed = interleaved(llm, [golds[r["id"]] for r in rows], seqs, args.interleave)
        print("real decoding, settings taking turns:", timed)
    if args.json:
        out = {"command": " ".join(["python", *sys.argv]), "plans": len(rows), "training_plans": len(texts),
               "interleaved": timed,
               "pass_cost": COST, "cost_measured": not args.no_cost, "threads": llm.threads,
               "weights": llm.weights, "cpus": os.cpu_count(), "chosen": chosen, "grid": results}
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
