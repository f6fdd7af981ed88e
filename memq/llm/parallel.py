"""Greedy decoding of several prompts at once on one llama.cpp context (the describer's batches).

    decoder = ParallelDecoder(llama, n_seq=8, n_ctx=4096, threads=1)
    decoder.generate([ids_a, ids_b, ...], max_new_tokens=40, done=lambda new: ...)   # new ids per prompt
    LlamaCppLLM("qwen2.5-coder-0.5b", parallel=8).generate(prompts)                  # texts, through generate_texts

On a CPU a forward pass over several sequences costs little more than over one, because the weights are read
once per pass. Qwen2.5-Coder-0.5B with f16 weights on one thread (measured): 109 ms a pass for one sequence,
171 ms for 4, 333 ms for 8, 565 ms for 16, so 8 sequences make a token 2.6 times cheaper.

Sequence 0 of the context holds the prompts' shared prefix (the few-shot examples of a description prompt) and
keeps it between calls, so a prefix is evaluated once for as many calls as share it. Sequences 1..N start as
copies of sequence 0 (``llama_memory_seq_cp`` on a unified KV cache shares its cells: nothing is recomputed),
evaluate their own tails together, then take one greedy token each per forward pass until each is done; a sequence
that is done takes the next prompt waiting, so a call with more prompts than sequences keeps all of them busy
(its tail is evaluated in the same pass as the others' next tokens).

``require`` constrains decoding (the describer's retry): while a prompt's answer lacks one of its required strings
(``?entity1``), EOS and every token that ends a line or a sentence (:func:`ending_tokens`) are masked, so greedy
decoding goes on until the answer holds them all, or ``max_new_tokens`` is reached.

The tokens are greedy decoding's, up to rounding: a product over N rows may round differently from one over one
row, so where two tokens are nearly tied the batched and the one-at-a-time outputs can part. Drafts
(:mod:`memq.llm.draft`) are not used here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from .base import LLMError, cut_at_stop, shared_prefix

MAX_SEQ = 64
_LOCK = threading.Lock()
_DECODERS: dict[tuple, ParallelDecoder] = {}  # per (GGUF, adapter GGUF, threads, n_ctx, sequences)


def check_parallel(n: int) -> None:
    """Refuse a number of prompts decoded together outside 1..:data:`MAX_SEQ`, naming it."""
    if not 1 <= n <= MAX_SEQ:
        raise LLMError(f"parallel must be in 1..{MAX_SEQ}, got {n}")


def common_prefix(seqs: list[list[int]]) -> int:
    """The length of the prefix all of ``seqs`` share."""
    if not seqs:
        return 0
    return min((shared_prefix(seqs[0], s) for s in seqs[1:]), default=len(seqs[0]))


class ParallelDecoder:
    """A llama.cpp context with ``n_seq`` + 1 sequences over the model of ``llama`` (a ``llama_cpp.Llama``)."""

    def __init__(self, llama, n_seq: int, n_ctx: int, threads: int, n_batch: int = 512) -> None:
        import llama_cpp

        check_parallel(n_seq)
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = params.n_ubatch = n_batch
        params.n_seq_max = n_seq + 1
        params.kv_unified = True  # one pool of cells that the sequences share (the prefix is stored once)
        params.n_threads = params.n_threads_batch = threads
        ctx = llama_cpp.llama_init_from_model(llama.model, params)
        if not ctx:
            raise LLMError(f"llama.cpp could not make a context of {n_ctx} tokens for {n_seq} sequences")
        self.lib = llama_cpp
        self.llama = llama  # keeps the model alive as long as this context
        self.ctx = ctx
        self.memory = llama_cpp.llama_get_memory(ctx)
        self.batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
        self.n_seq, self.n_ctx, self.n_batch, self.threads = n_seq, n_ctx, n_batch, threads
        self.n_vocab = llama.n_vocab()
        self.eos = int(llama.token_eos())
        self.prefix: list[int] = []  # the tokens sequence 0 holds
        self.endings: np.ndarray | None = None  # ending_tokens of the model's vocabulary, made on first use
        self.lock = threading.Lock()
        self.decodes = 0  # forward passes so far
        self.decoded = 0  # tokens evaluated by them

    def __del__(self) -> None:
        self.close()

    def close(self) -> None:
        """Free the batch and the context (once; also at garbage collection)."""
        lib = getattr(self, "lib", None)
        batch, self.batch = getattr(self, "batch", None), None
        ctx, self.ctx = getattr(self, "ctx", None), None
        if lib is None:
            return
        free_batch, free_ctx = getattr(lib, "llama_batch_free", None), getattr(lib, "llama_free", None)
        if batch is not None and callable(free_batch):  # at interpreter exit llama_cpp's names may be gone
            free_batch(batch)
        if ctx is not None and callable(free_ctx):
            free_ctx(ctx)

    def generate(self, prompts: list[list[int]], max_new_tokens: int,
                 done: Callable[[list[int]], bool] | None = None,
                 hold: Callable[[int, list[int]], bool] | None = None,
                 held: np.ndarray | None = None) -> list[list[int]]:
        """Greedy new token ids for each prompt, up to ``n_seq`` decoding at a time. A prompt's decoding ends at
        EOS, at ``max_new_tokens``, or when ``done(its new ids)`` is true (a stop string); its sequence then
        takes the next prompt waiting, whose tail is evaluated in the same forward pass as the others' tokens.

        ``hold(prompt index, its new ids)`` true: the next token is neither EOS nor one of the ids ``held``
        marks (a boolean mask over the vocabulary)."""
        if max_new_tokens < 1:
            raise LLMError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if any(not p for p in prompts):
            raise LLMError("every prompt needs at least one token")
        if not prompts:
            return []
        shared = min(common_prefix(prompts), min(len(p) for p in prompts) - 1)  # each tail keeps a token
        longest = max(len(p) - shared for p in prompts) + max_new_tokens
        fit = (self.n_ctx - shared) // longest
        if fit < 1:
            raise LLMError(f"a prompt of {max(map(len, prompts))} tokens + max_new_tokens {max_new_tokens} exceeds "
                           f"the llama.cpp context of {self.n_ctx}")
        self._hold_prefix(prompts[0][:shared])
        free = list(range(min(self.n_seq, fit, len(prompts)), 0, -1))  # sequence ids, popped from the end
        waiting = list(range(len(prompts)))[::-1]
        running: dict[int, int] = {}  # sequence -> prompt
        new: list[list[int]] = [[] for _ in prompts]
        try:
            while waiting or running:
                items = []
                while free and waiting:
                    s, k = free.pop(), waiting.pop()
                    running[s] = k
                    self.lib.llama_memory_seq_rm(self.memory, s, -1, -1)
                    self.lib.llama_memory_seq_cp(self.memory, 0, s, -1, -1)
                    p = prompts[k]
                    items.extend((p[pos], pos, s, pos == len(p) - 1) for pos in range(shared, len(p)))
                items.extend((new[k][-1], len(prompts[k]) + len(new[k]) - 1, s, True)
                             for s, k in running.items() if new[k])
                rows = self._run(items)
                for s, k in list(running.items()):
                    row = rows[s]
                    if hold is not None and hold(k, new[k]):
                        row = np.where(held, -np.inf, row) if held is not None else row.copy()
                        row[self.eos] = -np.inf
                    new[k].append(int(np.argmax(row)))
                    if new[k][-1] == self.eos or len(new[k]) >= max_new_tokens or (done is not None and done(new[k])):
                        del running[s]
                        self.lib.llama_memory_seq_rm(self.memory, s, -1, -1)
                        free.append(s)
            return new
        finally:
            for s in range(1, self.n_seq + 1):
                self.lib.llama_memory_seq_rm(self.memory, s, -1, -1)

    def _hold_prefix(self, prefix: list[int]) -> None:
        """Make sequence 0 hold exactly ``prefix``, evaluating only what it does not share with what it holds."""
        keep = common_prefix([self.prefix, prefix])
        self.lib.llama_memory_seq_rm(self.memory, 0, keep, -1)
        self.prefix = self.prefix[:keep]
        if keep < len(prefix):
            self._run([(prefix[pos], pos, 0, False) for pos in range(keep, len(prefix))])
            self.prefix = list(prefix)

    def _run(self, items: list[tuple[int, int, int, bool]]) -> dict[int, np.ndarray]:
        """Decode ``(token, position, sequence, wants logits)`` items, ``n_batch`` a pass; the logits row of each
        sequence's item that wants them (the last such item per sequence)."""
        rows: dict[int, np.ndarray] = {}
        b = self.batch
        for start in range(0, len(items), self.n_batch):
            chunk = items[start:start + self.n_batch]
            b.n_tokens = len(chunk)
            for j, (token, pos, seq, want) in enumerate(chunk):
                b.token[j] = token
                b.pos[j] = pos
                b.n_seq_id[j] = 1
                b.seq_id[j][0] = seq
                b.logits[j] = want
            code = self.lib.llama_decode(self.ctx, b)
            self.decodes += 1
            self.decoded += len(chunk)
            if code != 0:
                self.prefix = []
                self.lib.llama_memory_clear(self.memory, True)
                raise LLMError(f"llama_decode returned {code} on a batch of {len(chunk)} tokens")
            for j, (_token, _pos, seq, want) in enumerate(chunk):
                if want:
                    ptr = self.lib.llama_get_logits_ith(self.ctx, j)
                    rows[seq] = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()
        return rows


