"""all-MiniLM-L6-v2 on onnxruntime: the same vectors as sentence-transformers without importing torch.

Importing torch and transformers costs a fresh process about 4 s, more than the rest of ``memq ask`` on the
llama.cpp backend. So on the CPU the model runs as an ONNX graph (BERT -> mean pooling over the attention mask
-> L2 normalisation, the three modules of the model's ``modules.json``), tokenized by ``tokenizers`` from the
model's own ``tokenizer.json``.

The graph is exported once from the installed weights by ``torch.onnx`` and cached in
``$MEMQ_CACHE/onnx/all-MiniLM-L6-v2-<key>/`` (key: the sha256 of ``model.safetensors`` and a format number).
The export is checked before it is kept: its vectors must match torch's to 1e-5 on sample texts. A
``manifest.json`` records the source's and the graph's sha256, and every load checks both: a cache that does not
match is rebuilt (a warning says why), never used.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from memq.errors import MemoryBankError
from memq.files import sha256_file

logger = logging.getLogger(__name__)

FORMAT = 1
OPSET = 17
TOLERANCE = 1e-5
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_SAMPLES = ["Find the languages spoken of the country Jamaica, assign it to ?x.", "Finally the answer is ?x.",
            "?entity2 is the spouse of the person ?entity1", "", "Make sure ?date is 2008 or later. " * 40]


def unavailable() -> str | None:
    """Why the ONNX runtime cannot run here, or None when onnxruntime and tokenizers import."""
    try:
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError as exc:
        return f"onnxruntime is not importable ({exc}); pip install onnxruntime"
    return None


def _source_digest(path: Path) -> str:
    from memq.llm import memo_sha256

    return memo_sha256(path / "model.safetensors")


def cached_graph(path: Path, torch_model: Callable[[], Any]) -> Path:
    """The verified ONNX graph for the MiniLM directory ``path``, exported first when missing or stale from
    ``torch_model()`` (memq.memory.embed's transformers model: ``.model`` the BERT, ``.encode`` the reference)."""
    from memq.llm import cache_root

    source = _source_digest(path)
    target = cache_root() / "onnx" / f"all-MiniLM-L6-v2-{source[:16]}-f{FORMAT}"
    reason = _stale(target, source)
    if reason is None:
        return target / "model.onnx"
    logger.warning("exporting all-MiniLM-L6-v2 to ONNX in %s (%s; once, a few seconds)", target, reason)
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        start = time.perf_counter()
        diff = _export(path, torch_model(), tmp / "model.onnx")
        manifest = {"model": "all-MiniLM-L6-v2", "format": FORMAT, "opset": OPSET, "source_sha256": source,
                    "onnx_sha256": sha256_file(tmp / "model.onnx"), "max_abs_diff_vs_torch": diff,
                    "export_s": round(time.perf_counter() - start, 2)}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target / "model.onnx"


def _stale(target: Path, source: str) -> str | None:
    """Why the cache at ``target`` cannot be used (None when it can)."""
    try:
        manifest = json.loads((target / "manifest.json").read_text())
    except (OSError, ValueError):
        return "not built yet"
    if manifest.get("source_sha256") != source or manifest.get("format") != FORMAT:
        return "built from other weights or by another memq"
    if not (target / "model.onnx").is_file() or sha256_file(target / "model.onnx") != manifest.get("onnx_sha256"):
        return "model.onnx does not match its manifest's sha256"
    return None


def _export(path: Path, bert, out: Path) -> float:
    """Export ``bert``'s BERT + mean pooling + normalisation to ``out``; the largest difference from its own
    vectors on sample texts."""
    import torch

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert.model

        def forward(self, input_ids, attention_mask, token_type_ids):
            tokens = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            mean = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2, dim=1)

    export_bert(Pooled().eval(), out, "sentence_embedding", "all-MiniLM-L6-v2")
    diff = float(np.abs(OnnxMiniLM(out, path).encode(_SAMPLES, 8) - bert.encode(_SAMPLES, 8)).max())
    if not diff < TOLERANCE:
        raise MemoryBankError(f"the ONNX export of all-MiniLM-L6-v2 differs from torch by {diff:.2e} "
                              f"(tolerance {TOLERANCE}); not kept")
    return diff


def export_bert(module, out: Path, output: str, what: str) -> None:
    """Export ``module`` (called with a BERT's three inputs, batch and token axes dynamic) to the ONNX graph ``out``
    with the one output ``output``; raises MemoryBankError naming ``what`` when torch cannot."""
    import torch

    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, 5:] = 0  # a padded row, so that no shortcut for an all-ones mask is traced into the graph
    example = (torch.full((2, 8), 1000, dtype=torch.long), mask, torch.zeros(2, 8, dtype=torch.long))
    axes = {n: {0: "batch", 1: "tokens"} for n in INPUTS} | {output: {0: "batch"}}
    try:
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on shape-dependent Python branches
            torch.onnx.export(module, example, str(out), input_names=list(INPUTS), output_names=[output],
                              dynamic_axes=axes, opset_version=OPSET, dynamo=False)
    except Exception as exc:  # torch.onnx raises several types (missing onnx package, unsupported op)
        raise MemoryBankError(f"exporting {what} to ONNX failed: {exc}") from exc


def open_graph(graph: Path, tokenizer_dir: Path, max_length: int, threads: int | None = None,
               truncation: str = "longest_first"):
    """``(onnxruntime session of graph, the BERT tokenizer in tokenizer_dir)``, the tokenizer padding to the longest
    and cutting at ``max_length`` (``truncation``: the ``tokenizers`` strategy for pairs)."""
    import onnxruntime
    from tokenizers import Tokenizer

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    # idle threads sleep at once instead of spinning after a run: a spinning thread holds a core that llama.cpp's
    # next forward pass wants (4 tokens on 2 threads took 126 ms right after a ranker run, 77 ms after a pause; 72
    # and 72 ms without spinning), and the runs themselves take as long (160 ranker pairs: 1.07 s spinning, 0.94 s)
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if threads:
        options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    pad = json.loads((tokenizer_dir / "tokenizer_config.json").read_text()).get("pad_token", "[PAD]")
    pad_id = tokenizer.token_to_id(pad)
    if pad_id is None:
        raise MemoryBankError(f"{tokenizer_dir / 'tokenizer.json'} has no id for the pad token {pad!r}")
    tokenizer.enable_padding(pad_id=pad_id, pad_token=pad)
    tokenizer.enable_truncation(max_length=max_length, strategy=truncation)
    return session, tokenizer


class OnnxMiniLM:
    """The exported graph in an onnxruntime session, fed by the model's ``tokenizers`` tokenizer. Texts are
    batched as sentence-transformers batches them (longest first, padded per batch, cut at ``max_seq_length``)."""

    def __init__(self, graph: Path, path: Path, threads: int | None = None) -> None:
        self.max_length = int(json.loads((path / "sentence_bert_config.json").read_text())["max_seq_length"])
        self.session, self.tokenizer = open_graph(graph, path, self.max_length, threads)
        self.dim = int(self.session.get_outputs()[0].shape[-1])

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i in range(0, len(texts), batch_size):
            rows = order[i:i + batch_size]
            enc = self.tokenizer.encode_batch([texts[j] for j in rows])
            feed = {"input_ids": [e.ids for e in enc], "attention_mask": [e.attention_mask for e in enc],
                    "token_type_ids": [e.type_ids for e in enc]}
            out[rows] = self.session.run(None, {k: np.asarray(v, dtype=np.int64) for k, v in feed.items()})[0]
        return out
