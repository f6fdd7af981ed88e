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


def test_a_cwq_training_question_has_the_constraints_it_kept_from_its_webqsp_question():
    """CWQ annotates no constraint entity, so its training questions voted for none: as the mention prior has it
    (memq.link.gold.prior_entities), a CWQ question names its WebQSP question's topic entity and the constants it
    added, and the constraint entities it kept from the WebQSP parse (Male of "brother") are ones it does not name."""
    qid = "WebQTrn-0_02ed5ce4f0d0e6c1b8d15752a1be80ad"  # "Name the brother of a celebrity that had legal ..."
    question = next(q for q in datasets.load("cwq", "train") if q.id == qid)
    assert constraint_entities([question]) == {}  # as the test split is scored: every constant is named
    assert constraint_entities([question], training=True) == {qid: (MALE,)}


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



def test_cue_words_are_content_words_and_adjacent_pairs_with_one():
    from memq.link.constraints import cue_words

    assert cue_words("What states did Jefferson live in?") == {
        "state", "jefferson", "live", "what state", "state did", "did jefferson", "jefferson live", "live in"}
    assert cue_words("who is his father?") == {"father", "his father"}


def test_a_cue_suggests_the_constraint_most_training_questions_with_it_used():
    from memq.link.constraints import CueWords

    state = ("m.04tnx", "US State")
    questions = [("q1", "what state is boston in?"), ("q2", "what state did lincoln live in?"),
                 ("q3", "which state is the alamo in?"), ("q4", "what is the state flower of texas?"),
                 ("q5", "who is his father?"), ("q6", "who was obama's father?")]
    constraints = {"q1": (state,), "q2": (state,), "q3": (state,), "q5": (MALE,), "q6": (MALE,)}
    cues = CueWords(questions, constraints, min_share=0.6, min_count=2)
    # "state": 3 of the 4 questions with it used US State; "father": 2 of 2 used Male; "boston": 1 question only
    assert cues.suggest("is harvard in a state?")["m.04tnx"] == ("US State", 0.75, "state")
    assert cues.suggest("what state is harvard in?")["m.04tnx"][:2] == ("US State", 1.0)  # "what state": 2 of 2
    assert cues.suggest("who is kim's father?") == {"m.05zppz": ("Male", 1.0, "father")}
    assert cues.suggest("where is boston?") == {}
    assert CueWords(questions, constraints, min_share=0.8, min_count=2).suggest("is it a state?") == {}  # 0.75
    with pytest.raises(ValueError, match="cue_share"):
        CueWords(questions, constraints, min_share=0.0)


def test_by_default_a_cue_that_two_training_questions_share_suggests_their_constraint():
    """``LinkConfig.cue_count`` 2, chosen on WebQSP dev: "engaged" is in 2 WebQSP train questions, and both used
    *Engaged to*; "who did george lucas get engaged to?" (dev) was planned with *Marriage* instead."""
    from memq.link.constraints import CueWords
    from memq.link.settings import LinkConfig

    engaged = ("m.0jp7n8", "Engaged to")
    questions = [("q1", "who is kim kardashian engaged to?"), ("q2", "who did jennifer aniston get engaged to?"),
                 ("q3", "who did he marry?")]
    link = LinkConfig()
    cues = CueWords(questions, {"q1": (engaged,), "q2": (engaged,)}, min_share=link.cue_share,
                    min_count=link.cue_count, asked_share=link.asked_share)
    assert cues.suggest("who did george lucas get engaged to?")["m.0jp7n8"] == ("Engaged to", 1.0, "engaged")
    assert cues.suggest("who did george lucas marry?") == {}  # "marry": 1 question, none used a constraint


def test_an_asked_class_needs_a_smaller_share_only_where_the_question_asks_for_what_the_entity_names():
    from memq.link.constraints import CueWords, names_asked

    assert names_asked("what continent", "Continent") and names_asked("which countrie", "Country")
    assert names_asked("what city", "City/Town/Village") and names_asked("what state", "US State")
    assert not names_asked("what character", "Voice") and not names_asked("continent", "Continent")
    assert not names_asked("what is", "Is") and not names_asked("state did", "US State")
    continent, voice = ("m.01mh", "Continent"), ("m.02nsjvf", "Voice")
    questions = [("q1", "what continent is chad in?"), ("q2", "what continent is peru in?"),
                 ("q3", "what continent is fiji on?"), ("q4", "what continent is laos in?"),
                 ("q5", "what continent is malta part of?"), ("q6", "what continent is togo in?"),
                 ("q7", "what character did he voice?"), ("q8", "what character did she voice?"),
                 ("q9", "what character did kim voice?"), ("q10", "what character did he play?")]
    constraints = {"q1": (continent,), "q2": (continent,), "q3": (continent,), "q7": (voice,), "q8": (voice,),
                   "q9": (voice,)}
    # "what continent": 3 of 6 used Continent, under cue_share; "what character": 3 of 4 used Voice, above it
    assert CueWords(questions, constraints, min_share=0.8, min_count=3).suggest("what continent is iraq in?") == {}
    asked = CueWords(questions, constraints, min_share=0.8, min_count=3, asked_share=0.3)
    assert asked.suggest("what continent is iraq in?") == {"m.01mh": ("Continent", 0.5, "what continent")}
    assert asked.suggest("what character did he have?") == {}  # 0.75 < 0.8, and Voice is not a character
    assert CueWords(questions, constraints, min_share=0.8, min_count=4, asked_share=0.3).suggest(
        "what continent is iraq in?") == {}  # 3 questions, not 4
    with pytest.raises(ValueError, match="asked_share"):
        CueWords(questions, constraints, asked_share=1.5)


def test_a_cue_joins_the_neighbours_vote_with_the_larger_support():
    from memq.link.constraints import CueWords

    questions = [("q1", "who is his father?"), ("q2", "who was obama's father?"), ("q3", "who is his wife?")]
    constraints = {"q1": (MALE,), "q2": (MALE,), "q3": (MARRIAGE,)}
    cues = CueWords(questions, constraints, min_share=0.6, min_count=2)
    s = ConstraintSuggester(NearestPrior([("q3", 0.9), ("q1", 0.1)]), constraints, min_support=0.5, cues=cues)
    male, marriage = s.suggest("who is kim's father?")  # best first
    assert (marriage.id, marriage.cue, male.id, male.cue, male.support) == ("m.04ztj", "", "m.05zppz", "father", 1.0)
    assert male.voters == ("q1",)  # a neighbour voted for it, below min_support on its own
    assert male.to_json()["cue"] == "father" and "cue" not in marriage.to_json()
    assert "cue 'father'" in male.why()
    assert [x.id for x in s.suggest("who is kim's father?", given=["m.05zppz"])] == ["m.04ztj"]
