"""A peft LoRA adapter as a GGUF LoRA adapter that llama.cpp loads beside the base GGUF, cached and verified.

    gguf = adapter_gguf("memory_bank/webqsp/planner", base_gguf, base_sha256)
    gguf.path      # $MEMQ_CACHE/gguf/adapters/planner-<key>/adapter.gguf
    gguf.built     # True when this call (re)built it, with .seconds and .reason

The base weights stay exactly as the base GGUF holds them (the same quantised
tensors transformers dequantises), and llama.cpp adds ``scale * B(A x)`` at
every targeted matrix, as peft does before merging. Written as llama.cpp's own
``convert_lora_to_gguf.py`` writes one (``general.type = adapter``,
``adapter.type = lora``, tensors ``<base tensor>.lora_a`` / ``.lora_b``, A as
``(r, in)`` and B as ``(out, r)`` rows), with two choices of memq's own:

* peft's scaling (``lora_alpha / r``, or ``/ sqrt(r)`` with rsLoRA) is folded
  into ``lora_b`` and ``adapter.lora.alpha`` is 0, which llama.cpp reads as
  scale 1; so a per-module rank needs no special case;
* for the ``llama`` architecture the GGUF base holds q/k rows permuted for its
  RoPE layout, so the rows of q/k ``lora_b`` are permuted the same way
  (``qwen2`` keeps the transformers order).

The cache directory is keyed by the base GGUF's sha256, the sha256 of each
adapter file and the format version, and holds ``manifest.json`` with those
and the sha256 of ``adapter.gguf``. A manifest that does not match, or an
``adapter.gguf`` whose hash does not, is rebuilt (logged), never used.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..files import sha256_file
from .base import LLMError, cache_root, memo_sha256
from .gguf_weights import build_cached, cached

logger = logging.getLogger(__name__)

FORMAT = 1
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")
PERMUTED_QK = {"qwen2": False, "llama": True}  # architecture -> q/k rows permuted in the GGUF base


@dataclass(frozen=True)
class AdapterGGUF:
    path: Path
    built: bool
    seconds: float = 0.0
    reason: str | None = None  # why it was (re)built


def adapter_hashes(adapter: str | Path) -> dict[str, str]:
    """sha256 of the adapter's files; a missing file is an error naming it."""
    adapter = Path(adapter)
    out = {}
    for name in ADAPTER_FILES:
        path = adapter / name
        if not path.is_file():
            extra = " (a .bin adapter: save it with safetensors)" if (adapter / "adapter_model.bin").exists() else ""
            raise LLMError(f"LoRA adapter {adapter} has no {name}{extra}")
        out[name] = sha256_file(path)
    return out


