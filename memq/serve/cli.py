"""``memq serve``: answer questions over HTTP on one loaded pipeline (see :mod:`memq.serve.app`)."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser("serve", help="answer questions over HTTP (POST /answer, GET /health)")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default 127.0.0.1; there is no authentication)")
    serve.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    serve.add_argument("--memory", help="memory bank directory (default: memory_bank/webqsp)")
    serve.add_argument("--kg", help="RDF file for the embedded store (default: the benchmark KG; GrailQA's own for "
                       "a GrailQA bank)")
    serve.add_argument("--endpoint", help="SPARQL endpoint URL instead of the embedded store")
    serve.add_argument("--planner", choices=("auto", "fewshot", "finetuned", "grounded", "hybrid", "given"),
                       default="auto",
                       help="given: no planner is loaded and every request sends its plan")
    serve.add_argument("--adapter", help="LoRA adapter directory for --planner finetuned, grounded or hybrid")
    serve.add_argument("--entity-index", help="entity index directory of `memq link build`, for requests without "
                                              "entities (default: the embedded KG's, built once in the memq cache)")
    serve.add_argument("--no-ground", action="store_true", help="turn grounded choice off")
    serve.add_argument("--no-repair", action="store_true", help="turn self-repair off")
    serve.add_argument("--max-queue", type=int, default=64,
                       help="requests admitted at once, running or waiting; the next gets a 503 (default 64)")
    serve.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        raise ValueError(f"--port must be in 1..65535, got {args.port}")
    if args.max_queue < 1:
        raise ValueError(f"--max-queue must be >= 1, got {args.max_queue}")
    try:
        import uvicorn

        from .app import create_app
    except ImportError as exc:
        raise ImportError(f"memq serve needs FastAPI and uvicorn ({exc}); install memq with its dependencies: "
                          "pip install -e .") from exc
    from memq.ask import config_from

    parts = ("the memory bank and the KG (no planner: requests send their plans)" if args.planner == "given"
             else "the memory bank, the KG and the planner")
    print(f"memq serve: loading {parts} ...", file=sys.stderr, flush=True)
    app = create_app(config_from(args), max_queue=args.max_queue)
    print(f"memq serve: answering on http://{args.host}:{args.port} (POST /answer, GET /health); Ctrl-C stops",
          file=sys.stderr, flush=True)
    uvicorn.run(app, host=args.host, port=args.port, workers=1,
                log_level="info" if getattr(args, "verbose", False) else "warning")
    return 0
