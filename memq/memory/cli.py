"""``memq memory ...``: build, inspect and summarise memory banks.

    memq memory build --source webqsp-train --describer template --out memory_bank/webqsp
    memq memory inspect memory_bank/webqsp "Find the spouse of Richard Nixon" -k 5 [--json]
    memq memory stats memory_bank/webqsp [--json]
    memq memory compact memory_bank/webqsp+schema --index sq8 --out memory_bank/webqsp+schema-sq8
    memq memory merge memory_bank/cwq memory_bank/webqsp+schema --only-source schema --out memory_bank/cwq+schema
    memq memory build --source grailqa-train --source schema --schema-form grailqa --schema-domains grailqa \
        --include-base --out memory_bank/grailqa+schema
    memq memory merge memory_bank/webqsp-llm memory_bank/webqsp --descriptions --out memory_bank/webqsp-mixed
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from memq.errors import MemQError

from .bank import INDEX_TYPES
from .build import SOURCES

DESCRIBERS = ("template", "local", "openai")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("memory", help="build, inspect and summarise memory banks")
    cmds = p.add_subparsers(dest="memory_command", required=True)

    b = cmds.add_parser("build", help="build a memory bank from a source")
    b.add_argument("--source", action="append", choices=SOURCES, required=True,
                   help="statement source (repeat to merge several)")
    b.add_argument("--describer", choices=DESCRIBERS, default="template")
    b.add_argument("--out", required=True, help="output directory (resumes if it holds a describe cache)")
    b.add_argument("--no-progress", action="store_true", help="no progress bars")
    b.add_argument("--exclude-webqtest", action="store_true",
                   help="cwq-train: drop items built from WebQSP test questions (ids WebQTest-*)")
    b.add_argument("--include-base", action="store_true", help="schema: keep the base./user./freebase. domains")
    b.add_argument("--schema-form", choices=("webqsp", "grailqa"), default="webqsp",
                   help="schema: grailqa writes class statements, CVT statements with their class and each CVT "
                        "hop in both directions, and no WebQSP time filters")
    b.add_argument("--schema-domains", default=None,
                   help="schema: only these domains, comma-separated, or 'grailqa' for GrailQA's ontology (its "
                        "domains, and the common.image and common.topic items it lists)")
    b.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm")
    b.add_argument("--threads", type=int, default=None, help="torch CPU threads for embedding")
    b.add_argument("--index", choices=INDEX_TYPES, default="flat",
                   help="how the index stores vectors: flat float32, fp16 (half) or sq8 (a quarter; docs/memory.md)")
    b.add_argument("--descriptions", type=int, default=None, metavar="N",
                   help="keep at most the first N descriptions of each statement (the schema bank keeps 1)")
    b.add_argument("--compress", action="store_true", help="write statements.jsonl.gz")
    b.add_argument("--include", action="append", default=[], metavar="DIR",
                   help="another bank that loading this one adds, as a path relative to --out (e.g. ../schema)")
    b.add_argument("--keep-cache", action=argparse.BooleanOptionalAction, default=None,
                   help="keep describe.cache.jsonl (default: yes for LLM describers, no for template)")
    b.add_argument("--local-model", default="qwen2.5-coder-0.5b", help="--describer local: model name or path")
    b.add_argument("--backend", choices=("llamacpp", "transformers"), default="llamacpp",
                   help="--describer local: llama.cpp (transformers when it cannot run, recorded) or transformers")
    b.add_argument("--llm-threads", type=int, default=None,
                   help="--describer local on llama.cpp: CPU threads (default $MEMQ_LLAMA_THREADS, else CPUs - 1)")
    b.add_argument("--device", default="cpu", help="--describer local: cpu or cuda")
    b.add_argument("--batch-size", type=int, default=8,
                   help="--describer local: prompts per batch (on llama.cpp: decoded together), and statements "
                        "described between cache flushes")
    b.add_argument("--max-new-tokens", type=int, default=40)
    b.add_argument("--openai-base-url", help="--describer openai: e.g. https://api.openai.com/v1")
    b.add_argument("--openai-model", help="--describer openai: model name")
    b.add_argument("--openai-key-env", default="OPENAI_API_KEY",
                   help="--describer openai: NAME of the environment variable holding the key")
    b.set_defaults(handler=_build)

    i = cmds.add_parser("inspect", help="the statements a text recalls")
    i.add_argument("bank")
    i.add_argument("text")
    i.add_argument("-k", type=int, default=5)
    i.add_argument("--json", action="store_true")
    i.set_defaults(handler=_inspect)

    c = cmds.add_parser("compact", help="copy a bank with its vectors stored as fp16 or sq8, fewer descriptions or "
                                        "compressed statements (no re-embedding)")
    c.add_argument("bank")
    c.add_argument("--index", choices=INDEX_TYPES, required=True)
    c.add_argument("--out", required=True, help="the new bank's directory (not the bank itself)")
    c.add_argument("--descriptions", type=int, default=None, metavar="N",
                   help="keep at most the first N descriptions of each statement")
    c.add_argument("--only-source", action="append", default=None,
                   help="keep only the statements this source gave (repeatable), e.g. schema")
    c.add_argument("--compress", action="store_true", help="write statements.jsonl.gz")
    c.set_defaults(handler=_compact)

    m = cmds.add_parser("merge", help="one bank with the statements of another that it lacks (no re-embedding); "
                                      "the banks they include stay included")
    m.add_argument("bank")
    m.add_argument("other")
    m.add_argument("--out", required=True)
    m.add_argument("--index", choices=INDEX_TYPES, default=None, help="the new bank's index type (default: BANK's)")
    m.add_argument("--only-source", action="append", default=None,
                   help="take from OTHER only statements that this source gave (repeatable), e.g. schema")
    m.add_argument("--descriptions", action="store_true",
                   help="statements in both also get OTHER's descriptions as further rows (a mixed bank)")
    m.set_defaults(handler=_merge)

    s = cmds.add_parser("stats", help="counts of a memory bank")
    s.add_argument("bank")
    s.add_argument("--json", action="store_true")
    s.set_defaults(handler=_stats)


def _describer(args):
    from memq.describe import LLMDescriber, LLMDescriberConfig, TemplateDescriber

    if args.describer == "template":
        return TemplateDescriber()
    config = LLMDescriberConfig(max_new_tokens=args.max_new_tokens)
    if args.describer == "local":
        from memq.llm.llamacpp import make_llm

        if args.llm_threads is not None and args.llm_threads < 1:
            raise MemQError(f"--llm-threads must be >= 1, got {args.llm_threads}")
        llm, note = make_llm(args.backend, args.local_model, device=args.device, batch_size=args.batch_size,
                             threads=args.llm_threads, parallel=args.batch_size)
        if note:
            print(f"note: {note}", file=sys.stderr)
        return LLMDescriber(llm, config, backend_fallback=note)
    if not args.openai_base_url or not args.openai_model:
        raise MemQError("--describer openai needs --openai-base-url and --openai-model")
    from memq.llm import OpenAIChat

    return LLMDescriber(OpenAIChat(args.openai_base_url, args.openai_model, api_key_env=args.openai_key_env), config)


def _build(args) -> int:
    from .build import BuildConfig, SourceConfig, build_from_sources
    from .embed import HashingEmbedder, MiniLMEmbedder
    start = time.perf_counter()
    describer = _describer(args)
    embedder = MiniLMEmbedder(threads=args.threads) if args.embedder == "minilm" else HashingEmbedder()
    keep = args.keep_cache if args.keep_cache is not None else args.describer != "template"
    bank = build_from_sources(
        args.source, describer, embedder, args.out,
        source_config=SourceConfig(exclude_webqtest=args.exclude_webqtest,
                                   schema=_schema_config(args)),
        config=BuildConfig(keep_cache=keep, progress=not args.no_progress,
                           chunk_size=256 if args.describer == "template" else max(1, args.batch_size),
                           index_type=args.index, descriptions=args.descriptions, compress=args.compress,
                           include=tuple(args.include)))
    counts = bank.counts()
    print(f"built {args.out}: {counts['statements']} statements, {counts['descriptions']} descriptions "
          f"in {time.perf_counter() - start:.1f} s")
    print("by structure: " + ", ".join(f"{k}={v}" for k, v in counts["by_structure"].items()))
    print("by source: " + ", ".join(f"{k}={v}" for k, v in counts["by_source"].items()))
    if counts["fallbacks"]:
        print("fallbacks: " + ", ".join(f"{k}={v}" for k, v in counts["fallbacks"].items()))
    described = bank.info.get("describer", {})
    if "validity" in described:
        print("LLM answers: " + ", ".join(f"{k}={v}" for k, v in described["validity"].items())
              + f" ({described.get('runtime', {})})")
    return 0


def _schema_config(args):
    from .schema_source import SchemaSourceConfig, grailqa_domains, grailqa_listed

    domains, keep = None, ()
    if args.schema_domains == "grailqa":
        domains, keep = grailqa_domains(), grailqa_listed()
    elif args.schema_domains:
        domains = tuple(d.strip() for d in args.schema_domains.split(",") if d.strip())
    grail = args.schema_form == "grailqa"
    return SchemaSourceConfig(include_base=args.include_base, domains=domains, classes=grail, both_directions=grail,
                              answer_reverse=not grail, entity_entries=not grail,
                              filters=not grail, keep=keep)


def _compact(args) -> int:
    from pathlib import Path

    from .bank import MemoryBank

    if Path(args.out).resolve() == Path(args.bank).resolve():
        raise MemQError(f"--out {args.out} is the bank itself; name a new directory")
    if args.descriptions is not None and args.descriptions < 1:
        raise MemQError(f"--descriptions must be >= 1, got {args.descriptions}")
    start = time.perf_counter()
    bank = MemoryBank.load(args.bank, include=False)
    if args.only_source:
        bank = bank.subset(lambda _record, sources: any(s in args.only_source for s in sources))
    if args.descriptions is not None:
        bank = bank.trimmed(args.descriptions)
    bank = bank.compacted(args.index)
    bank.save(args.out, compress=args.compress)
    size = (Path(args.out) / "index.faiss").stat().st_size
    print(f"wrote {args.out}: {bank.index.ntotal} rows as {args.index}, index {size / 2**20:.1f} MiB, "
          f"in {time.perf_counter() - start:.1f} s")
    return 0


def _merge(args) -> int:
    from pathlib import Path

    from .bank import MemoryBank

    if Path(args.out).resolve() in (Path(args.bank).resolve(), Path(args.other).resolve()):
        raise MemQError(f"--out {args.out} is one of the banks merged; name a new directory")
    start = time.perf_counter()
    # the banks alone; what they include stays included (relative to --out), not copied in. With --only-source,
    # OTHER's included banks are searched for those sources too and not carried over.
    other = MemoryBank.load(args.other, include=bool(args.only_source))
    if args.only_source:
        other = other.subset(lambda _record, sources: any(s in args.only_source for s in sources))
    first = MemoryBank.load(args.bank, include=False)
    bank = first.merged(other, descriptions=args.descriptions)
    if args.index:
        bank = bank.compacted(args.index)
    carried = [(args.bank, first)] + ([] if args.only_source else [(args.other, other)])
    bank.save(args.out, include=_includes(args.out, *carried))
    counts = bank.counts()
    print(f"wrote {args.out}: {counts['statements']} statements, {bank.index.ntotal} rows, "
          f"in {time.perf_counter() - start:.1f} s")
    return 0


def _includes(out: str, *banks) -> list[str]:
    """The banks that the banks merged include (their manifests' ``include``), as paths relative to ``out``."""
    import os
    from pathlib import Path

    found: list[str] = []
    for path, bank in banks:
        for rel in bank.manifest.get("include") or []:
            where = os.path.relpath((Path(path) / rel).resolve(), Path(out).resolve())
            if where not in found:
                found.append(where)
    return found


def _inspect(args) -> int:
    from .bank import MemoryBank

    if args.k < 1:
        raise MemQError(f"-k must be >= 1, got {args.k}")
    bank = MemoryBank.load(args.bank)
    hits = bank.search(args.text, args.k)
    if args.json:
        print(json.dumps([{"statement": r.statement.to_json(), "description": d, "score": round(score, 6),
                           "structure": r.statement.structure, "fallback": r.fallback}
                          for r, d, score in hits], indent=2, ensure_ascii=False))
        return 0
    for n, (r, d, score) in enumerate(hits, 1):
        print(f"{n}. {score:.3f}  [{r.statement.structure}] {d}")
        for line in r.statement.sparql.splitlines():
            print(f"      {line}")
    return 0


def _stats(args) -> int:
    from .bank import MemoryBank

    bank = MemoryBank.load(args.bank)
    m = bank.manifest
    counts = bank.counts()
    if args.json:
        print(json.dumps({**counts, "included": bank.info.get("included", []),
                          "embedder": m.get("embedder"), "describer": m.get("describer"),
                          "source": m.get("source"), "created": m.get("created"),
                          "memq_version": m.get("memq_version")}, indent=2))
        return 0
    out = sys.stdout
    out.write(f"{args.bank}: {counts['statements']} statements, {counts['descriptions']} descriptions\n")
    if bank.info.get("included"):
        out.write("with the banks it includes: " + ", ".join(bank.info["included"]) + "\n")
    out.write("by structure: " + ", ".join(f"{k}={v}" for k, v in counts["by_structure"].items()) + "\n")
    out.write("by source: " + ", ".join(f"{k}={v}" for k, v in counts["by_source"].items()) + "\n")
    out.write("by describer: " + ", ".join(f"{k}={v}" for k, v in counts["by_describer"].items()) + "\n")
    out.write(f"fallbacks: {counts['fallbacks'] or 'none'}\n")
    described = m.get("describer") or {}
    if "validity" in described:
        out.write("LLM answers: " + ", ".join(f"{k}={v}" for k, v in described["validity"].items())
                  + f"  runtime: {described.get('runtime')}\n")
    out.write(f"embedder: {m.get('embedder')}  describer: {m.get('describer')}  created: {m.get('created')}\n")
    return 0
