"""Shared fixtures. Heavy objects are built once per session."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def gold_parses():
    """Every gold parse of WebQSP train+test, CWQ test and CWQ train+dev: (parse_id, sparql)."""
    from memq import datasets

    out = []
    for dataset in ("webqsp", "cwq"):
        for q in datasets.load(dataset, "all"):
            out.extend((p.parse_id, p.sparql) for p in q.parses)
    return out


@pytest.fixture(scope="session")
def benchmark_module():
    """A script of benchmarks/ loaded as a module by its name: ``benchmark_module("linked_losses")``."""

    def load(name: str):
        path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load
