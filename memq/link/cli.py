"""``memq link``: build an entity index, and show what a question links to."""

from __future__ import annotations

import argparse
import json
import sys
import time


def register(sub: argparse._SubParsersAction) -> None:
    link = sub.add_parser("link", help="entity linking: build an entity index, or link a question's entities")
    cmds = link.add_subparsers(dest="link_command", required=True)
    build = cmds.add_parser("build", help="build an entity index from a KG file or a SPARQL endpoint")
    build.add_argument("--out", required=True, help="directory to write the index into")
    build.add_argument("--kg", help="RDF file for the embedded store (default: the benchmark KG)")
    build.add_argument("--endpoint", help="SPARQL endpoint URL (Virtuoso over full Freebase) instead of the store")
    build.add_argument("--page", type=int, default=None,
                       help="rows per query, read with LIMIT/OFFSET (default: 10000 for an endpoint, one query "
                            "for the embedded store)")
    build.add_argument("--timeout", type=float, default=3600.0, help="seconds per query (default 3600)")
    build.add_argument("--no-mentions", action="store_true",
                       help="leave out the mention prior counted on the bundled WebQSP train questions")
    build.set_defaults(handler=_build)
    show = cmds.add_parser("show", help="the entities a question links to, with their scores")
    show.add_argument("question")
    show.add_argument("--kg", help="RDF file whose cached index to use (default: the benchmark KG)")
    show.add_argument("--entity-index", help="an index directory of `memq link build`")
    show.add_argument("--json", action="store_true")
    show.set_defaults(handler=_show)


def _build(args: argparse.Namespace) -> int:
    from ..pipeline import Config, open_kg
    from .index import build_index, kg_source
    from .mentions import add_training_mentions

    if args.page is not None and args.page < 1:
        raise ValueError(f"--page must be >= 1, got {args.page}")
    kg_file = args.kg or Config().kg_file
    kg = open_kg(kg_file, args.endpoint)
    page = args.page if args.page is not None else (10000 if args.endpoint else None)
    t0 = time.perf_counter()
    index = build_index(kg, source=kg_source(kg_file, args.endpoint), page=page, timeout=args.timeout)
    if not args.no_mentions:
        add_training_mentions(index)
    index.save(args.out)
    print(f"entity index: {len(index)} entities, {len(index.mentions)} mention counts, "
          f"{time.perf_counter() - t0:.0f} s -> {args.out}", file=sys.stderr)
    return 0


def _show(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from ..pipeline import Config
    from .mentions import link_entries
    from .resolve import open_linker

    config = Config()
    if args.kg:
        config = replace(config, kg=args.kg)
    if args.entity_index:
        config = replace(config, entity_index=args.entity_index)
    linker = open_linker(config)
    t0 = time.perf_counter()
    links = linker.link(args.question)
    ms = (time.perf_counter() - t0) * 1000
    entries = link_entries(linker, links)
    if args.json:
        print(json.dumps({"question": args.question, "linked": entries, "ms": round(ms, 3)}, indent=2))
        return 0
    print(f"Q: {args.question}")
    for x, entry in zip(links, entries, strict=True):
        print(f"  {x.name} ({x.id})  from {x.mention!r}  score {x.score:.3f}  match {x.match:.2f}  "
              f"popularity {x.popularity:.2f}{'  (a learnt alias)' if entry.get('learnt_alias') else ''}"
              f"{'  (a demonym)' if entry.get('demonym') else ''}")
        for i, n, s in x.runners_up:
            print(f"      runner-up {n} ({i})  {s:.3f}")
    if not links:
        print("  (no entity found)")
    print(f"time: {ms:.1f} ms")
    return 0
