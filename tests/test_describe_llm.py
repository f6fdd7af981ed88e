"""LLMDescriber with scripted generators: prompts, validation, the retry and the recorded fallback."""

from __future__ import annotations

import pytest

from memq.describe import LLMDescriber, LLMDescriberConfig, TemplateDescriber, clean, problem
from memq.describe.llm import FALLBACK
from memq.describe.prompts import PROMPTS, render
from memq.types import Statement

S1 = Statement("s1", "1", "?entity1 ns:location.country.currency_used ?entity2 .", ("location.country.currency_used",))
S3 = Statement("s3", "3", "?entity1 ns:film.actor.film ?cvt .\n?cvt ns:film.performance.character ?entity2 .\n"
                          "?cvt ns:film.performance.film ?entity3 .",
               ("film.actor.film", "film.performance.character", "film.performance.film"))
SF = Statement("sf", "filter", "FILTER(?entity1 = ?value)", ())


class Scripted:
    """Answers prompts from a list of scripted replies per statement marker; records every call."""

    name = "scripted"

    def __init__(self, replies: dict[str, list[str]]) -> None:
        self.replies = replies
        self.calls: list[dict] = []

    def generate(self, prompts, max_new_tokens=64, stop=None, chat=True):
        self.calls.append({"prompts": list(prompts), "max_new_tokens": max_new_tokens, "stop": stop, "chat": chat})
        out = []
        for p in prompts:
            tail = p.rsplit("### YOUR TURN", 1)[1]
            key = next(k for k in self.replies if k in tail)
            out.append(self.replies[key].pop(0))
        return out


def test_prompts_are_the_papers_tables():
    assert "Answer: ?entity2 is the currency used in the country ?entity1." in PROMPTS["1"]
    assert "Answer: ?entity2 is the character played by the actor ?entity1." in PROMPTS["2"]
    assert "?entity3 is the film in which the actor ?entity1 performs the character ?entity2." in PROMPTS["3"]
    p = render("1", S1.sparql)
    assert p.endswith(f"Sparql:\n{S1.sparql}\nQuestion: How does ?entity2 related to ?entity1 ?\n"
                      'Please answer the question with "?entity2 is [noun phrase]" .\nAnswer:')
    assert "Reply with ONE sentence" in render("1", S1.sparql, retry=True).rsplit("### YOUR TURN", 1)[1]
    with pytest.raises(ValueError, match="filter"):
        render("filter", SF.sparql)


@pytest.mark.parametrize(("text", "structure", "why"), [
    ("?entity2 is the currency used in the country ?entity1", "1", None),
    ("?entity3 is the film in which ?entity1 plays ?entity2", "3", None),
    ("The currency of ?entity1", "1", "does not start with '?entity2 is'"),
    ("?entity2 is the currency", "1", "does not mention ?entity1"),
    ("?entity3 is the film of ?entity1", "3", "does not mention ?entity2"),
    ("?entity2 is the spouse of ?cvt and ?entity1", "1", "mentions other variables ?cvt"),
    ("?entity2 is ns:location.country.currency_used of ?entity1", "1", "contains a relation id"),
    ("?entity2 is the currency of ?entity1. It is money", "1", "more than one sentence"),
])
def test_validation(text, structure, why):
    assert problem(text, structure) == why


def test_clean_strips_what_small_models_add():
    assert clean('Answer: "?entity2 is the currency used in ?entity1."\nAnswer: more') == \
        "?entity2 is the currency used in ?entity1"


def test_valid_answer_is_kept_and_filter_goes_to_template():
    gen = Scripted({"currency_used": ["?entity2 is the currency used in the country ?entity1."]})
    d = LLMDescriber(gen, LLMDescriberConfig(max_new_tokens=30))
    got = d.describe_with_info([S1, SF])
    assert got[0].descriptions == ("?entity2 is the currency used in the country ?entity1",)
    assert got[0].describer == "llm:scripted" and got[0].fallback is None
    assert got[1].describer == "template" and got[1].fallback is None
    assert len(gen.calls) == 1 and len(gen.calls[0]["prompts"]) == 1  # no prompt for the filter
    assert gen.calls[0]["max_new_tokens"] == 30 and gen.calls[0]["stop"] == ["\n", "###"] and gen.calls[0]["chat"]


def test_invalid_answer_is_retried_once_with_a_hint():
    gen = Scripted({"film.performance.film": ["The film.", "?entity3 is the film where ?entity1 plays ?entity2"]})
    d = LLMDescriber(gen)
    got = d.describe_with_info([S3])
    assert got[0].descriptions == ("?entity3 is the film where ?entity1 plays ?entity2",)
    assert len(gen.calls) == 2 and "Reply with ONE sentence" in gen.calls[1]["prompts"][0]
    assert d.stats == {"prompts": 2, "valid_first": 0, "valid_retry": 1, "fallback": 0}


def test_twice_invalid_falls_back_to_template_and_records_it():
    gen = Scripted({"currency_used": ["I don't know", "Sorry."]})
    d = LLMDescriber(gen)
    got = d.describe_with_info([S1])
    assert got[0].fallback == FALLBACK
    assert got[0].descriptions == TemplateDescriber().describe_one(S1).descriptions
    assert d.stats["fallback"] == 1


def test_with_template_keeps_both_and_prompt_hash_depends_on_model():
    gen = Scripted({"currency_used": ["?entity2 is the money of ?entity1"]})
    d = LLMDescriber(gen, LLMDescriberConfig(with_template=True))
    got = d.describe([S1])[0]
    assert got[0] == "?entity2 is the money of ?entity1" and len(got) > 1
    assert LLMDescriber(gen, model_name="a").prompt_hash != LLMDescriber(gen, model_name="b").prompt_hash


def test_rejects_objects_without_generate():
    with pytest.raises(TypeError, match="generate"):
        LLMDescriber(object())


@pytest.mark.slow
def test_local_qwen_describes_real_statements():
    from memq.llm import LocalLLM

    llm = LocalLLM("qwen2.5-coder-0.5b", batch_size=2)
    d = LLMDescriber(llm, LLMDescriberConfig(max_new_tokens=32))
    got = d.describe_with_info([S1, S3])
    assert all(x.descriptions for x in got)
    assert d.stats["valid_first"] + d.stats["valid_retry"] + d.stats["fallback"] == 2
    assert d.stats["valid_first"] >= 1
