"""Build a memory bank: statements from a source, described, embedded, saved.

Sources (:func:`source_statements`):

* ``webqsp-train``: the WebQSP train questions' gold queries through
  :func:`memq.decompose.decompose_dataset`;
* ``cwq-train``: the 30,403 CWQ train+dev queries; ``exclude_webqtest=True``
  drops the 9,203 whose id starts with ``WebQTest-`` (built from WebQSP test
  questions) for a memory that is evaluated on WebQSP test;
* ``schema``: the Freebase schema alone (:mod:`.schema_source`).

No test query ever enters a memory: :func:`assert_no_test_queries` checks the
question ids against the WebQSP and CWQ test splits and raises otherwise.

The build resumes: every described statement is appended (one JSON line,
flushed) to ``describe.cache.jsonl`` in the output directory, keyed by
statement id and the describer's prompt hash. A killed build, run again,
describes only what is missing.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

from memq.describe.base import Described, Describer, describe_with_info
from memq.describe.llm import FALLBACK as LLM_FALLBACK
from memq.errors import MemoryBankError, MemQError
from memq.types import STRUCTURES, MemoryRecord, Statement

from .bank import MemoryBank
from .embed import Embedder
from .schema_source import SchemaSourceConfig, schema_statements

logger = logging.getLogger(__name__)

# sources made of training questions' gold queries (grailqa-synthetic: GrailQA's 6,184 synthetic programs, the 1,299
# the GrailQA planner learnt from and those whose mids have no name, memq.plan.data.grailqa_synthetic)
GOLD_SOURCES = ("webqsp-train", "cwq-train", "grailqa-train", "grailqa-synthetic")
SOURCES = (*GOLD_SOURCES, "schema")
CACHE = "describe.cache.jsonl"


@dataclass(frozen=True)
class SourceConfig:
    """``exclude_webqtest``: for ``cwq-train``, drop the items built from WebQSP test questions."""

    exclude_webqtest: bool = False
    schema: SchemaSourceConfig = SchemaSourceConfig()


@lru_cache(maxsize=1)
def _test_ids() -> frozenset[str]:
    from memq.datasets import load

    return frozenset(q.id for q in load("webqsp", "test")) | frozenset(q.id for q in load("cwq", "test"))


def assert_no_test_queries(question_ids, source: str) -> None:
    """Raise if any id belongs to the WebQSP or CWQ test split."""
    leaked = sorted(set(question_ids) & _test_ids())
    if leaked:
        raise MemQError(f"source {source!r} holds {len(leaked)} test question(s), e.g. {leaked[0]!r}; "
                        "a memory never holds test queries")


def gold_questions(name: str, config: SourceConfig = SourceConfig()) -> list:
    """The gold (question, SPARQL) questions of the source ``name``, read once a process: a pipeline's first linked
    question reads its bank's training questions three times (the question prior, the constraint suggester, the
    order entities are listed in), about 1 s more without the cache (35 MB kept for CWQ's train questions)."""
    return list(_gold_questions(name, config))


@lru_cache(maxsize=4)
def _gold_questions(name: str, config: SourceConfig) -> tuple:
    from memq.datasets import load

    if name == "webqsp-train":
        questions = load("webqsp", "train")
    elif name == "cwq-train":
        questions = load("cwq", "train")
        if config.exclude_webqtest:
            questions = [q for q in questions if not q.id.startswith("WebQTest-")]
    elif name == "grailqa-train":
        questions = load("grailqa", "train")  # the 1,000 real train questions; never the dev ones
    elif name == "grailqa-synthetic":
        from memq.plan.data import grailqa_synthetic

        questions = grailqa_synthetic(named=False)  # all of them, in GrailQA's SPARQL form
    else:
        raise ValueError(f"unknown gold source {name!r}; expected one of {', '.join(GOLD_SOURCES)}")
    assert_no_test_queries((q.id for q in questions), name)
    return tuple(questions)


def source_statements(name: str, config: SourceConfig = SourceConfig()) -> list[Statement]:
    """The statements of one source (deduplicated, stable order)."""
    if name not in SOURCES:
        raise ValueError(f"unknown source {name!r}; expected one of {', '.join(SOURCES)}")
    if name == "schema":
        return schema_statements(config.schema)
    from memq.decompose import decompose_dataset

    questions = gold_questions(name, config)
    statements = decompose_dataset(questions)
    assert_no_test_queries((i for s in statements for i in s.question_ids), name)
    logger.info("%s: %d questions -> %d statements", name, len(questions), len(statements))
    return statements


def merge_sources(named: dict[str, list[Statement]]) -> tuple[list[Statement], list[tuple[str, ...]]]:
    """Statements of several sources, deduplicated by id (question ids merged), with their sources."""
    merged: dict[str, Statement] = {}
    srcs: dict[str, set[str]] = {}
    for source, statements in named.items():
        for s in statements:
            if s.id in merged:
                old = merged[s.id]
                ids = tuple(sorted(set(old.question_ids) | set(s.question_ids)))
                merged[s.id] = Statement(old.id, old.structure, old.sparql, old.relations, ids)
            else:
                merged[s.id] = s
            srcs.setdefault(s.id, set()).add(source)
    order = sorted(merged, key=lambda i: (STRUCTURES.index(merged[i].structure), i))
    return [merged[i] for i in order], [tuple(sorted(srcs[i])) for i in order]


# --------------------------------------------------------------------------- resumable describing

def read_cache(path: Path, prompt_hash: str) -> dict[str, Described]:
    """Cached descriptions for ``prompt_hash``; unreadable lines (a killed write) are skipped."""
    out: dict[str, Described] = {}
    if not path.exists():
        return out
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            try:
                obj = json.loads(line)
                if obj["prompt_hash"] == prompt_hash:
                    out[obj["id"]] = Described(tuple(obj["descriptions"]), obj["describer"], obj.get("fallback"),
                                               int(obj.get("attempts", 0)))
            except (ValueError, KeyError, TypeError, MemQError):
                logger.warning("%s: line %d unreadable, ignored", path, n)
    return out


def describe_resumable(statements: list[Statement], describer: Describer, cache_path: Path, *,
                       chunk_size: int = 32, progress: Callable[[int], None] | None = None) -> list[Described]:
    """Describe ``statements``, reusing and appending to the cache file at ``cache_path``."""
    prompt_hash = describer.prompt_hash
    done = read_cache(cache_path, prompt_hash)
    todo = [s for s in statements if s.id not in done]
    if progress is not None and len(statements) - len(todo):
        progress(len(statements) - len(todo))
    if todo:
        logger.info("describing %d statements (%d cached)", len(todo), len(statements) - len(todo))
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        needs_newline = cache_path.exists() and cache_path.stat().st_size > 0 and \
            not cache_path.read_bytes().endswith(b"\n")
        with open(cache_path, "a", encoding="utf-8") as fh:
            if needs_newline:
                fh.write("\n")
            for start in range(0, len(todo), chunk_size):
                chunk = todo[start:start + chunk_size]
                for s, d in zip(chunk, describe_with_info(describer, chunk), strict=True):
                    done[s.id] = d
                    fh.write(json.dumps({"id": s.id, "prompt_hash": prompt_hash, "describer": d.describer,
                                         "fallback": d.fallback, "attempts": d.attempts,
                                         "descriptions": list(d.descriptions)},
                                        ensure_ascii=False) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
                if progress is not None:
                    progress(len(chunk))
    return [done[s.id] for s in statements]


# --------------------------------------------------------------------------- the builder

@dataclass(frozen=True)
class BuildConfig:
    """``chunk_size``: statements described between cache flushes. ``keep_cache``: leave
    ``describe.cache.jsonl`` in the output directory after a successful build."""

    chunk_size: int = 32
    keep_cache: bool = True
    embed_batch: int = 512
    progress: bool = True
    index_type: str = "flat"  # flat, fp16 or sq8 (MemoryBank.compacted)
    descriptions: int | None = None  # at most this many descriptions a statement, the first ones (None: all)
    compress: bool = False  # statements.jsonl.gz
    include: tuple[str, ...] = ()  # banks that loading this one adds, relative to it (the manifest's include)


def _bar(total: int, desc: str, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="st" if desc == "describe" else "desc", disable=not enabled,
                dynamic_ncols=True)


def validity(described: list[Described]) -> dict[str, int] | None:
    """Of the statements an LLM was asked about: valid at the first answer, valid after a retry, and
    described by the template after invalid answers. None when no LLM was asked."""
    asked = [d for d in described if d.attempts > 0]
    if not asked:
        return None
    fell = sum(1 for d in asked if (d.fallback or "").startswith(LLM_FALLBACK))
    first = sum(1 for d in asked if d.attempts == 1 and not (d.fallback or "").startswith(LLM_FALLBACK))
    return {"valid_first": first, "valid_retry": len(asked) - fell - first, "fallback": fell}


def describer_info(describer: Describer, described: list[Described]) -> dict:
    """The manifest's ``describer``: name and prompt hash; for an LLM describer also how it ran
    (``runtime``: backend, threads, the backend fallback that fired) and ``validity``."""
    info: dict = {"name": describer.name, "prompt_hash": describer.prompt_hash}
    runtime = getattr(describer, "runtime", None)
    if isinstance(runtime, dict):
        info["runtime"] = runtime
    counts = validity(described)
    if counts is not None:
        info["validity"] = counts
    return info


def build_memory(statements: list[Statement], describer: Describer, embedder: Embedder, out: str | Path, *,
                 sources: list[tuple[str, ...]] | None = None, source_info: dict | None = None,
                 config: BuildConfig = BuildConfig()) -> MemoryBank:
    """Describe (resumably), embed, save to ``out``; return the bank."""
    if not statements:
        raise MemoryBankError("no statements to build a memory from")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cache_path = out / CACHE
    with _bar(len(statements), "describe", config.progress) as bar:
        described = describe_resumable(statements, describer, cache_path, chunk_size=config.chunk_size,
                                       progress=bar.update)
    if config.descriptions is not None and config.descriptions < 1:
        raise MemoryBankError(f"descriptions must be >= 1, got {config.descriptions}")
    records = [MemoryRecord(s, d.descriptions[:config.descriptions], d.describer, d.fallback)
               for s, d in zip(statements, described, strict=True)]
    info = {"describer": describer_info(describer, described), "source": source_info or {}}
    if config.descriptions is not None:
        info["describer"]["kept_descriptions"] = config.descriptions
    total = len({d for r in records for d in r.descriptions})  # each distinct text is embedded once
    with _bar(total, "embed", config.progress) as bar:
        bank = MemoryBank.build(records, embedder, sources=sources, info=info, batch_size=config.embed_batch,
                                progress=bar.update, index_type=config.index_type)
    bank.save(out, compress=config.compress, include=config.include)
    if not config.keep_cache:
        cache_path.unlink(missing_ok=True)
    return bank


def build_from_sources(names: list[str], describer: Describer, embedder: Embedder, out: str | Path, *,
                       source_config: SourceConfig = SourceConfig(),
                       config: BuildConfig = BuildConfig()) -> MemoryBank:
    """:func:`build_memory` over the union of the named sources."""
    if not names:
        raise ValueError("name at least one source")
    named = {n: source_statements(n, source_config) for n in dict.fromkeys(names)}
    statements, sources = merge_sources(named)
    info = {"names": list(named), "config": asdict(source_config),
            "statements_per_source": {n: len(v) for n, v in named.items()}}
    return build_memory(statements, describer, embedder, out, sources=sources, source_info=info, config=config)
