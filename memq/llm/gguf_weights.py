"""The base weights llama.cpp runs the planner on: the shipped GGUF dequantised to f16 (default), bf16, Q8_0, or as
shipped.

The bundled Qwen2.5-Coder-0.5B GGUF is quantised. transformers dequantises it to float32 and multiplies in
float32; llama.cpp multiplies quantised weights by activations it rounds to 8 bits as well, so the two backends'
log-probabilities differ by a few hundredths of a nat and greedy plans part where the model is unsure (185 of
200 WebQSP dev plans identical). On f16 weights llama.cpp keeps activations in f16 and the plans agree
(``benchmarks/backend_parity.py``; docs/backends.md), at the price of a larger file and slower tokens.

``$MEMQ_LLAMA_WEIGHTS`` chooses (unset: ``memq.plan.planner.default_weights``, bf16 for GrailQA's and WebQSP's
planners where the CPU multiplies it, else f16): ``f16``, ``bf16`` (the shipped weights dequantised to bfloat16:
on a CPU with AVX512-BF16 a fifth to a third faster a pass of 8 tokens or more, where llama.cpp rounds the
activations to bfloat16 too, so not quite the same plans, docs/backends.md), ``q8_0`` (the f16 weights quantised
to 8 bits: about a quarter faster a token on the CPU, and not the same plans) or ``shipped``. The file is written
once by llama.cpp's own quantizer (``llama_model_quantize`` with ``allow_requantize``: every tensor dequantised,
then stored as f16 or bf16, or Q8_0 from the f16 file) into ``$MEMQ_CACHE/gguf/<name>-<kind>-<sha8>.gguf``,
with a manifest holding the source's and its own sha256; a file that does not match its manifest is rebuilt (a
warning says why), never used. For ``f16``, a GGUF whose weights are already f32 or f16 is used as it is.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from .base import LLMError, cache_root, memo_sha256

logger = logging.getLogger(__name__)

WEIGHTS = ("f16", "shipped", "q8_0", "bf16")
_PARAMS_LOCK = threading.Lock()
DEFAULT_WEIGHTS = "f16"


def weights_from_env(preferred: str | None = None) -> str:
    """``$MEMQ_LLAMA_WEIGHTS``; unset, ``preferred`` (a planner's own choice, ``memq.plan.planner.default_weights``)
    or else ``f16``. A value not in :data:`WEIGHTS` is refused by name."""
    value = os.environ.get("MEMQ_LLAMA_WEIGHTS", "").strip() or preferred or DEFAULT_WEIGHTS
    if value not in WEIGHTS:
        raise LLMError(f"MEMQ_LLAMA_WEIGHTS must be one of {', '.join(WEIGHTS)}, got {value!r}")
    return value


def native_bf16() -> bool:
    """Whether this build of llama.cpp multiplies bf16 weights with the CPU's own bf16 instructions
    (``AVX512_BF16 = 1`` in ``llama_print_system_info``); elsewhere bf16 weights are widened in software and may
    plan slower than f16. False when llama.cpp is not importable."""
    try:
        import llama_cpp
    except ImportError:
        return False
    return "AVX512_BF16 = 1" in llama_cpp.llama_print_system_info().decode(errors="replace")


def quantised_types(gguf: Path) -> list[str]:
    """The quantised tensor types in ``gguf`` (``["Q5_0", "Q8_0", ...]``; empty when all are f32, f16 or bf16)."""
    import gguf as gguf_lib

    plain = {gguf_lib.GGMLQuantizationType.F32, gguf_lib.GGMLQuantizationType.F16, gguf_lib.GGMLQuantizationType.BF16}
    return sorted({t.tensor_type.name for t in gguf_lib.GGUFReader(str(gguf)).tensors if t.tensor_type not in plain})


@contextmanager
def no_repacking(on: bool = True):
    """While a model loads (when ``on``): llama.cpp's CPU weight repacking ("extra buffer types") off. On a CPU
    with AMX, the repacked quantised weights crashed the process (a segmentation fault in the first quantised matrix
    product) on the machine this was found on, where f16 weights ran; without repacking, quantised weights run on
    the CPU's vector kernels. llama-cpp-python's ``Llama`` takes no such argument, so its default model parameters
    are wrapped for the call."""
    if not on:
        yield
        return
    import llama_cpp.llama as api

    default = api.llama_cpp.llama_model_default_params

    def params():
        p = default()
        p.use_extra_bufts = False
        return p

    with _PARAMS_LOCK:
        api.llama_cpp.llama_model_default_params = params
        try:
            yield
        finally:
            api.llama_cpp.llama_model_default_params = default


def f16_gguf(gguf: Path, digest: str) -> tuple[Path, str, float]:
    """``(path, sha256, seconds spent building)`` of ``gguf`` (sha256 ``digest``) with f16 weights; the file
    itself (0 s) when its weights are not quantised."""
    return _requantised(gguf, digest, "f16")


def bf16_gguf(gguf: Path, digest: str) -> tuple[Path, str, float]:
    """``(path, sha256, seconds spent building)`` of ``gguf`` with its weights in bf16, dequantised from the shipped
    file itself (one rounding, as for f16); also from a GGUF whose weights are not quantised."""
    return _requantised(gguf, digest, "bf16", always=True)


def q8_gguf(gguf: Path, digest: str) -> tuple[Path, str, float]:
    """``(path, sha256, seconds spent building)`` of ``gguf`` with its weights in Q8_0, quantised from the f16 file
    (:func:`f16_gguf`), so the shipped file's coarser types are not kept."""
    f16, f16_digest, seconds = f16_gguf(gguf, digest)
    path, sha, more = _requantised(f16, f16_digest, "q8_0", name=gguf.stem, always=True)
    return path, sha, seconds + more


def cached(target: Path, want: dict) -> tuple[dict | None, str | None]:
    """``(manifest, reason)`` of the cached file ``target`` and its manifest (``target`` with ``.json``): ``reason``
    is None when every field of ``want`` is the manifest's and the file's sha256 is the manifest's ``sha256``, else
    says why the file cannot be used (``manifest`` is None when there is none to read)."""
    try:
        manifest = json.loads(target.with_suffix(".json").read_text())
    except (OSError, ValueError):
        return None, "not built yet"
    reason = next((f"manifest {k} differs" for k, v in want.items() if manifest.get(k) != v), None)
    if reason is None and (not target.is_file() or memo_sha256(target) != manifest.get("sha256")):
        reason = "the file does not match its manifest's sha256"
    return manifest, reason


def build_cached(target: Path, want: dict, build, what: str, reason: str) -> tuple[Path, str, float]:
    """``(target, sha256, seconds spent)``: ``build(tmp)`` writes the file to a temporary name beside ``target`` and
    returns more manifest fields; the file is then moved into place and its manifest (``want``, those fields and its
    sha256) written. A warning says what is written (``what``) and why (``reason``); a build that fails leaves no
    file behind."""
    logger.warning("writing %s in %s (%s; once)", what, target.parent, reason)
    start = time.perf_counter()
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        more = build(tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    sha = memo_sha256(target)
    target.with_suffix(".json").write_text(json.dumps({**want, **more, "sha256": sha}, indent=2) + "\n")
    return target, sha, time.perf_counter() - start


def _requantised(gguf: Path, digest: str, kind: str, *, name: str | None = None,
                 always: bool = False) -> tuple[Path, str, float]:
    """``gguf`` (sha256 ``digest``) written once by llama.cpp's quantizer with ``kind`` weights (``f16``: every
    tensor dequantised first; ``bf16`` likewise; ``q8_0``), cached with a manifest and verified; with ``always``
    false, a file whose weights are not quantised is used as it is."""
    target = cache_root() / "gguf" / f"{name or gguf.stem}-{kind}-{digest[:8]}.gguf"
    want = {"source": gguf.name, "source_sha256": digest}
    manifest, reason = cached(target, {"source_sha256": digest})
    if reason is None:
        return target, manifest["sha256"], 0.0
    if manifest is not None and manifest.get("source_sha256") == digest and manifest.get("unquantised_source"):
        return gguf, digest, 0.0
    kinds = quantised_types(gguf)
    if not kinds and not always:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.with_suffix(".json").write_text(json.dumps({**want, "unquantised_source": True}, indent=2) + "\n")
        return gguf, digest, 0.0
    import llama_cpp

    ftype = {"f16": llama_cpp.LLAMA_FTYPE_MOSTLY_F16, "bf16": llama_cpp.LLAMA_FTYPE_MOSTLY_BF16,
             "q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0}[kind]
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.allow_requantize = True
    params.nthread = max(1, (os.cpu_count() or 1) - 1)

    def build(tmp: Path) -> dict:
        rc = llama_cpp.llama_model_quantize(str(gguf).encode(), str(tmp).encode(), params)
        if rc != 0 or not tmp.is_file():
            raise LLMError(f"llama.cpp could not write {gguf.name} with {kind} weights (llama_model_quantize "
                           f"returned {rc}); set MEMQ_LLAMA_WEIGHTS=shipped to run the shipped weights")
        return {"source_quantised": kinds, "weights": kind}

    return build_cached(target, want, build, f"{gguf.name} with {kind} weights for llama.cpp (about 10 s)", reason)
