"""LLMDescriber: the paper's few-shot prompts (Tables 6-8) through any text generator.

The generator is anything with ``generate(prompts, max_new_tokens, stop,
chat) -> list[str]``: :class:`memq.llm.LocalLLM` (Qwen2.5-Coder-0.5B-Instruct
on this machine's CPU) or :class:`memq.llm.OpenAIChat` (any OpenAI-compatible
endpoint; the API key is read from the environment variable it names).

On this machine's CPU the generator is :class:`memq.llm.llamacpp.LlamaCppLLM` with several prompts decoded
together (``parallel``), and :class:`memq.llm.LocalLLM` (transformers) when llama.cpp cannot run; the CLI
(``memq memory build --describer local``) records which in the bank's manifest (:attr:`LLMDescriber.runtime`).

For each structure 1/2/3 statement:

1. render the prompt of its structure (:mod:`.prompts`), generate greedily;
2. clean and validate the answer (:mod:`.validate`);
3. on an invalid answer, retry ONCE with a hint appended to the prompt; where the generator can constrain its
   decoding (``generate(..., require=...)``, :class:`memq.llm.llamacpp.LlamaCppLLM`), the retry may not end
   before it mentions the variables it must (``?entity1``): greedy decoding continues past the line or
   sentence end the model wanted (``retry: "constrained"`` in :attr:`LLMDescriber.runtime`; else ``"hint"``);
4. if the retry is invalid too, use the template description and record
   ``fallback = "llm-invalid->template"`` on the statement.

"filter" and "order" statements have no prompt in the paper: they are always
described by the template describer and carry ``describer = "template"`` (that
is the design, not a fallback).
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import asdict, dataclass
from typing import Protocol

from memq.types import Statement

from .base import Described, config_hash
from .prompts import PROMPTS, RETRY_HINT, render
from .template import TemplateDescriber
from .validate import clean, problem, required_vars

logger = logging.getLogger(__name__)

FALLBACK = "llm-invalid->template"
STOP = ["\n", "###"]


class Generator(Protocol):
    def generate(self, prompts: list[str], max_new_tokens: int = 64,
                 stop: list[str] | None = None, chat: bool = True) -> list[str]: ...


@dataclass(frozen=True)
class LLMDescriberConfig:
    """``max_new_tokens`` bounds each answer (40 is enough for one sentence; CPU runs ~6 tok/s).

    ``retries``: extra attempts after an invalid answer (the paper-free default is 1).
    ``chat``: apply the model's chat template. ``with_template``: keep the
    template descriptions after the LLM's (more ways to be recalled).
    """

    max_new_tokens: int = 40
    retries: int = 1
    chat: bool = True
    with_template: bool = False


class LLMDescriber:
    """Describes statements with an LLM, validated, falling back to the template (recorded)."""

    def __init__(self, generator: Generator, config: LLMDescriberConfig = LLMDescriberConfig(),
                 template: TemplateDescriber | None = None, model_name: str | None = None,
                 backend_fallback: str | None = None) -> None:
        if not callable(getattr(generator, "generate", None)):
            raise TypeError(f"generator must have a generate(prompts, ...) method, got {type(generator).__name__}")
        if config.max_new_tokens < 1 or config.retries < 0:
            raise ValueError(f"bad LLMDescriberConfig {config}")
        self.generator = generator
        self.config = config
        self.template = template or TemplateDescriber()
        self.model_name = model_name or str(getattr(generator, "name", type(generator).__name__))
        self.name = f"llm:{self.model_name}"
        #: why the generator is not the backend asked for (``memq.llm.llamacpp.make_llm``'s note), or None.
        self.backend_fallback = backend_fallback
        #: "constrained" when the generator takes ``require`` (the retry must mention its variables), else "hint".
        self.retry_mode = "constrained" if _takes_require(generator) else "hint"
        self.stats = {"prompts": 0, "valid_first": 0, "valid_retry": 0, "fallback": 0}
        #: (statement id, attempt, reason, answer) of every rejected answer, for inspection.
        self.rejected: list[tuple[str, int, str, str]] = []

    @property
    def prompt_hash(self) -> str:
        return config_hash({"describer": "llm", "model": self.model_name, "prompts": PROMPTS,
                            "retry": [RETRY_HINT, self.retry_mode], "stop": STOP,
                            "template": self.template.prompt_hash, **asdict(self.config)})

    @property
    def runtime(self) -> dict:
        """How the generator runs, for a bank's manifest: its backend, threads, sequences decoded together,
        weights or device where it has them, and the backend fallback that fired (None when none did)."""
        g = self.generator
        info: dict = {"backend": str(getattr(g, "backend", type(g).__name__))}
        for key in ("threads", "parallel", "weights", "device"):
            value = getattr(g, key, None)
            if value is not None:
                info[key] = value
        info["retry"] = self.retry_mode
        info["fallback"] = self.backend_fallback
        return info

    def describe(self, statements: list[Statement]) -> list[list[str]]:
        return [list(d.descriptions) for d in self.describe_with_info(statements)]

    def describe_with_info(self, statements: list[Statement]) -> list[Described]:
        out: list[Described | None] = [None] * len(statements)
        todo = [i for i, s in enumerate(statements) if s.structure in PROMPTS]
        for i, s in enumerate(statements):
            if s.structure not in PROMPTS:
                out[i] = self.template.describe_one(s)
        answers: dict[int, str] = {}
        attempts = dict.fromkeys(todo, 0)
        for attempt in range(self.config.retries + 1):
            if not todo:
                break
            prompts = [render(statements[i].structure, statements[i].sparql, retry=attempt > 0) for i in todo]
            kwargs = {}
            if attempt > 0 and self.retry_mode == "constrained":
                kwargs["require"] = [required_vars(statements[i].structure)[1] for i in todo]
            raw = self.generator.generate(prompts, max_new_tokens=self.config.max_new_tokens,
                                          stop=STOP, chat=self.config.chat, **kwargs)
            self.stats["prompts"] += len(prompts)
            if len(raw) != len(prompts):
                raise ValueError(f"generator returned {len(raw)} answers for {len(prompts)} prompts")
            failed = []
            for i, text in zip(todo, raw, strict=True):
                attempts[i] += 1
                text = clean(text)
                why = problem(text, statements[i].structure)
                if why is None:
                    answers[i] = text
                    self.stats["valid_first" if attempt == 0 else "valid_retry"] += 1
                else:
                    logger.debug("statement %s attempt %d invalid (%s): %r", statements[i].id, attempt, why, text)
                    self.rejected.append((statements[i].id, attempt, why, text))
                    failed.append(i)
            todo = failed
        for i, s in enumerate(statements):
            if out[i] is not None:
                continue
            tmpl = self.template.describe_one(s)
            if i in answers:
                extra = tmpl.descriptions if self.config.with_template else ()
                out[i] = Described(tuple(dict.fromkeys((answers[i],) + extra)), self.name, None, attempts[i])
            else:
                self.stats["fallback"] += 1
                why = FALLBACK if tmpl.fallback is None else f"{FALLBACK},{tmpl.fallback}"
                out[i] = Described(tmpl.descriptions, tmpl.describer, why, attempts[i])
        return [d for d in out if d is not None]


def _takes_require(generator) -> bool:
    """Whether ``generator.generate`` has a ``require`` parameter (constrained decoding)."""
    try:
        return "require" in inspect.signature(generator.generate).parameters
    except (TypeError, ValueError):
        return False
