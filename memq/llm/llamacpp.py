"""The llama.cpp backend: greedy generation and log-likelihood scoring with llama-cpp-python, LoRA adapter included.

    llm = LlamaCppLLM("qwen2.5-coder-0.5b", adapter="memory_bank/webqsp/planner")
    llm.generate(["..."], max_new_tokens=160)            # same contract as memq.llm.LocalLLM
    llm.score("prompt", ["continuation a", "b"])         # log p(continuation | prompt), summed over its tokens

The model sees exactly what :class:`~memq.llm.LocalLLM` feeds transformers:
the prompt in the tokenizer's chat template (:func:`memq.llm.chat_text`),
tokenized by the same tokenizer transformers uses (saved once from the GGUF file
under ``$MEMQ_CACHE/tokenizers/``, or the converted model's own), run by
``tokenizers`` without importing transformers (:mod:`memq.llm.chat_tokenizer`).
The token ids go to llama.cpp; the new ids are decoded by that tokenizer.
Greedy decoding takes the argmax of llama.cpp's logits and stops, as
transformers does, at the model's EOS id, at ``max_new_tokens``, or once a stop
string appears (the text is then cut at its first occurrence).

The base GGUF's weights are dequantised once to f16 or bf16 (:mod:`memq.llm.gguf_weights`; ``q8_0`` quantises
them to 8 bits, ``shipped`` runs them as shipped); a peft LoRA adapter is converted once to a GGUF LoRA adapter
(:mod:`memq.llm.lora_gguf`) that llama.cpp applies at run time, or (``lora="merged"``) adds into a copy of the
weights once. Greedy decoding may check drafted tokens in the same forward pass (:meth:`LlamaCppLLM.draft_from`,
:mod:`memq.llm.draft`: the fine-tuned planner drafts from its training plans); the text is the same, the passes
fewer. Models load on first use and are shared per process by (GGUF, adapter GGUF, threads, context size). The KV
cache keeps the last prompt, so prompts that share a prefix (the planner's instructions) only evaluate what differs.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import MemQError
from ..files import atomic_path
from .base import LLMError, cache_root, chat_text, check_generate_args, cut_at_stop, gguf_source
from .chat_tokenizer import open_tokenizer
from .draft import MAX_TEXTS, NgramDrafter
from .gguf_weights import WEIGHTS, bf16_gguf, f16_gguf, no_repacking, q8_gguf, weights_from_env
from .kv_state import Runner, drive, expand_steps, log_softmax_at, sequences_from_env, state_dir, with_sequences
from .lora_gguf import LORA_MODES, adapter_gguf, lora_from_env, merged_gguf
from .parallel import check_parallel, close_decoders, close_when_free, generate_texts
from .threads import ThreadGovernor, default_threads, env_threads
from .together import line_end, run_together

logger = logging.getLogger(__name__)

LLAMA_CPP_VERSION = "0.3.36"  # the version memq is tested with (pyproject extra "llamacpp")
INSTALL_HINT = f"pip install llama-cpp-python=={LLAMA_CPP_VERSION} (or `make install`; it compiles llama.cpp)"


def unavailable() -> str | None:
    """Why the llama.cpp backend cannot run here, or None when llama-cpp-python imports."""
    try:
        import llama_cpp  # noqa: F401
    except (ImportError, OSError) as exc:  # OSError: the compiled library does not load
        return f"llama-cpp-python is not importable ({exc}); {INSTALL_HINT}"
    return None


def tokenizer_dir(name: str, gguf: Path, digest: str) -> tuple[Path, float]:
    """A transformers tokenizer directory for ``gguf`` and the seconds spent building it (0 when cached).

    The converted transformers model's directory when there is one (the tokenizer LocalLLM uses), else
    a tokenizer-only copy under ``$MEMQ_CACHE/tokenizers/``, built by the same call."""
    target = cache_root() / "tokenizers" / f"{name}-{digest[:8]}"
    for known in (cache_root() / "models" / f"{name}-{digest[:8]}", target):
        try:
            if json.loads((known / "memq_source.json").read_text()).get("sha256") == digest:
                return known, 0.0
        except (OSError, ValueError):
            continue
    from transformers import AutoTokenizer

    logger.warning("first use of %s with llama.cpp: saving its tokenizer in %s (once)", gguf.name, target)
    start = time.perf_counter()
    with atomic_path(target) as tmp:
        AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(str(tmp))
        (tmp / "memq_source.json").write_text(json.dumps({"name": name, "gguf": gguf.name, "sha256": digest},
                                                         indent=2))
    return target, time.perf_counter() - start


_LOCK = threading.Lock()
_LOADED: dict[tuple, Runner] = {}  # closed at exit (close_models)
CLOSE_WAIT = 10.0  # seconds close_models waits for a model another thread is decoding with
_NATIVE = logging.getLogger(__name__ + ".native")
_LOG_CALLBACK = None  # kept alive while llama.cpp may call it


def _route_native_logs() -> None:
    """llama.cpp's own messages to the ``memq.llm.llamacpp.native`` logger instead of stderr.

    Its errors stay errors; its warnings (buffer placement, context size) become INFO, the rest DEBUG.
    (llama-cpp-python 0.3.36 maps ggml's log levels off by one and prints warnings even when not verbose.)"""
    global _LOG_CALLBACK
    if _LOG_CALLBACK is not None:
        return
    import ctypes

    import llama_cpp

    levels = {4: logging.ERROR, 3: logging.INFO}  # ggml: 1 debug, 2 info, 3 warn, 4 error, 5 continue
    last = [logging.DEBUG]

    @llama_cpp.llama_log_callback
    def callback(level, text, user_data):  # noqa: ARG001 - the C signature
        if level != 5:
            last[0] = levels.get(level, logging.DEBUG)
        if _NATIVE.isEnabledFor(last[0]):
            _NATIVE.log(last[0], "%s", text.decode("utf-8", "replace").rstrip("\n"))

    _LOG_CALLBACK = callback
    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))


