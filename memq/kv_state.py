"""The llama.cpp KV cache of a prompt, kept in the memq cache so that a new process skips the shared prefix.

Every planner prompt begins with the same chat header and instructions (about 120 of its 140 tokens). A
process that evaluates a prompt with an empty cache saves the prompt's KV state; the next process loads
it and evaluates only the tokens after the part its own prompt shares with the saved one (on 2 CPU cores
that is about a second less before the first planned token).

``$MEMQ_CACHE/gguf/prompt-states/<key>/`` holds ``state.bin`` (llama.cpp's sequence state) and
``state.json`` (its tokens, its sha256, the format). The key covers the base GGUF's sha256, the adapter
GGUF (whose directory name is keyed by the adapter's content), the context size and the llama-cpp-python
version. A state whose bytes do not match its sha256, or that llama.cpp refuses, is deleted and the prompt
evaluated in full.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
from pathlib import Path

from .llm import cache_root

logger = logging.getLogger(__name__)

FORMAT = 1


def state_dir(base_sha256: str, adapter: Path | None, n_ctx: int) -> Path:
    import llama_cpp

    key = json.dumps([FORMAT, base_sha256, adapter.parent.name if adapter else None, n_ctx, llama_cpp.__version__])
    return cache_root() / "gguf" / "prompt-states" / hashlib.sha256(key.encode()).hexdigest()[:16]


def _discard(directory: Path, reason: str) -> None:
    logger.warning("discarding the saved prompt state in %s: %s", directory, reason)
    for name in ("state.json", "state.bin"):
        (directory / name).unlink(missing_ok=True)


def restore(lib, ctx, directory: Path) -> list[int]:
    """Load the saved state into sequence 0 (empty); its tokens, or [] when there is none or it is refused."""
    try:
        meta = json.loads((directory / "state.json").read_text())
        data = (directory / "state.bin").read_bytes()
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        _discard(directory, f"unreadable ({exc})")
        return []
    if meta.get("format") != FORMAT or hashlib.sha256(data).hexdigest() != meta.get("sha256"):
        _discard(directory, "format or sha256 does not match state.json")
        return []
    buffer = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
    if lib.llama_state_seq_set_data(ctx, buffer, len(data), 0) == 0:
        lib.llama_memory_seq_rm(lib.llama_get_memory(ctx), 0, 0, -1)
        _discard(directory, "llama.cpp refused it")
        return []
    return [int(t) for t in meta["tokens"]]


def save(lib, ctx, directory: Path, tokens: list[int]) -> None:
    """Save sequence 0's state, which holds exactly ``tokens`` (atomically: data first, then its manifest)."""
    size = lib.llama_state_seq_get_size(ctx, 0)
    buffer = (ctypes.c_uint8 * size)()
    data = bytes(buffer[:lib.llama_state_seq_get_data(ctx, buffer, size, 0)])
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f"state.bin.tmp-{os.getpid()}"
    tmp.write_bytes(data)
    os.replace(tmp, directory / "state.bin")
    tmp = directory / f"state.json.tmp-{os.getpid()}"
    tmp.write_text(json.dumps({"format": FORMAT, "sha256": hashlib.sha256(data).hexdigest(), "tokens": tokens}))
    os.replace(tmp, directory / "state.json")