def close_decoders(wait: float) -> None:
    """Free every context :func:`decoder_for` made (at exit, :func:`memq.llm.llamacpp.close_models`); one still
    decoding on another thread after ``wait`` seconds is left to its finalizer."""
    with _LOCK:
        decoders = list(_DECODERS.values())
        _DECODERS.clear()
    for decoder in decoders:
        close_when_free(decoder.lock, decoder.close, wait)


def close_when_free(lock: threading.Lock, close: Callable[[], None], wait: float) -> bool:
    """``close()`` holding ``lock`` (a model's or context's, which a decode holds); False, and nothing done, when
    another thread kept it for ``wait`` seconds."""
    if not lock.acquire(timeout=wait):
        return False
    try:
        close()
    finally:
        lock.release()
    return True


def decoder_for(llm) -> ParallelDecoder:
    """The :class:`ParallelDecoder` of a :class:`~memq.llm.llamacpp.LlamaCppLLM` (``llm.parallel`` sequences), made
    on first use and shared per process like the model."""
    loaded = llm.load()
    key = (str(loaded.gguf), str(loaded.adapter_gguf), llm.threads, llm.n_ctx, llm.parallel)
    with _LOCK:
        if key not in _DECODERS:
            _DECODERS[key] = ParallelDecoder(loaded.runner.llama, llm.parallel, llm.n_ctx, llm.threads)
        return _DECODERS[key]


