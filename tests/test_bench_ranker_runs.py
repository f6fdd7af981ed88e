"""benchmarks/bench_ranker_runs.py: each run size timed over the same steps, with how far its logits are from the
first size's and its recall@1."""

from __future__ import annotations

import numpy as np
import pytest


class RunDependent:
    """Scores a candidate by its length, plus 0.5 when scored one at a time (as int8 logits move with the run)."""

    batch_size = 64

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def score(self, query, candidates):
        self.sizes.append(self.batch_size)
        return np.array([len(c) + (0.5 if self.batch_size == 1 else 0.0) for c in candidates], dtype=np.float32)


def test_each_size_is_timed_and_compared_with_the_first(benchmark_module):
    bench = benchmark_module("bench_ranker_runs")
    steps = [("q1", ["a", "bbb", "cc"], 1), ("q2", ["dddd", "e"], 1), ("q3", ["ff"], None)]
    ranker = RunDependent()
    rows = bench.time_runs(ranker, steps, [16, 4, 1])
    assert [r["size"] for r in rows] == [16, 4, 1] and set(ranker.sizes) == {16, 4, 1}
    assert rows[1]["max_abs_diff"] == 0.0 and rows[1]["steps_bit_for_bit"] == 3
    assert rows[2]["max_abs_diff"] == pytest.approx(0.5) and rows[2]["steps_bit_for_bit"] == 0
    assert all(r["pairs"] == 6 for r in rows)
    assert rows[0]["recall@1"] == 0.5  # the longest candidate wins: step 1's gold is first, step 2's is not


def test_a_group_file_s_find_steps_are_read_with_the_gold_s_place(benchmark_module, tmp_path):
    import json

    bench = benchmark_module("bench_ranker_runs")
    path = tmp_path / "groups.jsonl"
    groups = [{"id": "a", "step": 1, "query": "q", "positive": "y", "candidates": [["x", 0.9], ["y", 0.5]]},
              {"id": "a", "step": None, "query": "q", "positive": None, "candidates": [["z", 0.1]]},
              {"id": "b", "step": 1, "query": "r", "positive": "w", "candidates": [["u", 0.9], ["v", 0.5]]}]
    path.write_text("".join(json.dumps(g) + "\n" for g in groups))
    assert bench.read_steps(str(path), pool=8, limit=10) == [("q", ["x", "y"], 1), ("r", ["u", "v"], None)]
    assert bench.read_steps(str(path), pool=1, limit=1) == [("q", ["x"], None)]  # the gold past the pool