def cache_key(base_sha256: str, hashes: dict[str, str]) -> str:
    blob = json.dumps({"format": FORMAT, "base": base_sha256, "adapter": hashes}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def adapter_gguf(adapter: str | Path, base_gguf: str | Path, base_sha256: str) -> AdapterGGUF:
    """The GGUF LoRA adapter for ``adapter`` on ``base_gguf``, from the cache or built now."""
    adapter = Path(adapter)
    hashes = adapter_hashes(adapter)
    target = cache_root() / "gguf" / "adapters" / f"{adapter.name}-{cache_key(base_sha256, hashes)}"
    want = {"format": FORMAT, "base_sha256": base_sha256, "adapter_sha256": hashes}
    reason = _stale(target, want)
    if reason is None:
        return AdapterGGUF(target / "adapter.gguf", built=False)
    if target.exists():
        logger.warning("rebuilding the GGUF LoRA adapter in %s: %s", target, reason)
    else:
        logger.warning("first use of adapter %s: converting it to a GGUF LoRA adapter in %s (once)", adapter, target)
    start = time.perf_counter()
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        counts = convert(adapter, base_gguf, tmp / "adapter.gguf", meta=want)
        manifest = {**want, "gguf_sha256": sha256_file(tmp / "adapter.gguf"), "tensors": counts,
                    "adapter": adapter.name, "base_gguf": Path(base_gguf).name,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return AdapterGGUF(target / "adapter.gguf", built=True, seconds=time.perf_counter() - start,
                       reason=reason)


def _stale(target: Path, want: dict) -> str | None:
    """Why the cached adapter in ``target`` cannot be used, or None when it can."""
    try:
        manifest = json.loads((target / "manifest.json").read_text())
    except FileNotFoundError:
        return "not built yet"
    except (OSError, ValueError) as exc:
        return f"unreadable manifest ({exc})"
    for key, value in want.items():
        if manifest.get(key) != value:
            return f"manifest {key} is {manifest.get(key)!r}, expected {value!r}"
    path = target / "adapter.gguf"
    if not path.is_file():
        return "adapter.gguf is missing"
    have = sha256_file(path)
    if have != manifest.get("gguf_sha256"):
        return f"adapter.gguf has sha256 {have[:12]}..., the manifest says {str(manifest.get('gguf_sha256'))[:12]}..."
    return None


# --------------------------------------------------------------------------- conversion

@dataclass(frozen=True)
class _Base:
    arch: str
    n_head: int
    n_head_kv: int
    n_block: int
    shapes: dict[str, tuple[int, ...]]  # tensor name -> ggml shape (ne0 = input size)


def _read_base(base_gguf: str | Path) -> _Base:
    import gguf

    reader = gguf.GGUFReader(str(base_gguf))

    def field(key: str):
        f = reader.fields.get(key)
        if f is None:
            raise LLMError(f"base GGUF {base_gguf} has no {key!r}")
        return f.contents()

    arch = field("general.architecture")
    if arch not in PERMUTED_QK:
        raise LLMError(f"base GGUF {base_gguf} has architecture {arch!r}; memq converts LoRA adapters for "
                       f"{', '.join(sorted(PERMUTED_QK))} only")
    head = int(field(f"{arch}.attention.head_count"))
    head_kv = reader.fields.get(f"{arch}.attention.head_count_kv")
    return _Base(arch, head, int(head_kv.contents()) if head_kv else head, int(field(f"{arch}.block_count")),
                 {t.name: tuple(int(s) for s in t.shape) for t in reader.tensors})


def _scaling(config: dict, rank: int) -> float:
    alpha = float(config["lora_alpha"])
    return alpha / rank ** 0.5 if config.get("use_rslora") else alpha / rank


def _check_config(config: dict, where: Path) -> None:
    def refuse(what: str) -> None:
        raise LLMError(f"LoRA adapter {where}: {what}; memq's llama.cpp backend converts plain LoRA only")

    if config.get("peft_type") != "LORA":
        refuse(f"peft_type is {config.get('peft_type')!r}")
    for flag in ("use_dora", "use_qalora", "fan_in_fan_out", "lora_bias"):
        if config.get(flag):
            refuse(f"{flag} is {config[flag]!r}")
    if config.get("bias", "none") != "none":
        refuse(f"bias is {config['bias']!r}")
    if config.get("modules_to_save"):
        refuse(f"modules_to_save is {config['modules_to_save']!r}")
    if config.get("alpha_pattern"):
        refuse(f"alpha_pattern is {config['alpha_pattern']!r}")
    for key in ("layers_to_transform", "layer_replication", "trainable_token_indices", "target_parameters"):
        if config.get(key):
            refuse(f"{key} is {config[key]!r}")


def _permute_rows(b: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's q/k row order for the llama architecture (convert_hf_to_gguf's ``permute``)."""
    out, r = b.shape
    return b.reshape(n_head, 2, out // n_head // 2, r).swapaxes(1, 2).reshape(out, r)


def _pairs(tensors: dict[str, np.ndarray], where: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{transformers module name: (A, B)}`` from peft's saved tensor names."""
    parts: dict[str, dict[str, np.ndarray]] = {}
    for name, value in tensors.items():
        for tag in ("lora_A", "lora_B"):
            marker = f".{tag}.weight"
            if name.endswith(marker):
                module = name[:-len(marker)].removeprefix("base_model.model.")
                parts.setdefault(module, {})[tag] = value
                break
        else:
            raise LLMError(f"LoRA adapter {where} holds {name!r}, which is not a lora_A/lora_B weight "
                           "(embedding or extra trained modules are not converted)")
    out = {}
    for module, ab in sorted(parts.items()):
        if set(ab) != {"lora_A", "lora_B"}:
            raise LLMError(f"LoRA adapter {where}: {module!r} has {sorted(ab)} but needs lora_A and lora_B")
        out[module] = (ab["lora_A"], ab["lora_B"])
    return out


def convert(adapter: str | Path, base_gguf: str | Path, out: str | Path, meta: dict | None = None) -> int:
    """Write ``adapter`` (peft, safetensors) as a GGUF LoRA adapter for ``base_gguf`` to ``out``; the pair count."""
    import gguf
    from safetensors.torch import load_file  # torch reads bf16/fp16 adapters too

    adapter = Path(adapter)
    config = json.loads((adapter / "adapter_config.json").read_text())
    _check_config(config, adapter)
    base = _read_base(base_gguf)
    arch = next(a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == base.arch)
    names = gguf.get_tensor_name_map(arch, base.n_block)
    tensors = {k: v.float().numpy() for k, v in load_file(str(adapter / "adapter_model.safetensors")).items()}
    pairs = _pairs(tensors, adapter)
    if not pairs:
        raise LLMError(f"LoRA adapter {adapter} holds no lora_A/lora_B weights")
    writer = gguf.GGUFWriter(str(out), base.arch)
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, 0.0)  # scale 1: peft's scaling is folded into lora_b
    for key, value in (meta or {}).items():
        writer.add_string(f"memq.{key}", json.dumps(value, sort_keys=True))
    for module, (a, b) in pairs.items():
        target = names.get_name(f"{module}.weight", try_suffixes=(".weight",))
        if target is None or target not in base.shapes:
            raise LLMError(f"LoRA adapter {adapter}: module {module!r} has no tensor in the {base.arch} base "
                           f"GGUF {Path(base_gguf).name} (mapped to {target!r})")
        rank = a.shape[0]
        ne = base.shapes[target]
        if a.ndim != 2 or b.ndim != 2 or b.shape[1] != rank or (a.shape[1], b.shape[0]) != ne[:2]:
            raise LLMError(f"LoRA adapter {adapter}: {module!r} has A {a.shape} and B {b.shape}, which do not fit "
                           f"{target} of shape (in {ne[0]}, out {ne[1]}) in {Path(base_gguf).name}")
        b = b.astype(np.float32) * np.float32(_scaling(config, rank))
        if PERMUTED_QK[base.arch] and target.endswith(("attn_q.weight", "attn_k.weight")):
            b = _permute_rows(b, base.n_head if "attn_q" in target else base.n_head_kv)
        writer.add_tensor(f"{target}.lora_a", np.ascontiguousarray(a, dtype=np.float32))
        writer.add_tensor(f"{target}.lora_b", np.ascontiguousarray(b, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return len(pairs)


# --------------------------------------------------------------------------- merging

MERGED_TYPES = ("F32", "F16", "BF16")  # base tensor types an adapter is added into (quantised ones are not)
LORA_MODES = ("runtime", "merged")


def lora_from_env(preferred: str | None = None) -> str:
    """``$MEMQ_LLAMA_LORA``; unset, ``preferred`` (a planner's own choice, ``memq.plan.planner.default_lora``) or
    else ``runtime``: ``runtime`` (llama.cpp adds ``B(A x)`` at every adapted matrix, each pass) or ``merged`` (the
    adapter added into a copy of the base weights once, :func:`merged_gguf`). Others are refused by name."""
    value = os.environ.get("MEMQ_LLAMA_LORA", "").strip() or preferred or "runtime"
    if value not in LORA_MODES:
        raise LLMError(f"MEMQ_LLAMA_LORA must be one of {', '.join(LORA_MODES)}, got {value!r}")
    return value


def merged_gguf(base_gguf: Path, base_sha256: str, adapter_gguf_path: Path, name: str) -> tuple[Path, str, float]:
    """``(path, sha256, seconds spent building)`` of ``base_gguf`` with the GGUF LoRA adapter ``adapter_gguf_path``
    (as :func:`convert` writes it: peft's scaling folded into ``lora_b``, scale 1) added into its weights: each
    adapted tensor becomes ``W + B A``, summed in float32 and rounded once to the tensor's own type (F32, F16 or
    BF16; a quantised base is refused). Every other tensor and all metadata are copied. Cached under
    ``$MEMQ_CACHE/gguf/merged/`` with a manifest of both sources' sha256 and its own; a file that does not match
    its manifest is rebuilt (a warning says why), never used. llama.cpp then runs no adapter: 5 to 16% less a pass
    of 8 tokens or more on the 2-core CPU measured (docs/backends.md), with weights rounded once more than at
    runtime."""
    adapter_sha = memo_sha256(Path(adapter_gguf_path))  # the adapter's own check has just hashed it too
    key = hashlib.sha256(f"{FORMAT}\0{base_sha256}\0{adapter_sha}".encode()).hexdigest()[:16]
    target = cache_root() / "gguf" / "merged" / f"{Path(base_gguf).stem}+{name}-{key}.gguf"
    want = {"format": FORMAT, "base_sha256": base_sha256, "adapter_gguf_sha256": adapter_sha}
    manifest, reason = cached(target, want)
    if reason is None:
        return target, manifest["sha256"], 0.0

    def build(tmp: Path) -> dict:
        count = _write_merged(Path(base_gguf), Path(adapter_gguf_path), tmp)
        return {"merged_tensors": count, "base": Path(base_gguf).name, "adapter": name}

    return build_cached(target, want, build, f"{Path(base_gguf).name} with the LoRA adapter {name} merged in", reason)


def _write_merged(base_gguf: Path, adapter_gguf: Path, out: Path) -> int:
    import gguf
    from gguf.quants import dequantize, quantize

    lora = {t.name: t for t in gguf.GGUFReader(str(adapter_gguf)).tensors}
    delta = {name[:-len(".lora_a")]: (np.asarray(t.data, dtype=np.float32),
                                      np.asarray(lora[name[:-len(".lora_a")] + ".lora_b"].data, dtype=np.float32))
             for name, t in lora.items() if name.endswith(".lora_a")}
    base = gguf.GGUFReader(str(base_gguf))
    writer = gguf.GGUFWriter(str(out), base.fields["general.architecture"].contents())
    for field in base.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        array = field.types[0] == gguf.GGUFValueType.ARRAY
        writer.add_key_value(field.name, field.contents(), field.types[0], sub_type=field.types[-1] if array else None)
    merged = 0
    for t in base.tensors:
        data = np.asarray(t.data)
        if t.name in delta:
            if t.tensor_type.name not in MERGED_TYPES:
                raise LLMError(f"{base_gguf.name}: {t.name} is {t.tensor_type.name}; a LoRA adapter is merged into "
                               f"{', '.join(MERGED_TYPES)} weights only (MEMQ_LLAMA_WEIGHTS=bf16 or f16)")
            a, b = delta.pop(t.name)
            w = dequantize(data, t.tensor_type).reshape(b.shape[0], a.shape[1]) + b @ a
            data = quantize(w.astype(np.float32), t.tensor_type)
            merged += 1
        writer.add_tensor(t.name, data, raw_shape=data.shape, raw_dtype=t.tensor_type)
    if delta:
        raise LLMError(f"{adapter_gguf.name} adapts {sorted(delta)[:3]}, which {base_gguf.name} does not hold")
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:  # the file is closed before the caller removes it, whatever failed
        writer.close()
    return merged
