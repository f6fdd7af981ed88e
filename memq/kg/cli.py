"""``memq kg ...``: run SPARQL on a store or endpoint, check the gold queries.

Hooked into ``memq/cli.py`` with :func:`register`; every handler is stored as
``handler`` on its parser and returns an exit code.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from memq import datasets
from memq.cli import count
from memq.errors import KnowledgeGraphError
from memq.kg.base import KnowledgeGraph
from memq.kg.check import check_gold
from memq.kg.endpoint import EndpointConfig, SparqlEndpoint
from memq.kg.oxigraph import OxigraphConfig, OxigraphStore

BENCHMARK_KG = ("kg", "benchmark.nq.gz")


def _add_kg_options(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--store", metavar="PATH",
                       help="an RDF file (.nq/.nt/.ttl, .gz too; cached as an Oxigraph store under "
                            "~/.cache/memq) or an Oxigraph store directory; default: data/kg/benchmark.nq.gz")
    where.add_argument("--endpoint", metavar="URL", help="a SPARQL endpoint, e.g. http://127.0.0.1:8890/sparql")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per query (default 60)")
    parser.add_argument("--max-rows", type=int, default=10000,
                        help="the endpoint's ResultSetMaxRows, for truncation warnings (default 10000)")
    parser.add_argument("--no-cache", action="store_true",
                        help="load an RDF file into memory instead of the on-disk cache")


def open_kg(store: str | None = None, endpoint: str | None = None, *, max_rows: int | None = 10000,
            cache: bool = True) -> KnowledgeGraph:
    """The knowledge graph the CLI flags name; default the bundled benchmark KG file."""
    if endpoint:
        return SparqlEndpoint(endpoint, EndpointConfig(max_rows=max_rows))
    if store is None:
        try:
            path = datasets.data_path(*BENCHMARK_KG)
        except FileNotFoundError as exc:
            raise KnowledgeGraphError(f"{exc}; build the benchmark KG first, or pass --store FILE "
                                      "or --endpoint URL") from exc
    else:
        path = Path(store)
    if path.is_dir():
        return OxigraphStore(path, OxigraphConfig(), read_only=True)
    if not path.is_file():
        raise KnowledgeGraphError(f"--store {path}: no such file or directory")
    return OxigraphStore.cached(path) if cache else OxigraphStore.from_file(path)


def _check(args: argparse.Namespace) -> int:
    kg = open_kg(args.store, args.endpoint, max_rows=args.max_rows, cache=not args.no_cache)
    questions = datasets.load(args.dataset, args.split)
    if args.limit:
        questions = questions[: args.limit]
    summary = check_gold(kg, questions, drop_constraint=args.drop_constraint, timeout=args.timeout,
                         progress=not args.no_progress and not args.json)
    summary.update(dataset=args.dataset, split=args.split)
    if args.json:
        print(json.dumps(summary, indent=1))
        return 0
    n = summary["queries"] or 1
    print(f"{args.dataset}/{args.split}: {summary['queries']} gold queries, "
          f"{summary['executed']} executed ({summary['executed'] / n:.1%}), "
          f"{summary['exact']} exact ({summary['exact'] / n:.1%}), {summary['nonempty']} non-empty, "
          f"{len(summary['errors'])} errors; {summary['questions_exact']}/{summary['questions']} questions "
          f"with an exact parse; {summary['seconds']} s, p50 {summary['latency_ms']['p50']} ms, "
          f"p95 {summary['latency_ms']['p95']} ms")
    if args.drop_constraint:
        pairs = summary["constraint_pairs"] or 1
        kinds = ", ".join(f"{k} {v['changed']}/{v['pairs']}" for k, v in summary["by_kind"].items())
        print(f"dropping one constraint changed the answers in {summary['changed']} of "
              f"{summary['constraint_pairs']} (query, constraint) pairs ({summary['changed'] / pairs:.1%}); "
              f"{kinds}")
    for err in summary["errors"][:10]:
        print(f"  error {err['id']}: {err['reason'][:200]}")
    return 0


def _query(args: argparse.Namespace) -> int:
    text = Path(args.sparql[1:]).read_text() if args.sparql.startswith("@") else args.sparql
    kg = open_kg(args.store, args.endpoint, max_rows=args.max_rows, cache=not args.no_cache)
    rows = kg.select(text, timeout=args.timeout)
    for row in rows:
        print(json.dumps({k: (v.value if hasattr(v, "value") else str(v)) for k, v in row.items()},
                         ensure_ascii=False))
    print(f"{len(rows)} rows", file=sys.stderr)
    return 0


def _stats(args: argparse.Namespace) -> int:
    from memq.kg.stats import kg_stats

    kg = open_kg(args.store, args.endpoint, max_rows=args.max_rows, cache=not args.no_cache)
    summary = kg_stats(kg, datasets.load(args.dataset, args.split), timeout=args.timeout,
                       progress=not args.no_progress and not args.json)
    summary = {"dataset": args.dataset, "split": args.split, **summary}
    if args.json:
        print(json.dumps(summary, indent=1))
        return 0
    q, top, cvt = summary["quads"], summary["topic_relations"], summary["cvt_relations"]
    print(f"{args.dataset}/{args.split}: {q['total']:,} quads ({q['real']:,} real, {q['synthetic']:,} synthetic)")
    print(f"  distinct relations (in and out) at {top['n']} topic entities: median {top['median']}, "
          f"p10 {top['p10']}, mean {top['mean']}")
    print(f"  at {cvt['n']} CVT nodes one hop from them: median {cvt['median']}, p10 {cvt['p10']}, "
          f"mean {cvt['mean']}")
    return 0


def _build_benchmark(args: argparse.Namespace) -> int:
    from memq.benchmark import DEFAULT_OUT, build_benchmark

    questions, sources = benchmark_inputs(args.dataset, args.questions, args.format)
    if questions is not None and not args.out:
        raise KnowledgeGraphError("--dataset/--questions build another KG than data/kg/benchmark.nq.gz: "
                                  "name it with --out FILE")
    report = build_benchmark(Path(args.out) if args.out else DEFAULT_OUT, progress=not args.no_progress,
                             questions=questions, sources=sources, real_triples=not args.no_real,
                             fb15k237=not args.no_fb15k237, density=not args.no_density, reverse=args.reverse)
    print(json.dumps(report, indent=1, default=str))
    return 0


def benchmark_inputs(dataset: str | None, files: list[str] | None, fmt: str | None):
    """The questions ``build-benchmark`` builds from (None: the default benchmark's) and the words that name
    them in the KG's marker triple."""
    if files and not fmt:
        raise KnowledgeGraphError("--questions needs --format (webqsp, cwq or grailqa)")
    if not dataset and not files:
        return None, None
    questions, names = [], []
    if dataset:
        questions += datasets.load(dataset, "all")
        names.append(f"the bundled {dataset} gold parses (all splits)")
    for f in files or ():
        try:
            questions += datasets.load_file(f, fmt, split=Path(f).name.split(".")[0])
        except (OSError, KeyError, ValueError) as exc:
            raise KnowledgeGraphError(f"--questions {f} (--format {fmt}): {exc}") from exc
        names.append(f"the {fmt}-format questions of {Path(f).name}")
    return questions, " and ".join(names)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``kg`` command group (``check``, ``query``, ``stats``, ``build-benchmark``)."""
    kg = sub.add_parser("kg", help="run SPARQL on a knowledge graph; check gold queries against it")
    kg_sub = kg.add_subparsers(dest="kg_command", required=True)

    check = kg_sub.add_parser("check", help="run every gold query and compare with the gold answers")
    check.add_argument("--dataset", choices=datasets.DATASETS, required=True)
    check.add_argument("--split", choices=datasets.SPLITS, default="test")
    _add_kg_options(check)
    check.add_argument("--drop-constraint", action="store_true",
                       help="also drop each constraint in turn and count answer changes")
    check.add_argument("--limit", type=count, default=0, help="only the first N questions")
    check.add_argument("--json", action="store_true", help="print the summary as JSON")
    check.add_argument("--no-progress", action="store_true", help="no progress bar")
    check.set_defaults(handler=_check)

    query = kg_sub.add_parser("query", help="run one SELECT query; rows as JSON lines")
    query.add_argument("sparql", help="the query text, or @FILE")
    _add_kg_options(query)
    query.set_defaults(handler=_query)

    stats = kg_sub.add_parser("stats", help="quads, and distinct relations at the topic entities and CVT nodes")
    stats.add_argument("--dataset", choices=datasets.DATASETS, required=True)
    stats.add_argument("--split", choices=datasets.SPLITS, default="test")
    _add_kg_options(stats)
    stats.add_argument("--json", action="store_true", help="print the summary as JSON")
    stats.add_argument("--no-progress", action="store_true", help="no progress bar")
    stats.set_defaults(handler=_stats)

    build = kg_sub.add_parser("build-benchmark", help="build data/kg/benchmark.nq.gz, or a KG of other gold "
                              "questions (memq.benchmark)")
    build.add_argument("--out", help="output file (default data/kg/benchmark.nq.gz)")
    build.add_argument("--dataset", choices=datasets.DATASETS,
                       help="build from this bundled dataset's questions (all splits) instead; needs --out")
    build.add_argument("--questions", metavar="FILE", action="append",
                       help="a gold-annotated question file (JSON, .gz too) to build from; repeatable; needs "
                            "--format and --out")
    build.add_argument("--format", choices=tuple(datasets.FORMATS), help="the format of the --questions files")
    build.add_argument("--no-real", action="store_true",
                       help="leave out the bundled real Freebase triples (data/freebase_subgraph)")
    build.add_argument("--no-fb15k237", action="store_true", help="leave out FB15k-237's real triples")
    build.add_argument("--no-density", action="store_true", help="no schema-true distractors")
    build.add_argument("--reverse", action="store_true",
                       help="add each triple of a relation with a Freebase reverse property with its mirror, as "
                            "Freebase holds both directions (GrailQA's KG is built so)")
    build.add_argument("--no-progress", action="store_true", help="no progress bar")
    build.set_defaults(handler=_build_benchmark)


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (``python -m memq.kg.cli kg check ...``) until ``memq/cli.py`` wires it in."""
    parser = argparse.ArgumentParser(prog="memq")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except (KnowledgeGraphError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
