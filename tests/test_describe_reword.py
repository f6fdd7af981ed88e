"""The rule rewordings of template descriptions (the hidden-wording robustness set of
benchmarks/describer_recall.py)."""

from __future__ import annotations

import pytest

from memq.describe.reword import reword


@pytest.mark.parametrize("text, expected", [
    ("?entity2 is the official language of the country ?entity1", "?entity2 is ?entity1's official language"),
    ("?entity2 is the notable types of ?entity1", "?entity2 is ?entity1's notable types"),
    ("?entity2 is the team of the batting statistics of the baseball player ?entity1",
     "?entity2 is the team in ?entity1's batting statistics"),
    ("?entity3 is the actor of the performance with film ?entity1 and character ?entity2",
     "?entity3 is the actor where the film is ?entity1 and the character is ?entity2"),
    ("?entity2 is the country whose currency used is ?entity1",
     "?entity2 is the country with ?entity1 as its currency used"),
    ("?entity2 is the director that the film ?entity1 is directed by",
     "?entity2 is the director which ?entity1 is directed by"),
    ("?entity2 is either the runner up of the event ?entity1 or the champion of the event ?entity1",
     "?entity2 is ?entity1's runner up or ?entity1's champion"),
])
def test_rules(text, expected):
    assert reword(text) == (expected, True)


@pytest.mark.parametrize("text", [
    "?entity2 is the location that contains ?entity1",  # no class noun to drop, no rule: unchanged
    "filter the marriage ?entity1 was valid at time ?value",  # not a find statement's description
])
def test_no_rule_leaves_it_unchanged(text):
    assert reword(text) == (text, False)
