"""memq: question answering over knowledge graphs by memory-augmented query reconstruction."""

from __future__ import annotations

__version__ = "0.1.0"


def answer(question, entities=None, *, config=None, plan=None):
    """Answer ``question`` about ``entities`` (linked from the question when left out); see :func:`memq.api.answer`."""
    from .api import answer as _answer

    return _answer(question, entities, config=config, plan=plan)


__all__ = ["__version__", "answer"]
