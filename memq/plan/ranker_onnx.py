"""The statement ranker on onnxruntime: torch's logits without importing torch, or int8 weights at twice the speed.

The grounded planner scores up to ``rank_pool`` (question, candidate) pairs a step with the ranker
(:mod:`memq.plan.ranker`). On torch that is about 4 ms a pair on this project's 2-core CPU, as much time as the
planner's model spends, and importing torch and transformers costs a fresh ``memq ask`` about 4 s. So on the CPU the
ranker runs as an ONNX graph, fed by ``tokenizers`` from the base encoder's own ``tokenizer.json`` (pairs cut as
transformers cuts them: the query first, at the ranker's ``max_length``):

* ``onnx``: the float32 graph, checked to give torch's logits within :data:`TOLERANCE` on sample pairs;
* ``onnx-int8``: the same graph with its matrix weights quantised to int8 per output channel
  (onnxruntime's ``quantize_dynamic``). About twice as fast again, but its logits move (mean 0.2 on WebQSP dev's
  pairs, recall@1 0.832 -> 0.825), and with the pairs a run holds (:data:`BATCH`); the committed ranker runs on it
  for WebQSP alone, where it tied float32 on dev (``DATASET_RUNTIMES`` in :mod:`memq.plan.ranker`; docs/planner.md).

Each graph is exported once per ranker and kept in ``$MEMQ_CACHE/onnx/ranker-<key>-<runtime>-f<FORMAT>/`` with a
``manifest.json`` (the ranker's and the graph's sha256, the largest difference from torch on the sample pairs);
every load checks the graph against it, and a graph that does not match is rebuilt (a warning says why), never
used.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from memq.errors import MemQError
from memq.files import atomic_path, sha256_file
from memq.memory.onnx_minilm import export_bert, open_graph

__all__ = ["ONNX_RUNTIMES", "QUERY_KEEP", "OnnxRanker", "cached_graph", "fit_candidates", "score_batches"]

logger = logging.getLogger(__name__)

FORMAT = 1
TOLERANCE = 1e-4  # float32 graph against torch, in logits
ONNX_RUNTIMES = ("onnx", "onnx-int8")
SAMPLES = [("what does jamaican people speak?", "the languages spoken of the country Jamaica"),
           ("who plays ken barlow in coronation street? | Find the actor of the performance with character Ken "
            "Barlow, assign it to ?x.", "the series of the regular tv appearance ?x"),
           ("where was george washington carver from?", "the place of birth of the person George Washington Carver"),
           ("what teams has lionel messi played for? " * 12, "the team of the sports team roster ?y")]


def graph_key(manifest: dict) -> str:
    """What a ranker's graph is keyed by: its saved weights' sha256, its base's and its max_length."""
    parts = [FORMAT, manifest.get("files", {}).get("ranker.safetensors"), manifest.get("base", {}).get("sha256"),
             manifest.get("max_length")]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def cached_graph(path: Path, manifest: dict, runtime: str, torch_ranker: Callable[[], object],
                 tokenizer_dir: Path) -> Path:
    """The graph for the ranker in ``path`` (whose checked ``manifest`` is given) on ``runtime``,
    exported first when missing or stale from ``torch_ranker()`` (a torch :class:`~memq.plan.ranker.StatementRanker`
    of the same directory); ``tokenizer_dir`` holds its base encoder's tokenizer."""
    from memq.llm import cache_root

    if runtime not in ONNX_RUNTIMES:
        raise MemQError(f"unknown ranker runtime {runtime!r}; expected one of {', '.join(ONNX_RUNTIMES)}")
    target = cache_root() / "onnx" / f"ranker-{graph_key(manifest)}-{runtime}-f{FORMAT}"
    reason = _stale(target)
    if reason is None:
        return target / "model.onnx"
    logger.warning("exporting the statement ranker %s to ONNX (%s) in %s (%s; once, a few seconds)", path.name,
                   runtime, target, reason)
    start = time.perf_counter()
    ranker = torch_ranker()
    with atomic_path(target) as tmp:
        tmp.mkdir(parents=True)
        graph = tmp / "model.onnx"
        export_bert(ranker.model.eval(), graph, "logits", "the statement ranker")
        if runtime == "onnx-int8":
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quiet = logging.getLogger().level
            logging.getLogger().setLevel(logging.ERROR)  # its advice to pre-process first, on the root logger
            try:
                quantize_dynamic(str(graph), str(tmp / "int8.onnx"), weight_type=QuantType.QInt8, per_channel=True)
            finally:
                logging.getLogger().setLevel(quiet)
            os.replace(tmp / "int8.onnx", graph)
        diff = _difference(OnnxRanker(graph, tokenizer_dir, ranker.max_length), ranker)
        if runtime == "onnx" and not diff < TOLERANCE:
            raise MemQError(f"the ONNX export of the ranker {path} differs from torch by {diff:.2e} logits "
                            f"(tolerance {TOLERANCE}); not kept")
        kept = {"format": FORMAT, "runtime": runtime, "ranker": str(path.name), "key": graph_key(manifest),
                "onnx_sha256": sha256_file(graph), "max_abs_diff_vs_torch": round(diff, 6),
                "export_s": round(time.perf_counter() - start, 2)}
        (tmp / "manifest.json").write_text(json.dumps(kept, indent=2) + "\n")
    return target / "model.onnx"


