"""Train and evaluate the planners on a lent GPU, in resumable pieces that fit a short lease.

The GPU machine has no network, and each call to it carries at most 64 MiB of working tree, so the
work is in two halves:

    .venv/bin/python benchmarks/train_gpu.py prepare --work .gpu      # here: data, wheels, model parts

then, on the GPU machine, from a checkout without data/, memory_bank/ and benchmarks/results/ (they
are larger than one call may carry):

    1. one call carrying .gpu/data, .gpu/whl and .gpu/model/sha256 copies them to /tmp/gpu and installs
       the wheels into /tmp/site (only carried paths reach the machine, but /tmp stays while it is warm);
    2. eight calls each carrying one .gpu/model/partNN copy it to /tmp/gpu/model;
    3. PYTHONPATH=/tmp/site:. MEMQ_CACHE=/tmp/gpu/cache TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 \
       python3 benchmarks/train_gpu.py run --work /tmp/gpu --out $OUT JOB ...

``prepare`` writes into WORK (ignored by git) everything ``run`` needs: the derived training and dev
plans, the direct-SPARQL training examples, the test questions with their topic entities, the
base model's GGUF cut into 60 MiB parts, and wheels of the pinned transformers, peft, gguf and
tokenizers. ``run`` assembles the model (checking its sha256), then works through the JOBs in order
until ``--deadline`` seconds have passed: a training job stops with a checkpoint and the next
``run`` resumes it; a finished job is skipped. At the end its results (adapter, manifest with
device, time, steps and losses, dev metrics, plans) are packed into OUT in parts of at most 15 MiB,
each file once: files already sent are not sent again.

Jobs: ``train:NAME`` trains the configuration NAME of CONFIGS and scores its plans on dev (all of
them for WebQSP, the first ``DEV_LIMIT`` for CWQ); ``test:NAME`` writes the plans (and, with
``+ABLATION``, the direct-SPARQL outputs) for every test question in the form ``memq evaluate
--plans`` re-scores with no model call; ``test:best-webqsp`` takes the best configuration on dev.
``--dry-run`` runs the same path on the CPU with the tiny test model.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PART_BYTES = 15 * 1024 * 1024  # a part of a file coming back from the GPU machine (the limit is 16 MiB)
OUT_BYTES = 60 * 1024 * 1024  # what one run sends back (the limit is 64 MiB in at most 8 files)
DEV_LIMIT = 500  # CWQ dev questions scored after training (WebQSP: all of its dev split)
# ``--dry-run``: the whole path on the CPU with the tiny test model, 2 steps and 4 questions a job
DRY: dict = {}
PRECISION = ["fp32"]  # --precision; the committed adapters are fp32 (TF32 products): bf16 autocast gave NaN losses
WHEELS = ("transformers==5.23.0", "peft==0.21.2", "gguf==0.19.0", "tokenizers==0.23.3")
GGUF_NAME = "qwen2.5-coder-0.5b-instruct.gguf"

# name -> (kind, training data, TrainConfig fields); every run is bf16 on CUDA, dev held out as for the CPU runs
WEBQSP_LORA = dict(epochs=3.0, batch_size=16, lr=2e-4, lora_r=8, lora_alpha=16)
CWQ_LORA = dict(epochs=2.0, batch_size=32, lr=2e-4, lora_r=8, lora_alpha=16)
CONFIGS: dict[str, tuple[str, str, dict]] = {
    "webqsp-r8": ("planner", "webqsp", WEBQSP_LORA),
    "webqsp-r32": ("planner", "webqsp", {**WEBQSP_LORA, "lora_r": 32, "lora_alpha": 64}),
    "webqsp-full": ("planner", "webqsp", {**WEBQSP_LORA, "lora_r": 0, "lr": 2e-5, "checkpoint_every": 10**6}),
    "webqsp-direct-r8": ("direct", "webqsp", WEBQSP_LORA),
    "cwq-r8": ("planner", "cwq", CWQ_LORA),
    "cwq-direct-r8": ("direct", "cwq", CWQ_LORA),
    "joint-r8": ("planner", "webqsp+cwq", CWQ_LORA),
    "cwq-r8-350": ("planner", "cwq", {**CWQ_LORA, "max_steps": 350}),
}


# --------------------------------------------------------------------------- prepare (on the CPU machine)

def _write_jsonl(path: Path, rows) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n


def prepare(work: Path) -> None:
    import subprocess

    from memq.evaluate.direct import examples_from_plans
    from memq.evaluate.run import questions_for
    from memq.llm import gguf_source
    from memq.plan.data import load_split, to_json

    data = work / "data"
    counts = {}
    for ds in ("webqsp", "cwq"):
        train = load_split(ds, "train")
        counts[f"{ds}-train"] = _write_jsonl(data / f"{ds}-train.jsonl.gz", map(to_json, train))
        counts[f"{ds}-dev"] = _write_jsonl(data / f"{ds}-dev.jsonl.gz", map(to_json, load_split(ds, "dev")))
        examples, skipped = examples_from_plans(train)
        counts[f"{ds}-direct-train"] = _write_jsonl(data / f"{ds}-direct-train.jsonl.gz", (
            {"id": e.question_id, "question": e.question, "dataset": e.dataset, "parse_id": e.parse_id,
             "entities": [list(x) for x in e.entities], "text": e.text} for e in examples))
        counts[f"{ds}-direct-skipped"] = len(skipped)
        counts[f"{ds}-test"] = _write_jsonl(data / f"{ds}-test.jsonl.gz", (
            {"id": q.id, "question": q.question, "entities": [list(x) for x in dict(q.parses[0].topic_entities).items()]}
            for q in questions_for(ds, "test")))
    joint = load_split("cwq", "train", exclude_webqsp_test=True)
    counts["cwq-train-no-webqtest"] = _write_jsonl(data / "cwq-train-no-webqtest.jsonl.gz", map(to_json, joint))
    _, gguf, digest = gguf_source("qwen2.5-coder-0.5b")
    parts = work / "model"
    shutil.rmtree(parts, ignore_errors=True)
    parts.mkdir(parents=True)
    with open(gguf, "rb") as fh:
        for n, chunk in enumerate(iter(lambda: fh.read(PART_BYTES * 4), b"")):
            (parts / f"part{n:02d}").write_bytes(chunk)
    (parts / "sha256").write_text(digest + "\n")
    whl = work / "whl"
    whl.mkdir(exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp", "--platform", "manylinux_2_17_x86_64",
                    "--platform", "manylinux2014_x86_64", "-d", str(whl), *WHEELS], check=True)
    print(json.dumps({"counts": counts, "model_parts": len(list(parts.glob("part*"))), "sha256": digest}, indent=1))


# --------------------------------------------------------------------------- run (on the GPU machine)

def _read_jsonl(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def assemble_model(work: Path) -> None:
    """Join the GGUF parts into the memq cache once, checking the sha256 ``prepare`` recorded."""
    from memq.llm import cache_root

    target = cache_root() / "gguf" / GGUF_NAME
    stamp = target.with_suffix(".sha256")
    want = (work / "model" / "sha256").read_text().strip()
    if target.exists() and stamp.exists() and stamp.read_text().strip() == want:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    with open(target, "wb") as out:
        for part in sorted((work / "model").glob("part*")):
            chunk = part.read_bytes()
            h.update(chunk)
            out.write(chunk)
    if h.hexdigest() != want:
        target.unlink()
        raise SystemExit(f"assembled GGUF has sha256 {h.hexdigest()[:12]}..., expected {want[:12]}...")
    stamp.write_text(want + "\n")


def _plans(work: Path, data: str):
    from memq.plan.data import from_json

    files = {"webqsp": ["webqsp-train"], "cwq": ["cwq-train"], "webqsp+cwq": ["webqsp-train", "cwq-train-no-webqtest"]}
    return [from_json(r) for name in files[data] for r in _read_jsonl(work / "data" / f"{name}.jsonl.gz")]


def _direct_examples(work: Path, data: str):
    from memq.evaluate.direct import DirectExample

    return [DirectExample(r["id"], r["question"], r["dataset"], r["parse_id"], tuple(map(tuple, r["entities"])),
                          r["text"]) for r in _read_jsonl(work / "data" / f"{data}-direct-train.jsonl.gz")]


def train_job(work: Path, name: str, stop_at: float) -> bool:
    """Train CONFIGS[name] (resuming), then score it on dev; True when the job is complete."""
    from memq.plan.finetune import TrainConfig, train, update_manifest

    kind, data, fields = CONFIGS[name]
    out = work / "runs" / name
    if (out / "dev_metrics.json").exists():
        return True
    cfg = TrainConfig(**{"checkpoint_every": 100, **fields, "device": "cuda", "precision": PRECISION[0], **DRY.get("cfg", {})})
    info = {"datasets": data.split("+"), "split": "train (memq.plan.data.split_of, dev held out)",
            "excluded_webqsp_test_ids": data == "webqsp+cwq", "limit": None,
            "trained_by": "benchmarks/train_gpu.py " + name}
    resume = (out / "checkpoint" / "state.json").exists()
    if not (out / "manifest.json").exists():
        t0 = time.time()
        if kind == "direct":
            from memq.evaluate.direct import train_direct

            examples = _direct_examples(work, data)
            result = train_direct(examples, out, cfg, data_info={**info, "same_questions_as": "memq planner train"},
                                  resume=resume, stop_at=stop_at)
        else:
            result = train(_plans(work, data), out, cfg, data_info=info, resume=resume, stop_at=stop_at)
        print(f"{name}: {result.steps} steps, {time.time() - t0:.0f} s wall, finished={result.finished}", flush=True)
        if not result.finished:
            return False
    if time.time() >= stop_at:
        return False
    metrics = dev_eval(work, name, out, kind, data)
    update_manifest(out, dev_metrics=metrics)
    (out / "dev_metrics.json").write_text(json.dumps(metrics, indent=1))
    shutil.rmtree(out / "checkpoint", ignore_errors=True)
    return True


def _planner(out: Path, kind: str, batch: int):
    if kind == "direct":
        from memq.evaluate.direct import DirectSparqlModel

        return DirectSparqlModel(out, device=DRY.get("device", "cuda"), batch_size=batch)
    from memq.plan.planner import FineTunedPlanner

    return FineTunedPlanner(out, device=DRY.get("device", "cuda"), batch_size=batch)


def dev_eval(work: Path, name: str, out: Path, kind: str, data: str) -> dict:
    """Plan-only metrics on dev, and the raw outputs in ``memq evaluate --plans`` form (dev_plans.jsonl.gz)."""
    from memq.plan.data import from_json
    from memq.plan.evaluate import evaluate

    ds = data.split("+")[0]
    golds = [from_json(r) for r in _read_jsonl(work / "data" / f"{ds}-dev.jsonl.gz")]
    if ds == "cwq":
        golds = golds[:DEV_LIMIT]
    golds = golds[:DRY.get("limit")]
    model = _planner(out, kind, 128)
    t0 = time.time()
    if kind == "direct":
        raws = model.generate([(g.question, list(g.entities)) for g in golds])
        metrics = {"questions": len(golds)}
        records = [{"id": g.question_id, "planner": "finetuned", "ablation": {"raw": r, "generate_s": 0.0}}
                   for g, r in zip(golds, raws, strict=True)]
    else:
        metrics, scores = evaluate(model, golds)
        records = [{"id": s.question_id, "planner": "finetuned", "plan_raw": s.predicted, "exact": s.exact}
                   for s in scores]
    seconds = time.time() - t0
    for r in records:
        r["plan_s" if kind != "direct" else "ablation_s"] = round(seconds / len(records), 4)
    _write_jsonl(out / "dev_plans.jsonl.gz", records)
    metrics.update({"split": f"{ds}/dev" + (f" (first {len(golds)})" if ds == "cwq" else " (all)"),
                    "seconds": round(seconds, 1), "device": _device()})
    print(f"{name}: dev {json.dumps(metrics)}", flush=True)
    return metrics


def best_of(work: Path, dataset: str) -> str | None:
    """The planner configuration of ``dataset`` with the best dev exact-plan match so far (ties: listed first)."""
    scored = []
    for name, (kind, data, _) in CONFIGS.items():
        path = work / "runs" / name / "dev_metrics.json"
        if kind == "planner" and data.split("+")[0] == dataset and path.exists():
            scored.append((-json.loads(path.read_text())["exact_match"], list(CONFIGS).index(name), name))
    return min(scored)[2] if scored else None


def test_job(work: Path, spec: str) -> bool:
    """``NAME[+ABLATION]``: plans for every test question, with the ablation's outputs beside them.

    ``best-webqsp`` (or ``best-cwq``) names the configuration with the best dev exact-plan match.
    """
    name, _, ablation = spec.partition("+")
    if name.startswith("best-"):
        name = best_of(work, name.removeprefix("best-")) or name
        print(f"test: the best on dev is {name}", flush=True)
        spec = f"{name}+{ablation}" if ablation else name
    kind, data, _ = CONFIGS[name]
    ds = data.split("+")[0]
    path = work / "runs" / f"test-{spec}.jsonl.gz"
    if path.exists():
        return True
    questions = _read_jsonl(work / "data" / f"{ds}-test.jsonl.gz")[:DRY.get("limit")]
    items = [(q["question"], dict(map(tuple, q["entities"]))) for q in questions]
    planner = _planner(work / "runs" / name, kind, 128)
    t0 = time.time()
    raws = planner.raw_many(items)
    plan_s = (time.time() - t0) / len(items)
    records = [{"id": q["id"], "planner": "finetuned", "plan_raw": r, "plan_s": round(plan_s, 4)}
               for q, r in zip(questions, raws, strict=True)]
    if ablation:
        model = _planner(work / "runs" / ablation, "direct", 128)
        t0 = time.time()
        outs = model.generate(items)
        gen_s = (time.time() - t0) / len(items)
        for rec, raw in zip(records, outs, strict=True):
            rec["ablation"] = {"raw": raw, "generate_s": round(gen_s, 4)}
    _write_jsonl(path, records)
    print(f"test {spec}: {len(records)} questions, {plan_s:.3f} s/question planning"
          + (f", {gen_s:.3f} s/question direct SPARQL" if ablation else ""), flush=True)
    return True


def _device() -> str:
    import torch

    return f"cuda: {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else "cpu"


def send_back(work: Path, out: Path) -> None:
    """Pack what is new under WORK/runs (no checkpoints, no full-model weights) into OUT, in parts."""
    sent_path = work / "sent.json"
    sent = set(json.loads(sent_path.read_text())) if sent_path.exists() else set()
    best = {best_of(work, ds) for ds in ("webqsp", "cwq")}
    files = []
    for f in sorted((work / "runs").rglob("*")):
        rel = str(f.relative_to(work))
        if not f.is_file() or rel in sent or "/checkpoint" in rel or f.name.startswith("model") or f.name == "tokenizer.json":
            continue
        if f.name == "adapter_model.safetensors" and f.stat().st_size > 20 * 2**20 and f.parent.name not in best:
            continue  # a large adapter comes back only if it is the best on dev
        files.append((rel, f))
    files.sort(key=lambda x: x[1].stat().st_size)  # small results first
    buf = io.BytesIO()
    size = 0
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for rel, f in files:
            if size + f.stat().st_size > OUT_BYTES:
                continue  # the next run sends it
            tar.add(f, arcname=rel)
            sent.add(rel)
            size += f.stat().st_size
    blob = buf.getvalue()
    stamp = time.strftime("%H%M%S")
    for n in range(0, len(blob), PART_BYTES):
        (out / f"back-{stamp}.tar.{n // PART_BYTES:02d}").write_bytes(blob[n:n + PART_BYTES])
    sent_path.write_text(json.dumps(sorted(sent)))
    print(f"sent {len(sent)} files so far ({size / 2**20:.1f} MiB now)", flush=True)


def run(work: Path, out: Path, jobs: list[str], deadline: float) -> None:
    start = time.time()
    stop_at = start + deadline
    os.environ.setdefault("MEMQ_CACHE", str(work / "cache"))
    assemble_model(work)
    for job in jobs:
        kind, _, spec = job.partition(":")
        if time.time() >= stop_at:
            print(f"deadline: {job} not started", flush=True)
            break
        t0 = time.time()
        done = train_job(work, spec, stop_at) if kind == "train" else test_job(work, spec)
        print(f"[{time.time() - start:5.0f} s] {job}: {'done' if done else 'stopped'} ({time.time() - t0:.0f} s)",
              flush=True)
        if not done:
            break
    send_back(work, out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--work", default=".gpu")
    r = sub.add_parser("run")
    r.add_argument("--work", default=".gpu")
    r.add_argument("--out", required=True)
    r.add_argument("--deadline", type=float, default=540, help="seconds before no new work starts")
    r.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    r.add_argument("--dry-run", action="store_true", help="CPU, tiny model, 2 steps and 4 questions a job")
    r.add_argument("jobs", nargs="*")
    args = ap.parse_args()
    if args.command == "run":
        PRECISION[0] = args.precision
    if getattr(args, "dry_run", False):
        DRY.update(device="cpu", limit=4, cfg={"device": "cpu", "precision": "fp32", "base": "smollm2",
                                               "max_steps": 2, "batch_size": 2})
    if args.command == "prepare":
        prepare(Path(args.work))
    else:
        run(Path(args.work), Path(args.out), args.jobs, args.deadline)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
