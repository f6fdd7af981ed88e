"""Shared fixtures. Heavy objects are built once per session."""

from __future__ import annotations

import os

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
