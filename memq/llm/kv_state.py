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

A :class:`Runner`'s context holds :data:`SEQUENCES` sequences in one unified KV cache
(``$MEMQ_LLAMA_SEQUENCES``): :meth:`Runner.logits_many` answers a request in each in one forward pass, so the
grounded planner searches its beam's partial plans together (:mod:`memq.llm.together`); the other calls use
sequence 0.

A :class:`Runner` also keeps the KV state of the last :data:`SNAPSHOTS` branches it cut
(``$MEMQ_LLAMA_SNAPSHOTS``; 0: none). The grounded planner's line search moves between partial plans: from a line
after "Find X ..." to one after "Find Y ...". A sequence holds one branch, so each move evaluated again every token
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
from collections.abc import Callable, Generator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ..files import write_atomic
from .base import LLMError, cache_root, shared_prefix
from .draft import DRAFT

logger = logging.getLogger(__name__)

FORMAT = 1
SNAPSHOTS = 16  # branches whose KV state a Runner keeps (the module docstring) ...
SNAPSHOT_BYTES = 128 << 20  # ... in at most this many bytes (a state takes 12 KB a token for Qwen2.5-0.5B)
SEQUENCES = 4  # sequences of a Runner's context: the grounded planner's beam of 3 searched in one pass a step


def snapshots_from_env() -> int:
    """``$MEMQ_LLAMA_SNAPSHOTS`` (default :data:`SNAPSHOTS`); a value that is not an int in 0..256 is refused by
    name."""
    return _count_from_env("MEMQ_LLAMA_SNAPSHOTS", SNAPSHOTS, 0, 256)


def sequences_from_env() -> int:
    """``$MEMQ_LLAMA_SEQUENCES`` (default :data:`SEQUENCES`): the sequences of a Runner's context, each a line search
    answered in the same forward pass as the others' (1: one search after another, as before them); a value that is
    not an int in 1..16 is refused by name."""
    return _count_from_env("MEMQ_LLAMA_SEQUENCES", SEQUENCES, 1, 16)


