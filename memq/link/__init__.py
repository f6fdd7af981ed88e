"""Entity linking: questions without Freebase ids.

:mod:`memq.link.index` builds an :class:`~memq.link.index.EntityIndex` once per knowledge graph (names, aliases,
a degree prior; a directory with a manifest and sha256 like a memory bank); :mod:`memq.link.linker` finds the
question's mentions in it and ranks their candidates; :mod:`memq.link.resolve` turns what a caller gave (nothing,
names alone, ids with names) into the topic entities the pipeline answers about, every fallback traced.
"""

from __future__ import annotations

from importlib import import_module

_LAZY = {
    "EntityIndex": "memq.link.index", "build_index": "memq.link.index", "normalize": "memq.link.index",
    "Linker": "memq.link.linker", "LinkConfig": "memq.link.linker", "Link": "memq.link.linker",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'memq.link' has no attribute {name!r}")
