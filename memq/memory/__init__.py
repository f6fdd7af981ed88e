"""memory: embed statement descriptions, index them with FAISS, persist and search.

>>> bank = MemoryBank.load("memory_bank/webqsp")           # doctest: +SKIP
>>> bank.search("Find the spouse of Richard Nixon", k=3)    # doctest: +SKIP
[(MemoryRecord(...), '?entity2 is the spouse of the spouse of the person ?entity1', 0.71), ...]

* :class:`MemoryBank`: records + IndexFlatIP, one hit per statement; a
  verified directory on disk (manifest, statements.jsonl, index.faiss).
* :class:`MiniLMEmbedder` (all-MiniLM-L6-v2, offline) and
  :class:`HashingEmbedder` (tests).
* :func:`build_from_sources` / :func:`build_memory`: resumable builds.
"""

from .bank import MemoryBank
from .build import (
    SOURCES,
    BuildConfig,
    SourceConfig,
    assert_no_test_queries,
    build_from_sources,
    build_memory,
    source_statements,
)
from .embed import Embedder, HashingEmbedder, MiniLMEmbedder, embedder_for
from .schema_source import SchemaSourceConfig, schema_statements

__all__ = [
    "SOURCES", "BuildConfig", "Embedder", "HashingEmbedder", "MemoryBank", "MiniLMEmbedder", "SchemaSourceConfig",
    "SourceConfig", "assert_no_test_queries", "build_from_sources", "build_memory", "embedder_for",
    "schema_statements", "source_statements",
]
