"""``memq queries ...``: the gold-query commands."""

from __future__ import annotations

import argparse
import json

from ..datasets import DATASETS, SPLITS


def register(sub: argparse._SubParsersAction) -> None:
    queries = sub.add_parser("queries", help="parse and decompose gold queries")
    qsub = queries.add_subparsers(dest="queries_command", required=True)
    check = qsub.add_parser("check", help="parse, decompose and re-assemble every gold query")
    check.add_argument("--dataset", choices=DATASETS, required=True)
    check.add_argument("--split", choices=SPLITS, default="all")
    check.add_argument("--json", action="store_true", help="print one JSON object")
    check.add_argument("--no-progress", action="store_true")
    check.set_defaults(handler=_check)


def _check(args: argparse.Namespace) -> int:
    from .check import check_queries

    report = check_queries(args.dataset, args.split, progress=not (args.json or args.no_progress))
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{report['dataset']}/{report['split']}: {report['queries']} queries, "
          f"{report['parsed']} parsed, {report['roundtrip']} round-tripped")
    print("statements by structure:  " + "  ".join(f"{k}={v}" for k, v in report["statements"].items()))
    print("distinct by structure:    " + "  ".join(f"{k}={v}" for k, v in report["distinct_statements"].items()))
    for f in report["failures"]:
        print(f"  FAIL {f['id']} [{f['stage']}] {f['reason']}")
    return 0
