"""The ``memq`` command line.

Each stage registers its own command group (``register(sub)`` in its ``cli``
module); this module only wires them together and turns a
:class:`~memq.errors.MemQError` into one line on stderr and exit code 1.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

COMMAND_MODULES = (
    "memq.decompose.cli",
    "memq.kg.cli",
    "memq.memory.cli",
    "memq.plan.cli",
    "memq.demo",
    "memq.link.cli",
    "memq.ask",
    "memq.serve.cli",
    "memq.evaluate.cli",
    "memq.evaluate.direct_cli",
)


def count(text: str) -> int:
    """An argparse type: a whole number >= 0 (``--limit N``); argparse names the flag in its error."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"takes a whole number >= 0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memq", description="Question answering over knowledge graphs (MemQ).")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details to stderr")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from .errors import MemQError

    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.handler(args) or 0)
    except MemQError as exc:
        print(f"memq: error: {exc}", file=sys.stderr)
        return 1
    except (ValueError, FileNotFoundError) as exc:
        print(f"memq: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("memq: interrupted", file=sys.stderr)
        return 130


def group_main(register, group: str, argv: list[str] | None = None) -> int:
    """Run one command group on its own (``python -m memq.plan.cli train ...`` is ``memq planner train ...``):
    INFO logging, a MemQError is one line on stderr and exit code 1."""
    from .errors import MemQError

    parser = argparse.ArgumentParser(prog="memq")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args([group, *(sys.argv[1:] if argv is None else argv)])
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.handler(args) or 0)
    except MemQError as exc:
        print(f"memq: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
