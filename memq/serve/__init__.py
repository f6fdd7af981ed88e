"""``memq serve``: :func:`memq.answer` over HTTP (FastAPI on uvicorn).

* :mod:`.app`: :func:`create_app` (the FastAPI application: ``POST /answer``, ``GET /health``);
* :mod:`.cli`: the ``memq serve`` command.

FastAPI and uvicorn load only when a server is built, so ``import memq`` and the
other commands stay light.
"""

from __future__ import annotations

__all__ = ["create_app"]


def __getattr__(name: str):
    if name == "create_app":
        from .app import create_app

        return create_app
    raise AttributeError(name)
