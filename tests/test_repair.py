"""Self-repair on its own: the moves in order, each attempt traced, the choices left as the answering query used them.

No KG: ``build`` names the statements each step currently keeps, and ``run``
answers only the queries the test says answer.
"""

from __future__ import annotations

from memq.reconstruct.ground import StepChoice
from memq.reconstruct.repair import MOVES, repair
from memq.types import PlanStep, Recalled, Statement, Trace


def _r(step: int, sid: str, score: float = 0.9) -> Recalled:
    return Recalled(step, Statement(sid, "1", f"# {sid}", ("r",)), f"description of {sid}", score)


def _choices() -> list[StepChoice]:
    find1 = StepChoice(PlanStep("find", "Find a.", target="?x"), 0, kept=[_r(0, "a")],
                       candidates=[_r(0, "a"), _r(0, "a2", 0.81234567), _r(0, "a3", 0.7)], tied=[_r(0, "t")])
    find2 = StepChoice(PlanStep("find", "Find b.", target="?y"), 1, kept=[_r(1, "b")],
                       candidates=[_r(1, "b"), _r(1, "b2", 0.85)])
    check = StepChoice(PlanStep("check", "Make sure.", target="?y"), 2)
    return [find1, find2, check]


def _build(choices):
    """A stand-in query: the kept statement ids of every step, and how many checks were left out."""
    return lambda skip: (tuple(tuple(r.statement.id for r in c.kept) for c in choices), skip)


def _run_answering(*answering):
    return lambda query: ["answer"] if query in answering else []


def test_the_moves_run_in_order_and_every_attempt_is_traced():
    choices, trace = _choices(), Trace()
    assert repair(choices, _build(choices), _run_answering(), trace, max_repairs=2) is None
    assert [m.__name__ for m in MOVES] == ["swap_tied", "add_candidate", "relax_checks"]
    assert trace.attempts == [
        {"action": "swap-tied", "step": 1, "statement": "t", "rows": 0},
        {"action": "add-candidate", "step": 2, "statement": "b2", "score": 0.85, "rows": 0},  # last find first
        {"action": "add-candidate", "step": 1, "statement": "a2", "score": 0.8123, "rows": 0},  # budget 2 spent
        {"action": "relax-checks", "dropped_last": 1, "rows": 0},
    ]
    assert trace.fallbacks == ["self-repair found nothing; the answer is empty"]
    assert [[r.statement.id for r in c.kept] for c in choices] == [["a"], ["b"], []]  # every move undone


def test_a_repair_that_answers_keeps_its_choice_and_says_what_it_changed():
    choices, trace = _choices(), Trace()
    widened = ((("a",), ("b", "b2"), ()), 0)
    query, rows = repair(choices, _build(choices), _run_answering(widened), trace, max_repairs=4)
    assert (query, rows) == (widened, ["answer"])
    assert [a["action"] for a in trace.attempts] == ["swap-tied", "add-candidate"]
    assert trace.fallbacks == ["self-repair: step 2 widened with statement b2"]
    assert [r.statement.id for r in choices[1].kept] == ["b", "b2"]  # Answer.recalled shows the widened step


def test_a_tied_statement_that_answers_replaces_the_kept_one():
    choices, trace = _choices(), Trace()
    swapped = ((("t",), ("b",), ()), 0)
    assert repair(choices, _build(choices), _run_answering(swapped), trace, max_repairs=4) == (swapped, ["answer"])
    assert trace.fallbacks == ["self-repair: step 1 took tied statement t instead of a"]
    assert [r.statement.id for r in choices[0].kept] == ["t"]


def test_no_move_applies_no_attempt_no_note():
    choices, trace = [StepChoice(PlanStep("find", "Find a.", target="?x"), 0, kept=[_r(0, "a")])], Trace()
    assert repair(choices, _build(choices), _run_answering(), trace, max_repairs=4) is None
    assert trace.attempts == [] and trace.fallbacks == []
