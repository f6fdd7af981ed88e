"""A model's tokenizer and chat template without transformers, for the llama.cpp backend.

Importing transformers (and with it torch) costs a fresh process about 3 s, more than llama.cpp takes to load
the planner. Everything the llama.cpp backend needs from a tokenizer is in the directory that transformers saves
(``tokenizer.json``, ``tokenizer_config.json``, ``chat_template.jinja``): the ``tokenizers`` library runs the
tokenizer that transformers' fast tokenizer wraps, and the chat template is a Jinja template that transformers
renders with a sandboxed ``jinja2`` environment. :class:`ChatTokenizer` does the same two things with the same
settings, and ``tests/test_chat_tokenizer.py`` checks ids, decoded text and chat text against transformers.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from .base import LLMError

SPECIAL = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def _token_text(value) -> str | None:
    """A special token as tokenizer_config.json writes it: a string or an AddedToken dict."""
    if isinstance(value, dict):
        return value.get("content")
    return value if isinstance(value, str) else None


class ChatTokenizer:
    """The part of a transformers fast tokenizer that memq's llama.cpp backend calls: ``tok(text,
    add_special_tokens=...)["input_ids"]``, ``decode``, ``apply_chat_template`` and the special tokens."""

    def __init__(self, directory: str | Path) -> None:
        from tokenizers import Tokenizer

        self.directory = directory = Path(directory)
        try:
            self._tok = Tokenizer.from_file(str(directory / "tokenizer.json"))
            config = json.loads((directory / "tokenizer_config.json").read_text())
        except Exception as exc:  # OSError, ValueError; tokenizers raises a bare Exception on a bad file
            raise LLMError(f"cannot read the tokenizer in {directory}: {exc}") from exc
        template_file = directory / "chat_template.jinja"
        self.chat_template = template_file.read_text() if template_file.is_file() else config.get("chat_template")
        self.special = {k: t for k in SPECIAL if (t := _token_text(config.get(k))) is not None}
        if "pad_token" not in self.special and "eos_token" in self.special:
            self.special["pad_token"] = self.special["eos_token"]
        self._template = None

    def __getattr__(self, name: str):
        if name in SPECIAL:
            return self.__dict__["special"].get(name)
        if name.endswith("_token_id") and name[:-3] in SPECIAL:
            token = self.__dict__["special"].get(name[:-3])
            return None if token is None else self._tok.token_to_id(token)
        raise AttributeError(name)

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        return {"input_ids": self._tok.encode(text, add_special_tokens=add_special_tokens).ids}

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def apply_chat_template(self, messages: list[dict], tokenize: bool = False,
                            add_generation_prompt: bool = False) -> str:
        """The chat text for ``messages``, rendered as transformers renders it (``tokenize`` must be False)."""
        if tokenize:
            raise LLMError("ChatTokenizer.apply_chat_template renders text only; tokenize it with the call")
        if not self.chat_template:
            raise LLMError("this tokenizer has no chat template")
        if self._template is None:
            self._template = _compile(self.chat_template)
        return self._template.render(messages=messages, tools=None, documents=None,
                                     add_generation_prompt=add_generation_prompt, **self.special)


def open_tokenizer(directory: str | Path):
    """A :class:`ChatTokenizer` for ``directory``; transformers' own tokenizer when its ``tokenizer_config.json``
    asks for ``clean_up_tokenization_spaces``, a decoding rule transformers applies by tokenizer type that
    ChatTokenizer does not reproduce (neither bundled model sets it)."""
    try:
        config = json.loads((Path(directory) / "tokenizer_config.json").read_text())
    except (OSError, ValueError):
        config = {}  # ChatTokenizer names the unreadable file
    if not config.get("clean_up_tokenization_spaces"):
        return ChatTokenizer(directory)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(directory))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def _compile(template: str):
    """A Jinja template in the environment transformers renders chat templates in."""
    import jinja2
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    try:
        return env.from_string(template)
    except jinja2.TemplateError as exc:
        raise LLMError(f"the chat template does not compile outside transformers: {exc}") from exc