@dataclass
class Loaded:
    runner: Runner
    tokenizer: object
    gguf: Path
    adapter_gguf: Path | None
    prepared: list[tuple[str, float]] = field(default_factory=list)  # (what was built on this load, seconds)
    tokenizer_key: str = ""  # changes with the tokenizer (its cache directory's name: model name and sha256)


class LlamaCppLLM:
    """A GGUF model (+ a peft LoRA adapter) run by llama.cpp; greedy, one prompt at a time unless ``parallel``.

    ``model``: ``"qwen2.5-coder-0.5b"``, ``"smollm2"`` or a ``.gguf`` file; ``adapter``: a peft LoRA
    directory. ``weights``: ``f16`` (the shipped weights dequantised once, :mod:`memq.llm.gguf_weights`),
    ``bf16``, ``q8_0`` or ``shipped``; default ``$MEMQ_LLAMA_WEIGHTS``, else ``f16``. ``threads``: a fixed
    count, default ``$MEMQ_LLAMA_THREADS``; when neither is given the count is *governed*
    (:mod:`memq.llm.threads`): every CPU while other processes leave them idle, fewer when they do.
    ``lora``: ``runtime`` or ``merged`` (:func:`memq.llm.lora_gguf.merged_gguf`), default ``$MEMQ_LLAMA_LORA``.
    ``batch_size`` is only how many prompts a batched caller hands over at once.
    ``parallel`` > 1 or ``require`` (strings each answer must hold before it may end): :meth:`generate` decodes
    the prompts together (:mod:`memq.llm.parallel`; no drafts). ``calls`` counts prompts answered, ``tokens`` tokens.
    """

    backend = "llamacpp"

    def __init__(self, model: str = "qwen2.5-coder-0.5b", adapter: str | Path | None = None, batch_size: int = 8,
                 system: str | None = None, threads: int | None = None, n_ctx: int = 4096,
                 weights: str | None = None, parallel: int = 1, lora: str | None = None) -> None:
        if not isinstance(model, str) or not model:
            raise LLMError(f"model must be a non-empty str, got {model!r}")
        if batch_size < 1:
            raise LLMError(f"batch_size must be >= 1, got {batch_size}")
        if threads is not None and threads < 1:
            raise LLMError(f"threads must be >= 1, got {threads}")
        if n_ctx < 64:
            raise LLMError(f"n_ctx must be >= 64, got {n_ctx}")
        check_parallel(parallel)
        if weights is not None and weights not in WEIGHTS:
            raise LLMError(f"weights must be one of {', '.join(WEIGHTS)}, got {weights!r}")
        if lora is not None and lora not in LORA_MODES:
            raise LLMError(f"lora must be one of {', '.join(LORA_MODES)}, got {lora!r}")
        self.weights = weights or weights_from_env()
        self.lora = lora or lora_from_env()  # runtime: added by llama.cpp each pass; merged: into the weights once
        self.model = model
        self.adapter = str(adapter) if adapter is not None else None
        self.batch_size = batch_size
        self.system = system
        self.governed = threads is None and env_threads() is None
        self.threads = threads or default_threads()  # fixed, or where a governed count starts
        self.n_ctx, self.parallel = n_ctx, parallel
        self.calls = 0
        self.tokens = 0
        self._loaded: Loaded | None = None
        self.drafter: NgramDrafter | None = None
        self.drafts = "none"  # what the drafter was built from, or why there is none (/health, benchmarks)
        self._draft_source: tuple[str, Callable[[], list[str]]] | None = None

    def draft_from(self, what: str, texts: Callable[[], list[str]]) -> None:
        """Speculative greedy decoding with drafts from an n-gram model of ``texts()`` (:mod:`memq.llm.draft`),
        built when the model loads. Outputs do not change, only the number of forward passes. ``what``
        names the texts. ``$MEMQ_LLAMA_DRAFT=0`` turns drafting off."""
        self._draft_source = (what, texts)
        if self._loaded is not None:
            self._build_drafter()

    def _build_drafter(self) -> None:
        if self._draft_source is None:
            return
        what, texts = self._draft_source
        self._draft_source = None
        if os.environ.get("MEMQ_LLAMA_DRAFT", "1") == "0":
            self.drafts = "none (MEMQ_LLAMA_DRAFT=0)"
            return
        start = time.perf_counter()
        try:
            plans = texts()[:MAX_TEXTS]
        except (MemQError, OSError) as exc:
            self.drafts = f"none ({what}: {exc})"
            logger.warning("no drafts for speculative decoding (decoding stays greedy, one token a pass): %s",
                           self.drafts)
            return
        tok, eos = self._loaded.tokenizer, self._loaded.runner.eos
        saved = cache_root() / "gguf" / "drafts" / f"{NgramDrafter.key(plans, self._loaded.tokenizer_key, eos)}.json"
        self.drafter = NgramDrafter.load(saved)
        if self.drafter is None:
            self.drafter = NgramDrafter((tok(t, add_special_tokens=False)["input_ids"] for t in plans), eos=eos)
            try:
                self.drafter.save(saved)
                what = f"{what} (model saved in {saved.parent.name}/)"
            except OSError as exc:  # a read-only cache: built again by the next process
                logger.warning("could not save the draft model in %s: %s", saved.parent, exc)
                what = f"{what} (model not saved: {exc.strerror or exc})"
        self.drafts = (f"{what}: {len(plans)} texts, {len(self.drafter)} contexts "
                       f"({time.perf_counter() - start:.2f} s)")
        logger.info("speculative decoding drafts from %s", self.drafts)

    @property
    def name(self) -> str:
        return self.model if self.adapter is None else f"{self.model}+{Path(self.adapter).name}"

    def load(self) -> Loaded:
        """Locate the GGUF, build the adapter GGUF and the tokenizer if not cached, load llama.cpp (once)."""
        if self._loaded is not None:
            return self._loaded
        reason = unavailable()
        if reason:
            raise LLMError(reason)
        prepared: list[tuple[str, float]] = []
        t0 = time.perf_counter()
        found = gguf_source(self.model)
        if found is None:
            raise LLMError(f"the llama.cpp backend needs a GGUF model: 'qwen2.5-coder-0.5b', 'smollm2' or a .gguf "
                           f"file, got {self.model!r}")
        name, gguf, digest = found
        if time.perf_counter() - t0 > 0.5:
            prepared.append((f"base GGUF {gguf.name} (assembled or hashed once)", time.perf_counter() - t0))
        adapter_path = None
        if self.adapter is not None:
            built = adapter_gguf(self.adapter, gguf, digest)
            adapter_path = built.path
            if built.built:
                prepared.append((f"GGUF LoRA adapter from {self.adapter} ({built.reason})", built.seconds))
        tok_dir, seconds = tokenizer_dir(name, gguf, digest)
        if seconds:
            prepared.append((f"tokenizer of {gguf.name} under {tok_dir.parent.name}/", seconds))
        tok = open_tokenizer(tok_dir)  # transformers' tokenizer and chat template, without importing transformers
        if self.weights != "shipped":  # the adapter and the tokenizer are the shipped file's; only the weights change
            _route_native_logs()  # the quantizer's per-tensor lines go to logging, not the terminal
            made = {"f16": f16_gguf, "bf16": bf16_gguf, "q8_0": q8_gguf}[self.weights]
            gguf, digest, seconds = made(gguf, digest)
            if seconds:
                prepared.append((f"base GGUF with {self.weights} weights ({gguf.name})", seconds))
        if adapter_path is not None and self.lora == "merged":
            gguf, digest, seconds = merged_gguf(gguf, digest, adapter_path, Path(self.adapter).name)
            adapter_path = None
            if seconds:
                prepared.append((f"base GGUF with the adapter merged in ({gguf.name})", seconds))
        self._loaded = Loaded(self._runner(gguf, digest, adapter_path), tok, gguf, adapter_path, prepared, tok_dir.name)
        self._build_drafter()
        return self._loaded

    def _runner(self, gguf: Path, digest: str, adapter: Path | None) -> Runner:
        key = (str(gguf), str(adapter), "governed" if self.governed else self.threads, self.n_ctx)
        with _LOCK:
            if key not in _LOADED:
                from llama_cpp import Llama

                _route_native_logs()
                start = time.perf_counter()
                governor = ThreadGovernor() if self.governed else None  # its first window spans the load
                with no_repacking(self.weights != "f16"), with_sequences(sequences_from_env()):
                    llama = Llama(model_path=str(gguf), lora_path=str(adapter) if adapter else None, n_ctx=self.n_ctx,
                                  n_batch=512, n_ubatch=512, n_threads=self.threads, n_threads_batch=self.threads,
                                  verbose=False)
                if governor is not None and governor.note:
                    logger.warning("llama.cpp threads: %s", governor.note)
                _LOADED[key] = Runner(llama, llama.n_batch, state_dir(digest, adapter, self.n_ctx), governor)
                logger.info("llama.cpp loaded %s%s in %.1f s", gguf.name, f" + {adapter}" if adapter else "",
                            time.perf_counter() - start)
            return _LOADED[key]

    def format(self, prompt: str, chat: bool = True) -> str:
        """The text the model sees for ``prompt`` (chat template applied when ``chat``), as LocalLLM builds it."""
        return chat_text(self.load().tokenizer, prompt, self.system) if chat else prompt

    def _ids(self, text: str, chat: bool) -> list[int]:
        return list(self.load().tokenizer(text, add_special_tokens=not chat)["input_ids"])

    def generate(self, prompts: list[str], max_new_tokens: int = 64, stop: list[str] | None = None,
                 chat: bool = True, require: list[tuple[str, ...]] | None = None) -> list[str]:
        check_generate_args(prompts, max_new_tokens)
        if not prompts:
            return []
        loaded = self.load()
        tok, runner = loaded.tokenizer, loaded.runner
        if require is not None or (self.parallel > 1 and len(prompts) > 1):  # memq.llm.parallel
            return generate_texts(self, prompts, max_new_tokens, stop, chat, require)
        out = []
        for prompt in prompts:
            ids = self._ids(self.format(prompt, chat), chat)
            if len(ids) + max_new_tokens > runner.n_ctx:
                raise LLMError(f"prompt of {len(ids)} tokens + max_new_tokens {max_new_tokens} exceeds the llama.cpp "
                               f"context of {runner.n_ctx}; pass a larger n_ctx")
            with runner.lock:
                new = self._greedy(runner, tok, ids, max_new_tokens, stop, self.drafter)
            kept = [t for t in new if t != tok.pad_token_id]
            self.tokens += len(kept)
            out.append(cut_at_stop(tok.decode(kept, skip_special_tokens=True), stop).strip())
        self.calls += len(prompts)
        return out

    @staticmethod
    def _greedy(runner: Runner, tok, ids: list[int], max_new_tokens: int, stop: list[str] | None,
                drafter: NgramDrafter | None = None) -> list[int]:
        """Greedy decoding up to EOS, ``max_new_tokens`` or a stop string; with a ``drafter``, each pass also checks
        drafted tokens and keeps those that greedy decoding would have chosen (the same tokens, fewer passes)."""
        def done(new: list[int]) -> bool:
            return new[-1] == runner.eos or bool(stop and any(s in tok.decode(new, skip_special_tokens=True)
                                                              for s in stop if s))

        return runner.greedy(ids, max_new_tokens, done, drafter)[0]

    def score(self, prompt: str, continuations: list[str], chat: bool = True) -> list[float]:
        """Log-likelihood (natural log, summed over tokens) of each continuation after ``prompt``.

        The prompt is formatted as for :meth:`generate`; each continuation is tokenized on its own (no special
        tokens) and appended to the prompt's tokens. The prompt is evaluated once and kept in the KV cache."""
        if not isinstance(continuations, list) or not all(isinstance(c, str) and c for c in continuations):
            raise LLMError(f"continuations must be a list of non-empty str, got {continuations!r}")
        loaded = self.load()
        prompt_ids = self._ids(self.format(prompt, chat), chat)
        scores = []
        for text in continuations:
            cont = list(loaded.tokenizer(text, add_special_tokens=False)["input_ids"])
            with loaded.runner.lock:
                rows = loaded.runner.logits(prompt_ids + cont, len(prompt_ids))[:-1]
            scores.append(float(log_softmax_at(rows, cont).sum()))
        self.calls += 1
        return scores

    # -- token-level access for the grounded planner (memq.plan.grounded) ---------------------------------
    def prompt_ids(self, prompt: str, chat: bool = True) -> list[int]:
        """The token ids the model sees for ``prompt`` (as :meth:`generate` and :meth:`score` feed it)."""
        return self._ids(self.format(prompt, chat), chat)

    def token_ids(self, text: str) -> list[int]:
        """``text`` tokenized on its own, without special tokens."""
        return list(self.load().tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: list[int]) -> str:
        return self.load().tokenizer.decode(ids, skip_special_tokens=True)

    @property
    def eos_id(self) -> int:
        return self.load().runner.eos

    @property
    def counters(self) -> tuple[int, int]:
        """(forward passes, tokens evaluated) of this model's llama.cpp context so far (shared per process)."""
        runner = self.load().runner
        return runner.decodes, runner.decoded

    @property
    def thread_passes(self) -> dict[int, int]:
        """Forward passes so far on each thread count, when the count is governed (shared per process); else {}."""
        return dict(self.load().runner.passes_by_threads)

    @property
    def governor(self):
        """The :class:`~memq.llm.threads.ThreadGovernor` that sets this model's thread count, or None when it is
        fixed (shared per process)."""
        return self.load().runner.governor

    def expand(self, ids: list[int], first: int, children) -> tuple[np.ndarray, np.ndarray]:
        """(log p of each of ``ids[first:]`` given the tokens before it, log p of each token of ``children``
        after all of ``ids``), from one forward pass over what ``ids`` does not share with the KV cache
        (the :class:`~memq.plan.linesearch.LineModel` role)."""
        runner = self.load().runner
        with runner.lock:
            out = drive(expand_steps(ids, first, children), lambda request: runner.logits(*request))
        self.calls += 1
        return out

    def together(self, searches: list) -> list:
        """Line searches together, a forward pass for each one's next request (:mod:`memq.llm.together`)."""
        return run_together(self, searches)

    @property
    def sequences(self) -> int:
        """The sequences of the model's context: line searches answered in one forward pass ($MEMQ_LLAMA_SEQUENCES)."""
        return self.load().runner.sequences

    def greedy(self, ids: list[int], max_new_tokens: int) -> tuple[list[int], list[float]]:
        """Greedy continuation of ``ids`` up to the end of the line: a token holding a newline, EOS, or
        ``max_new_tokens``; the new tokens and the log-probability of each. Drafted tokens are checked as in
        :meth:`generate` (the same tokens, fewer passes)."""
        loaded = self.load()
        runner, done = loaded.runner, line_end(loaded.runner, loaded.tokenizer)
        with runner.lock:
            new, lps = runner.greedy(ids, max_new_tokens, done, self.drafter, logprobs=True)
        self.tokens += len(new)
        self.calls += 1
        return new, lps