#: What ends an answer early: a token holding one of these is masked while a required string is missing.
ENDINGS = ("\n", ".", "!", ";", "#")


def ending_tokens(tok, n_vocab: int) -> np.ndarray:
    """A boolean mask over the vocabulary: the ids whose text holds one of :data:`ENDINGS`."""
    texts = (tok.decode([i], skip_special_tokens=False) for i in range(n_vocab))
    return np.fromiter((any(e in t for e in ENDINGS) for t in texts), dtype=bool, count=n_vocab)


def generate_texts(llm, prompts: list[str], max_new_tokens: int, stop: list[str] | None, chat: bool,
                   require: list[tuple[str, ...]] | None = None) -> list[str]:
    """:meth:`LlamaCppLLM.generate <memq.llm.llamacpp.LlamaCppLLM.generate>` with ``llm.parallel`` prompts decoded
    together: the same formatting, tokens, stop rule and counters. ``require[i]``: the strings prompt i's answer
    must hold before it may end (see the module's docstring)."""
    tok = llm.load().tokenizer
    decoder = decoder_for(llm)
    ids = [llm.prompt_ids(p, chat) for p in prompts]
    if require is not None and len(require) != len(prompts):
        raise LLMError(f"require has {len(require)} entries for {len(prompts)} prompts")

    def stopped(new: list[int]) -> bool:
        return bool(stop and any(s in tok.decode(new, skip_special_tokens=True) for s in stop if s))

    def missing(k: int, new: list[int]) -> bool:
        text = tok.decode(new, skip_special_tokens=True)
        return any(r not in text for r in require[k])

    if require and decoder.endings is None:  # made once a decoder (its model's vocabulary)
        decoder.endings = ending_tokens(tok, decoder.n_vocab)
    held = decoder.endings if require else None
    with decoder.lock:
        news = decoder.generate(ids, max_new_tokens, stopped, hold=missing if require else None, held=held)
    out = []
    for new in news:
        kept = [t for t in new if t != tok.pad_token_id]
        llm.tokens += len(kept)
        out.append(cut_at_stop(tok.decode(kept, skip_special_tokens=True), stop).strip())
    llm.calls += len(prompts)
    return out
