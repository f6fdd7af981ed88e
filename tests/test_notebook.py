"""The recall-inspection notebook runs end to end, offline."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent


def test_inspect_recall_notebook_runs():
    if not (ROOT / "data" / "kg" / "benchmark.nq.gz").exists():
        pytest.fail("data/kg/benchmark.nq.gz is missing; build it with `memq kg build-benchmark`")
    nb = nbformat.read(ROOT / "notebooks" / "inspect_recall.ipynb", as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    outputs = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "statements in the memory" in outputs
    assert "find steps take the top-1 alone" in outputs