def _count_from_env(name: str, default: int, low: int, high: int) -> int:
    """The whole number ``$name`` holds (``default`` if unset or blank); one outside ``low``..``high`` is refused."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    if not value.isdigit() or not low <= int(value) <= high:
        raise LLMError(f"{name} must be an integer in {low}..{high}, got {value!r}")
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
        self.seqs: dict[int, list[int]] = {0: []}  # the tokens each sequence's KV cells hold (0: :attr:`ids`)
        self.sequences = int(llama_cpp.llama_n_seq_max(llama.ctx))  # the context's sequences (``with_sequences``)
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

    @property
    def ids(self) -> list[int]:
        """The tokens sequence 0 holds (the one :meth:`logits` uses)."""
        return self.__dict__.setdefault("seqs", {0: []})[0]

    @ids.setter
    def ids(self, value: list[int]) -> None:
        self.__dict__.setdefault("seqs", {})[0] = value

    def __del__(self) -> None:
        batch, self.batch = getattr(self, "batch", None), None
        free = getattr(getattr(self, "lib", None), "llama_batch_free", None)
        if batch is not None and callable(free):  # at interpreter exit llama_cpp's names may be gone already
            free(batch)

    def logits(self, ids: list[int], first: int, keep: bool = True) -> np.ndarray:
        """Logits after each of ``ids[first - 1:]`` (rows), keeping the cached prefix that ``ids`` shares; a branch
        cut is kept (:meth:`_snapshot`) unless ``keep`` is false (a rejected draft)."""
        if not 1 <= first <= len(ids):
            raise LLMError(f"first must be in 1..{len(ids)}, got {first}")
        if len(ids) > self.n_ctx:
            raise LLMError(f"{len(ids)} tokens do not fit the llama.cpp context of {self.n_ctx}")
        if not self.ids and self.state is not None:  # a new context: start from the saved prompt, once
            self.ids = restore(self.lib, self.llama.ctx, self.state)
            self._save_state, self.state = not self.ids, None if self.ids else self.state
        start = min(shared_prefix(self.ids, ids), first - 1)
        if self.keep and keep and start < len(self.ids):
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

    def _snapshot(self, seq: int = 0) -> None:
        """Keep sequence ``seq``'s state under its tokens (the least recently used ones go past :attr:`keep` states
        or :data:`SNAPSHOT_BYTES`)."""
        key = tuple(self.seqs[seq])
        if key in self.snapshots:
            self.snapshots.move_to_end(key)
            return
        size = self.lib.llama_state_seq_get_size(self.llama.ctx, seq)
        buffer = (ctypes.c_uint8 * size)()
        self.snapshots[key] = (buffer, self.lib.llama_state_seq_get_data(self.llama.ctx, buffer, size, seq))
        while self.snapshots and (len(self.snapshots) > self.keep
                                  or sum(n for _, n in self.snapshots.values()) > SNAPSHOT_BYTES):
            self.snapshots.popitem(last=False)

    def _resume(self, ids: list[int], first: int, start: int, seq: int = 0) -> int:
        """Put back into sequence ``seq`` the kept state that shares the most of ``ids`` (up to ``first`` - 1
        tokens) when it shares more than the sequence does (``start``); the tokens the sequence now shares with
        ``ids``."""
        shared, key = max(((min(shared_prefix(k, ids), first - 1), k) for k in self.snapshots), default=(0, ()))
        if shared <= start:
            return start
        buffer, size = self.snapshots[key]
        self.snapshots.move_to_end(key)
        self.lib.llama_memory_seq_rm(self.memory, seq, -1, -1)
        if self.lib.llama_state_seq_set_data(self.llama.ctx, buffer, size, seq) == 0:  # refused: evaluate in full
            del self.snapshots[key]
            self.lib.llama_memory_seq_rm(self.memory, seq, -1, -1)
            self.seqs[seq] = []
            return 0
        self.seqs[seq] = list(key)
        self.restored += 1
        return shared

    def logits_many(self, requests: dict[int, tuple[list[int], int, bool]]) -> dict[int, np.ndarray]:
        """:meth:`logits` of each request ``(ids, first, keep)`` in the sequence it is keyed by, all in one forward
        pass (more where their tokens pass ``n_batch``): a pass reads every weight once however many tokens it
        evaluates, so it costs far less than one pass a request. Each sequence starts from the most it shares with
        ``ids``: its own cells, another sequence's (``llama_memory_seq_cp``: the cells are shared, not copied,
        in the unified KV cache) or a kept state. A request's logits are those it gets alone, up to the rounding of
        a matrix product over more rows."""
        if not requests or not set(requests) <= set(range(self.sequences)):
            raise LLMError(f"logits_many takes requests keyed by sequences 0..{self.sequences - 1}, got "
                           f"{sorted(requests)}")
        for ids, first, _ in requests.values():
            if not 1 <= first <= len(ids) or len(ids) > self.n_ctx:
                raise LLMError(f"a request of {len(ids)} tokens from {first} does not fit the context of {self.n_ctx}")
        if not self.ids and self.state is not None:  # a new context: start from the saved prompt, once
            self.logits(*requests[min(requests)])
        for s in requests:
            self.seqs.setdefault(s, [])
        # the cells held (shared ones counted once a sequence) and the most a request may take (a kept state put
        # back takes cells of its own): past the context, the sequences no request uses are let go
        if sum(map(len, self.seqs.values())) + sum(len(ids) for ids, _, _ in requests.values()) > self.n_ctx:
            for s in [s for s in self.seqs if s not in requests]:
                self.lib.llama_memory_seq_rm(self.memory, s, -1, -1)
                self.seqs[s] = []
        # what each request shares with each sequence as it stands before any is cut (up to its first - 1 tokens)
        shares = {j: {s: min(shared_prefix(held, ids), first - 1) for s, held in self.seqs.items()}
                  for j, (ids, first, _) in requests.items()}
        items: list[tuple[int, int, int, bool]] = []  # (token, position, sequence, logits wanted)
        written: set[int] = set()  # the sequences cut or copied into so far: no longer what they were, no source
        for j in _copy_order(shares):
            ids, first, keep = requests[j]
            start = shares[j][j]
            source, most = max(((s, n) for s, n in shares[j].items() if s != j and s not in written),
                               key=lambda x: x[1], default=(None, 0))
            cut = self.keep and keep and start < len(self.seqs[j])
            if cut:
                self._snapshot(j)
            if source is not None and most > start:
                self.lib.llama_memory_seq_rm(self.memory, j, -1, -1)
                self.lib.llama_memory_seq_cp(self.memory, source, j, 0, most)
                self.seqs[j], start = list(ids[:most]), most
            if cut:
                start = self._resume(ids, first, start, j)
            self.lib.llama_memory_seq_rm(self.memory, j, start, -1)
            self.seqs[j] = list(ids[:start])
            written.add(j)
            items.extend((ids[p], p, j, p >= first - 1) for p in range(start, len(ids)))
        rows: dict[int, list[np.ndarray]] = {j: [] for j in requests}
        for i in range(0, len(items), self.n_batch):
            chunk = items[i:i + self.n_batch]
            self._decode_items(chunk)
            for k, (token, _, j, want) in enumerate(chunk):
                self.seqs[j].append(token)
                if want:
                    rows[j].append(self._row(k))
        return {j: np.stack(rows[j]) for j in requests}

    def greedy(self, ids: list[int], max_new_tokens: int, done: Callable[[list[int]], bool], drafter=None,
               logprobs: bool = False) -> tuple[list[int], list[float]]:
        """Greedy continuation of ``ids`` until ``done(new)`` (checked after each token) or ``max_new_tokens``: the
        new tokens, and with ``logprobs`` the log-probability of each (:func:`greedy_steps`, each pass one
        :meth:`logits` call). With a ``drafter`` (:class:`memq.llm.draft.NgramDrafter`) each pass also checks drafted
        tokens and keeps those that greedy decoding would have chosen: the same tokens, fewer passes. The last new
        token is not evaluated, and no rejected draft is left in the cache."""
        new, lps = drive(greedy_steps(ids, max_new_tokens, done, drafter, logprobs, self.n_ctx, self.n_batch),
                         lambda request: self.logits(*request))
        self.truncate(len(ids) + len(new) - 1)
        return new, lps

    def truncate(self, n: int) -> None:
        """Forget every token after the first ``n`` (a rejected draft)."""
        if n < len(self.ids):
            self.lib.llama_memory_seq_rm(self.memory, 0, n, -1)
            self.ids = self.ids[:n]

    def _decode(self, tokens: list[int], pos: int, want: list[bool]) -> None:
        """One forward pass over ``tokens`` at ``pos``.. of sequence 0."""
        try:
            self._decode_items([(t, pos + j, 0, w) for j, (t, w) in enumerate(zip(tokens, want, strict=True))])
        except LLMError:
            self.ids = self.ids[:pos]
            raise
        self.ids.extend(tokens)

    def _decode_items(self, items: list[tuple[int, int, int, bool]]) -> None:
        """One forward pass over ``(token, position, sequence, logits wanted)`` items."""
        if self.governor is not None:
            threads = self.governor.update()
            if threads is not None:
                self.lib.llama_set_n_threads(self.llama.ctx, threads, threads)
            key = self.governor.threads
            self.passes_by_threads[key] = self.passes_by_threads.get(key, 0) + 1
        b = self.batch
        b.n_tokens = len(items)
        for j, (t, pos, seq, want) in enumerate(items):
            b.token[j] = t
            b.pos[j] = pos
            b.n_seq_id[j] = 1
            b.seq_id[j][0] = seq
            b.logits[j] = want
        code = self.lib.llama_decode(self.llama.ctx, b)
        self.decodes += 1
        self.decoded += len(items)
        if code != 0:
            raise LLMError(f"llama_decode returned {code} at position {items[0][1]}")

    def _row(self, j: int) -> np.ndarray:
        ptr = self.lib.llama_get_logits_ith(self.llama.ctx, j)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()


@contextmanager
def with_sequences(n: int):
    """While a ``llama_cpp.Llama`` is made: its context holds ``n`` sequences in one unified KV cache (cells a
    sequence copies from another are shared, not stored twice). ``Llama`` takes no such argument, so its default
    context parameters are wrapped for the call, as :func:`memq.llm.gguf_weights.no_repacking` wraps the model's."""
    import llama_cpp.llama as api

    default = api.llama_cpp.llama_context_default_params

    def params():
        p = default()
        p.n_seq_max, p.kv_unified = n, True
        return p

    with _PARAMS_LOCK:
        api.llama_cpp.llama_context_default_params = params
        try:
            yield
        finally:
            api.llama_cpp.llama_context_default_params = default


