"""The llama.cpp KV cache: :class:`Runner` (one context and the tokens it holds), and the first prompt's
state kept in the memq cache so that a new process skips the shared prefix.

Every planner prompt begins with the same chat header and instructions (about 120 of its 140 tokens). A
process that evaluates a prompt with an empty cache saves the prompt's KV state; the next process loads
it and evaluates only the tokens after the part its own prompt shares with the saved one (on 2 CPU cores
that is about a second less before the first planned token).

``$MEMQ_CACHE/gguf/prompt-states/<key>/`` holds ``state.bin`` (llama.cpp's sequence state) and
``state.json`` (its tokens, its sha256, the format). The key covers the base GGUF's sha256, the adapter
GGUF (whose directory name is keyed by the adapter's content), the context size and the llama-cpp-python
version. A state whose bytes do not match its sha256, or that llama.cpp refuses, is deleted and the prompt
evaluated in full.

A :class:`Runner` also keeps the KV state of the last :data:`SNAPSHOTS` branches it cut
(``$MEMQ_LLAMA_SNAPSHOTS``; 0: none). The grounded planner's line search moves between partial plans: from a line
after "Find X ..." to one after "Find Y ...". The cache holds one sequence, so each move evaluated again every token
after the branch point, the plan's earlier lines included: about half of the tokens its forward passes evaluated
(1,841 for 913 wanted on 7 slow WebQSP dev questions), and each token a pass evaluates adds to its time. Before a
request cuts the sequence, its state is copied out (``llama_state_seq_get_data``: about 0.2 ms for 150 tokens); a
request that shares more with a kept state than with the sequence puts that state back (``llama_state_seq_set_data``:
0.3 ms) and evaluates only the tokens after it. The state put back is the one the tokens were evaluated into (the
logits after it were bit for bit the same in a check); evaluating the branch again, as before, could round otherwise.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..files import write_atomic
from .base import LLMError, cache_root, shared_prefix
from .draft import DRAFT

logger = logging.getLogger(__name__)

FORMAT = 1
SNAPSHOTS = 16  # branches whose KV state a Runner keeps (the module docstring) ...
SNAPSHOT_BYTES = 128 << 20  # ... in at most this many bytes (a state takes 12 KB a token for Qwen2.5-0.5B)


def snapshots_from_env() -> int:
    """``$MEMQ_LLAMA_SNAPSHOTS`` (default :data:`SNAPSHOTS`); a value that is not an int in 0..256 is refused by
    name."""
    value = os.environ.get("MEMQ_LLAMA_SNAPSHOTS", "").strip()
    if not value:
        return SNAPSHOTS
    if not value.isdigit() or int(value) > 256:
        raise LLMError(f"MEMQ_LLAMA_SNAPSHOTS must be an integer in 0..256, got {value!r}")
    return int(value)


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
    write_atomic(directory / "state.bin", data)
    write_atomic(directory / "state.json",
                 json.dumps({"format": FORMAT, "sha256": hashlib.sha256(data).hexdigest(), "tokens": tokens}).encode())


class Runner:
    """One llama.cpp context, sequence 0, and the token ids its KV cache holds."""

    def __init__(self, llama, n_batch: int, state: Path | None = None, governor=None) -> None:
        import llama_cpp

        self.lib = llama_cpp
        self.state = state  # where the first prompt's KV state is kept between processes (memq.llm.kv_state)
        self._save_state = False
        self.llama = llama
        self.n_vocab = llama.n_vocab()
        self.n_ctx = llama.n_ctx()
        self.n_batch = n_batch
        self.eos = int(llama.token_eos())
        self.batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
        self.memory = llama_cpp.llama_get_memory(llama.ctx)
        self.ids: list[int] = []
        self.keep = snapshots_from_env()
        # the tokens of a branch cut -> (its sequence state, the state's size), least recently used first
        self.snapshots: OrderedDict[tuple[int, ...], tuple[ctypes.Array, int]] = OrderedDict()
        self.restored = 0  # requests that started from a kept state
        self.lock = threading.Lock()
        self.decodes = 0  # llama_decode calls (forward passes) so far
        self.decoded = 0  # tokens evaluated by them
        # a memq.llm.threads.ThreadGovernor that sets the threads before a pass, or None (a fixed count)
        self.governor = governor
        self.passes_by_threads: dict[int, int] = {}  # forward passes run on each thread count (governed only)

    def __del__(self) -> None:
        batch, self.batch = getattr(self, "batch", None), None
        free = getattr(getattr(self, "lib", None), "llama_batch_free", None)
        if batch is not None and callable(free):  # at interpreter exit llama_cpp's names may be gone already
            free(batch)

    def logits(self, ids: list[int], first: int) -> np.ndarray:
        """Logits after each of ``ids[first - 1:]`` (rows), keeping the cached prefix that ``ids`` shares."""
        if not 1 <= first <= len(ids):
            raise LLMError(f"first must be in 1..{len(ids)}, got {first}")
        if len(ids) > self.n_ctx:
            raise LLMError(f"{len(ids)} tokens do not fit the llama.cpp context of {self.n_ctx}")
        if not self.ids and self.state is not None:  # a new context: start from the saved prompt, once
            self.ids = restore(self.lib, self.llama.ctx, self.state)
            self._save_state, self.state = not self.ids, None if self.ids else self.state
        start = min(shared_prefix(self.ids, ids), first - 1)
        if self.keep and start < len(self.ids):
            self._snapshot()
            start = self._resume(ids, first, start)
        self.lib.llama_memory_seq_rm(self.memory, 0, start, -1)
        self.ids = list(ids[:start])
        rows = []
        for i in range(start, len(ids), self.n_batch):
            chunk = ids[i:i + self.n_batch]
            want = [i + j >= first - 1 for j in range(len(chunk))]
            self._decode(chunk, i, want)
            rows.extend(self._row(j) for j, w in enumerate(want) if w)
        if self._save_state:
            save(self.lib, self.llama.ctx, self.state, self.ids)
            self._save_state, self.state = False, None
        return np.stack(rows)

    def _snapshot(self) -> None:
        """Keep the sequence's state under its tokens (the least recently used ones go past :attr:`keep` states or
        :data:`SNAPSHOT_BYTES`)."""
        key = tuple(self.ids)
        if key in self.snapshots:
            self.snapshots.move_to_end(key)
            return
        size = self.lib.llama_state_seq_get_size(self.llama.ctx, 0)
        buffer = (ctypes.c_uint8 * size)()
        self.snapshots[key] = (buffer, self.lib.llama_state_seq_get_data(self.llama.ctx, buffer, size, 0))
        while self.snapshots and (len(self.snapshots) > self.keep
                                  or sum(n for _, n in self.snapshots.values()) > SNAPSHOT_BYTES):
            self.snapshots.popitem(last=False)

    def _resume(self, ids: list[int], first: int, start: int) -> int:
        """Put back the kept state that shares the most of ``ids`` (up to ``first`` - 1 tokens) when it shares more
        than the sequence does (``start``); the tokens the sequence now shares with ``ids``."""
        shared, key = max(((min(shared_prefix(k, ids), first - 1), k) for k in self.snapshots), default=(0, ()))
        if shared <= start:
            return start
        buffer, size = self.snapshots[key]
        self.snapshots.move_to_end(key)
        self.lib.llama_memory_seq_rm(self.memory, 0, -1, -1)
        if self.lib.llama_state_seq_set_data(self.llama.ctx, buffer, size, 0) == 0:  # refused: evaluate in full
            del self.snapshots[key]
            self.lib.llama_memory_seq_rm(self.memory, 0, -1, -1)
            self.ids = []
            return 0
        self.ids = list(key)
        self.restored += 1
        return shared

    def step(self, token: int) -> np.ndarray:
        """Append one token; the logits after it (a view, valid until the next decode)."""
        if len(self.ids) >= self.n_ctx:
            raise LLMError(f"generation ran past the llama.cpp context of {self.n_ctx} tokens")
        self._decode([token], len(self.ids), [True])
        return self._row(0, copy=False)

    def extend(self, tokens: list[int]) -> np.ndarray:
        """Append ``tokens`` in one forward pass; the logits after each of them (rows)."""
        if len(self.ids) + len(tokens) > self.n_ctx:
            raise LLMError(f"generation ran past the llama.cpp context of {self.n_ctx} tokens")
        if not 1 <= len(tokens) <= self.n_batch:
            raise LLMError(f"extend takes 1..{self.n_batch} tokens, got {len(tokens)}")
        self._decode(tokens, len(self.ids), [True] * len(tokens))
        return np.stack([self._row(j) for j in range(len(tokens))])

    def greedy(self, ids: list[int], max_new_tokens: int, done: Callable[[list[int]], bool], drafter=None,
               logprobs: bool = False) -> tuple[list[int], list[float]]:
        """Greedy continuation of ``ids`` until ``done(new)`` (checked after each token) or ``max_new_tokens``: the
        new tokens, and with ``logprobs`` the log-probability of each. With a ``drafter``
        (:class:`memq.llm.draft.NgramDrafter`) each pass also checks drafted tokens and keeps those that greedy
        decoding would have chosen: the same tokens, fewer passes. The last new token is not evaluated."""
        row = self.logits(ids, len(ids))[-1]
        new: list[int] = []
        lps: list[float] = []
        while True:
            new.append(int(np.argmax(row)))
            if logprobs:
                lps.append(float(log_softmax_at(row[None, :], new[-1:])[0]))
            if len(new) >= max_new_tokens or done(new):
                return new, lps
            room = min(max_new_tokens - len(new), self.n_ctx - len(ids) - len(new), self.n_batch) - 1
            guess = drafter.draft(ids + new, min(DRAFT, room)) if drafter is not None and room > 0 else []
            if not guess:
                row = self.step(new[-1])
                continue
            rows = self.extend([new[-1], *guess])
            kept = 0
            while kept < len(guess) and int(np.argmax(rows[kept])) == guess[kept]:
                new.append(guess[kept])
                if logprobs:
                    lps.append(float(log_softmax_at(rows[kept:kept + 1], new[-1:])[0]))
                kept += 1
                if len(new) >= max_new_tokens or done(new):
                    self.truncate(len(ids) + len(new) - 1)
                    return new, lps
            self.truncate(len(ids) + len(new))
            row = rows[kept]

    def truncate(self, n: int) -> None:
        """Forget every token after the first ``n`` (a rejected draft)."""
        if n < len(self.ids):
            self.lib.llama_memory_seq_rm(self.memory, 0, n, -1)
            self.ids = self.ids[:n]

    def _decode(self, tokens: list[int], pos: int, want: list[bool]) -> None:
        if self.governor is not None:
            threads = self.governor.update()
            if threads is not None:
                self.lib.llama_set_n_threads(self.llama.ctx, threads, threads)
            key = self.governor.threads
            self.passes_by_threads[key] = self.passes_by_threads.get(key, 0) + 1
        b = self.batch
        b.n_tokens = len(tokens)
        for j, t in enumerate(tokens):
            b.token[j] = t
            b.pos[j] = pos + j
            b.n_seq_id[j] = 1
            b.seq_id[j][0] = 0
            b.logits[j] = want[j]
        code = self.lib.llama_decode(self.llama.ctx, b)
        self.decodes += 1
        self.decoded += len(tokens)
        if code != 0:
            self.ids = self.ids[:pos]
            raise LLMError(f"llama_decode returned {code} at position {pos}")
        self.ids.extend(tokens)

    def _row(self, j: int, copy: bool = True) -> np.ndarray:
        ptr = self.lib.llama_get_logits_ith(self.llama.ctx, j)
        row = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))
        return row.copy() if copy else row


def log_softmax_at(rows: np.ndarray, ids: list[int]) -> np.ndarray:
    """log softmax of each row of ``rows`` (logits) at the matching token of ``ids``."""
    rows = rows.astype(np.float64)
    top = rows.max(axis=1, keepdims=True)
    logz = (top + np.log(np.exp(rows - top).sum(axis=1, keepdims=True)))[:, 0]
    return np.array([rows[i, t] - logz[i] for i, t in enumerate(ids)])


def log_softmax_row(row: np.ndarray, ids) -> np.ndarray:
    """log softmax of the one row of logits ``row`` at each token of ``ids``: bit for bit :func:`log_softmax_at` of
    the row repeated once per token, with the vocabulary normalised once instead of once per token (a node of the
    grounded planner's prefix tree can have dozens of children)."""
    row = row.astype(np.float64)
    top = row.max()
    logz = top + np.log(np.exp(row - top).sum())
    return row[np.asarray(ids, dtype=np.int64)] - logz
