"""Constraint entities suggested by the nearest training questions, and the pipeline's optional entities."""

from __future__ import annotations

import pytest

from memq import datasets
from memq.link.constraints import ConstraintSuggester, Suggestion, constraint_entities
from memq.types import Trace

MARRIAGE, MALE = ("m.04ztj", "Marriage"), ("m.05zppz", "Male")


class NearestPrior:
    """A question prior whose neighbours are fixed: (training question id, similarity)."""

    def __init__(self, nearest):
        self._nearest = nearest

    def nearest(self, question):
        return list(self._nearest)


def test_the_neighbours_vote_with_their_similarity_and_given_ids_are_left_out():
    prior = NearestPrior([("q1", 0.9), ("q2", 0.8), ("q3", 0.05), ("q4", -0.2)])
    constraints = {"q1": (MARRIAGE,), "q2": (MARRIAGE, MALE), "q3": (MALE,), "q4": (MALE,)}
    s = ConstraintSuggester(prior, constraints, min_support=0.5)
    [marriage] = s.suggest("who is niall ferguson's wife?")
    assert (marriage.id, marriage.name, marriage.voters) == ("m.04ztj", "Marriage", ("q1", "q2"))
    assert marriage.support == pytest.approx(1.7 / 1.75)  # a negative similarity votes with weight 0
    s.min_support = 0.4  # Male's support: (0.8 + 0.05) / 1.75 = 0.486
    assert [x.id for x in s.suggest("q")] == ["m.04ztj", "m.05zppz"]
    assert [x.id for x in s.suggest("q", given=["m.04ztj"])] == ["m.05zppz"]
    assert marriage.to_json()["suggested"] == "constraint"
    assert ConstraintSuggester(NearestPrior([("q9", 0.0)]), constraints).suggest("q") == []
    with pytest.raises(ValueError, match="min_support"):
        ConstraintSuggester(prior, constraints, min_support=0.0)


def test_constraint_entities_are_webqsps_topic_entities_the_question_does_not_name():
    test = {q.id: q for q in datasets.load("webqsp", "test")}
    found = constraint_entities([test["WebQTest-9"], test["WebQTest-0"]])  # Nixon's marriage; Jamaica's languages
    assert found == {"WebQTest-9": (MARRIAGE,)}


def test_a_suggester_needs_training_questions_with_constraints():
    class Bank:  # a bank of schema statements only: no training questions, so nothing votes
        records, sources = [], []

    assert ConstraintSuggester.from_bank(Bank()) is None


def test_traced_suggestions_list_each_entity_and_say_so():
    from memq.link.constraints import traced_suggestions

    trace = Trace()
    optional = traced_suggestions([Suggestion("m.04ztj", "Marriage", 0.75, ("WebQTrn-1",))], trace)
    assert optional == {"m.04ztj": "Marriage"}
    assert trace.links == [{"id": "m.04ztj", "name": "Marriage", "suggested": "constraint", "support": 0.75,
                            "voters": ["WebQTrn-1"]}]
    assert "Marriage (m.04ztj, support 0.75)" in trace.fallbacks[0]
    assert traced_suggestions([], trace) == {} and len(trace.fallbacks) == 1