_PARAMS_LOCK = threading.Lock()


def drive(steps: Generator, answer: Callable[[tuple], np.ndarray]):
    """Runs a generator of logits requests (:func:`greedy_steps`, :func:`expand_steps`), each answered by
    ``answer(request)``; what it returns."""
    try:
        request = next(steps)
        while True:
            request = steps.send(answer(request))
    except StopIteration as done:
        return done.value


def expand_steps(ids: list[int], first: int, children) -> Generator[tuple, np.ndarray, tuple]:
    """One line-search expansion as a logits request (``(ids, first, keep)``, the answer :meth:`Runner.logits`'
    rows): (log p of each of ``ids[first:]`` given the tokens before it, log p of each token of ``children`` after
    all of ``ids``)."""
    rows = yield ids, first, True
    chain = log_softmax_at(rows[:-1], ids[first:]) if len(rows) > 1 else np.zeros(0)
    nxt = log_softmax_row(rows[-1], children) if len(children) else np.zeros(0)
    return chain, nxt


def greedy_steps(ids: list[int], max_new_tokens: int, done: Callable[[list[int]], bool], drafter, logprobs: bool,
                 n_ctx: int, n_batch: int) -> Generator[tuple, np.ndarray, tuple[list[int], list[float]]]:
    """Greedy decoding (:meth:`Runner.greedy`) as logits requests, one a forward pass: the new tokens, and with
    ``logprobs`` the log-probability of each. A pass after the first evaluates the last new token and the drafted
    ones; a rejected draft is cut by the next request, whose state is not kept (``keep`` false)."""
    rows = yield ids, len(ids), True
    row = rows[-1]
    new: list[int] = []
    lps: list[float] = []
    while True:
        new.append(int(np.argmax(row)))
        if logprobs:
            lps.append(float(log_softmax_at(row[None, :], new[-1:])[0]))
        if len(new) >= max_new_tokens or done(new):
            return new, lps
        if len(ids) + len(new) > n_ctx:
            raise LLMError(f"generation ran past the llama.cpp context of {n_ctx} tokens")
        room = min(max_new_tokens - len(new), n_ctx - len(ids) - len(new), n_batch) - 1
        guess = drafter.draft(ids + new, min(DRAFT, room)) if drafter is not None and room > 0 else []
        rows = yield ids + new + guess, len(ids) + len(new), False
        kept = 0
        while kept < len(guess) and int(np.argmax(rows[kept])) == guess[kept]:
            new.append(guess[kept])
            if logprobs:
                lps.append(float(log_softmax_at(rows[kept:kept + 1], new[-1:])[0]))
            kept += 1
            if len(new) >= max_new_tokens or done(new):
                return new, lps
        row = rows[kept]


