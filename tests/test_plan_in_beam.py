"""benchmarks/plan_in_beam.py: plans compared with their variables renamed, and a run's F1 by where the gold plan
stands."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def beam(benchmark_module):
    return benchmark_module("plan_in_beam")


def test_plans_compare_with_their_variables_renamed_in_order(beam):
    a = "Find the spouse of ?y, assign it to ?x.\nFinally the answer is ?x."
    b = "Find the  spouse of ?a, assign it to ?b.\n\nFinally the answer is ?b."
    assert beam.canonical(a) == beam.canonical(b)
    assert beam.canonical(a) != beam.canonical("Find the spouse of ?y, assign it to ?x.\nFinally the answer is ?y.")


def test_by_column_counts_each_question_once_with_its_loss_over_all(beam):
    run = {"q1": {"f1": 1.0}, "q2": {"f1": 0.5}, "q3": {"f1": 0.0}, "q4": {"f1": None}}
    gold = {"q1": "g", "q2": "g", "q3": "g"}
    out = beam.by_column(run, gold, first={"q1"}, beam={"q1", "q2"})
    assert out["first"] == {"questions": 1, "f1": 1.0, "loss": 0.0}
    assert out["in_beam_not_first"] == {"questions": 1, "f1": 0.5, "loss": 0.125}
    assert out["not_in_beam"] == {"questions": 1, "f1": 0.0, "loss": 0.25}
    assert out["no_gold_plan"] == {"questions": 1, "f1": 0.0, "loss": 0.25}


def test_where_a_plan_leaves_the_gold_one(beam):
    gold = "Find the a of X, assign it to ?v0.\nFind the b of ?v0, assign it to ?v1.\nFinally the answer is ?v1."
    assert beam.where_it_leaves("Find the c of X, assign it to ?v0.\nFinally the answer is ?v0.", gold) == "first_find"
    later = "Find the a of X, assign it to ?v0.\nFind the c of ?v0, assign it to ?v1.\nFinally the answer is ?v1."
    assert beam.where_it_leaves(later, gold) == "later_find"
    checked = gold.replace("Finally", "Make sure ?v1 is Y.\nFinally")
    assert beam.where_it_leaves(checked, gold) == "checks"
    assert beam.where_it_leaves(gold.split("\nFind the b")[0] + "\nFinally the answer is ?v0.", gold) == "later_find"