def _stale(target: Path) -> str | None:
    """Why the graph cached at ``target`` cannot be used (None when it can)."""
    try:
        manifest = json.loads((target / "manifest.json").read_text())
    except (OSError, ValueError):
        return "not built yet"
    if manifest.get("format") != FORMAT:
        return "built by another memq"
    if not (target / "model.onnx").is_file() or sha256_file(target / "model.onnx") != manifest.get("onnx_sha256"):
        return "model.onnx does not match its manifest's sha256"
    return None


def _difference(onnx_ranker: OnnxRanker, ranker) -> float:
    """The largest difference in logits between the two rankers on :data:`SAMPLES`."""
    return max(float(np.abs(onnx_ranker.score(q, [c, "?x"]) - ranker.score(q, [c, "?x"])).max()) for q, c in SAMPLES)


# pairs a run. On the 2-core Intel Xeon, float32 runs of 16 took 8.2 s where runs of 64 took 12.0 s over the 1,271
# pairs the 4 slowest test questions rank (about 55 tokens each; a run of 64 outgrows the caches), with the same
# logits bit for bit. int8 logits move with the pairs a run holds (one scale quantises all their activations): its
# runs of 16 were as much faster, but changed 6 held-out WebQSP dev plans (0 up, 4 down), so int8 keeps runs of 64
BATCH = {"onnx": 16, "onnx-int8": 64}
QUERY_KEEP = 16  # tokens of the query a pair keeps however long its candidate (see fit_candidates)


def fit_candidates(candidates: Sequence[str], encode, decode, max_length: int) -> list[str]:
    """``candidates`` with each one too long to leave :data:`QUERY_KEEP` query tokens in a pair of ``max_length``
    cut to fit (the text of its first tokens); the others as they are. Pairs are cut from the query first
    ("only_first"), which fails outright when a candidate alone is longer than the pair (a GrailQA description with
    many long names). ``encode``: texts -> their token ids without special tokens; ``decode``: ids -> text."""
    limit = max_length - 3 - QUERY_KEEP  # [CLS] query [SEP] candidate [SEP]
    ids = encode(list(candidates))
    return [decode(t[:limit]) if len(t) > limit else c for c, t in zip(candidates, ids, strict=True)]


class OnnxRanker:
    """A ranker's graph in an onnxruntime session; :meth:`score` is :meth:`memq.plan.ranker.StatementRanker.score`."""

    def __init__(self, graph: Path, tokenizer_dir: Path, max_length: int, *, threads: int | None = None,
                 path: Path | None = None, manifest: dict | None = None, runtime: str = "onnx",
                 batch_size: int | None = None) -> None:
        self.session, self.tokenizer = open_graph(graph, tokenizer_dir, max_length, threads, "only_first")
        self.max_length, self.batch_size = max_length, batch_size or BATCH[runtime]
        self.path, self.manifest, self.runtime = path, manifest or {}, runtime
        self.pairs_scored = 0
        self.seconds = 0.0

    @property
    def name(self) -> str:
        return self.path.name if self.path else "ranker"

    def encode(self, query: str, candidates: Sequence[str]) -> dict[str, np.ndarray]:
        """The model's inputs for (``query``, candidate) pairs, padded to the longest."""
        def ids(texts: list[str]) -> list[list[int]]:  # unpadded (the tokenizer pads to the longest)
            return [e.ids[:sum(e.attention_mask)] for e in self.tokenizer.encode_batch(texts, add_special_tokens=False)]

        fitted = fit_candidates(candidates, ids, self.tokenizer.decode, self.max_length)
        enc = self.tokenizer.encode_batch([(query, c) for c in fitted])
        return {"input_ids": np.asarray([e.ids for e in enc], dtype=np.int64),
                "attention_mask": np.asarray([e.attention_mask for e in enc], dtype=np.int64),
                "token_type_ids": np.asarray([e.type_ids for e in enc], dtype=np.int64)}

    def score(self, query: str, candidates: Sequence[str]) -> np.ndarray:
        """One logit per candidate for ``query`` (higher: more likely the step's statement)."""
        return score_batches(self, candidates, lambda batch: self.session.run(None, self.encode(query, batch))[0][:, 0])


def score_batches(ranker, candidates: Sequence[str], run: Callable[[list[str]], np.ndarray]) -> np.ndarray:
    """``run`` over ``candidates`` in batches of ``ranker.batch_size``, longest first (less padding), back in their
    order; counts the pairs and the seconds on ``ranker`` (``pairs_scored``, ``seconds``)."""
    if not candidates:
        return np.zeros(0, dtype=np.float32)
    t0 = time.perf_counter()
    out = np.empty(len(candidates), dtype=np.float32)
    order = np.argsort([-len(c) for c in candidates], kind="stable")
    for i in range(0, len(candidates), ranker.batch_size):
        rows = order[i:i + ranker.batch_size]
        out[rows] = run([candidates[j] for j in rows])
    ranker.pairs_scored += len(candidates)
    ranker.seconds += time.perf_counter() - t0
    return out