@atexit.register
def close_models() -> None:
    """Free every loaded model and its contexts (the describer's parallel ones first) while llama_cpp can (its own
    finalizers print a traceback at exit); one still decoding on another thread after ``CLOSE_WAIT`` s is left."""
    close_decoders(CLOSE_WAIT)
    with _LOCK:
        runners = list(_LOADED.values())
        _LOADED.clear()
    for runner in runners:
        close_when_free(runner.lock, runner.llama.close, CLOSE_WAIT)


def make_llm(backend: str, model: str, *, adapter: str | None = None, device: str = "cpu", batch_size: int = 8,
             system: str | None = None, threads: int | None = None, parallel: int = 1, weights: str | None = None,
             lora: str | None = None):
    """``(llm, fallback)``: a LlamaCppLLM for ``backend="llamacpp"`` (``weights`` and ``lora`` default to
    ``$MEMQ_LLAMA_WEIGHTS`` and ``$MEMQ_LLAMA_LORA``), a LocalLLM for ``"transformers"``.

    When llama.cpp cannot run ``model`` here (llama-cpp-python not importable, a device other than the CPU,
    a model that is not a GGUF file), the LocalLLM comes back with ``fallback`` saying why; else it is None."""
    from .base import LocalLLM

    if backend not in ("llamacpp", "transformers"):
        raise LLMError(f"unknown backend {backend!r}; expected llamacpp or transformers")
    note = None
    if backend == "llamacpp":
        if device != "cpu":
            why = f"device {device!r}: memq runs llama.cpp on the CPU only"
        elif not (model in ("qwen2.5-coder-0.5b", "qwen", "smollm2") or model.endswith(".gguf")):
            why = f"model {model!r} is not a GGUF file"
        else:
            why = unavailable()
        if why is None:
            return LlamaCppLLM(model, adapter=adapter, batch_size=batch_size, system=system, threads=threads,
                               parallel=parallel, weights=weights, lora=lora), None
        note = f"backend llamacpp -> transformers: {why}"
        logger.warning(note)
    return LocalLLM(model, device=device, adapter=adapter, batch_size=batch_size, system=system), note