def _copy_order(shares: dict[int, dict[int, int]]) -> list[int]:
    """The requests of :meth:`Runner.logits_many` (by sequence; ``shares``: what each shares with each sequence) in
    an order that reads each sequence another request starts from before that sequence is cut: a request whose own
    sequence another would copy goes after it (where two would copy each other, the first goes first, and the other
    starts from what is left)."""
    want = {}
    for j, share in shares.items():
        source, most = max(((s, n) for s, n in share.items() if s != j), key=lambda x: x[1], default=(None, 0))
        want[j] = source if most > share[j] else None
    order, left = [], sorted(shares)
    while left:
        free = [j for j in left if not any(want[k] == j for k in left if k != j)]
        j = (free or left)[0]
        order.append(j)
        left.remove(j)
    return order


def log_softmax_at(rows: np.ndarray, ids: list[int]) -> np.ndarray:
    """log softmax of each row of ``rows`` (logits) at the matching token of ``ids``."""
    x = rows.astype(np.float64)
    picked = x[np.arange(len(ids)), ids]
    top = x.max(axis=1, keepdims=True)
    np.exp(np.subtract(x, top, out=x), out=x)  # in place: a row is 1.2 MB, and fresh ones cost page faults
    return picked - (top[:, 0] + np.log(x.sum(axis=1)))


def log_softmax_row(row: np.ndarray, ids) -> np.ndarray:
    """log softmax of the one row of logits ``row`` at each token of ``ids``: bit for bit :func:`log_softmax_at` of
    the row repeated once per token, normalised once (a node of the planner's prefix tree has dozens of children)."""
    x = row.astype(np.float64)
    picked, top = x[np.asarray(ids, dtype=np.int64)], x.max()
    np.exp(np.subtract(x, top, out=x), out=x)
    return picked - (top + np.log(x.sum()))
