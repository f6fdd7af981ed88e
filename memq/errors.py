"""One error hierarchy for memq.

Every error names the bad value and where it came from. The CLI turns a
``MemQError`` into one line on stderr and a non-zero exit code.
"""

from __future__ import annotations


class MemQError(Exception):
    """Base class of every error memq raises on purpose."""


class SparqlParseError(MemQError, ValueError):
    """A SPARQL query could not be parsed.

    ``line`` and ``column`` (1-based) say where, when known.
    """

    def __init__(self, message: str, *, query: str = "", line: int | None = None,
                 column: int | None = None) -> None:
        where = f" at line {line}, column {column}" if line is not None else ""
        super().__init__(f"{message}{where}")
        self.query = query
        self.line = line
        self.column = column


class DecompositionError(MemQError):
    """A parsed query graph could not be split into statements."""


class PlanParseError(MemQError, ValueError):
    """Planner output held no readable step."""


class ReconstructionError(MemQError):
    """Recalled statements could not be assembled into one query."""


class KnowledgeGraphError(MemQError):
    """A store or endpoint failed; the message names the URL or the query."""


class MemoryBankError(MemQError):
    """A memory bank is missing, corrupt, or built with another embedder."""


class EntityIndexError(MemQError):
    """An entity index is missing, corrupt, or was built from another KG."""


class LinkingError(MemQError):
    """No topic entity could be found for a question, or none the caller named is in the KG."""
