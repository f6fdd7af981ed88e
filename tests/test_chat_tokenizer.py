"""memq.llm.chat_tokenizer runs a model's tokenizer and chat template without transformers: the same ids, the same
decoded text and the same chat text as transformers' own tokenizer, for both models the llama.cpp backend runs."""

from __future__ import annotations

import json

import pytest

from memq.llm import LLMError, gguf_source
from memq.llm.chat_tokenizer import ChatTokenizer, open_tokenizer
from memq.llm.llamacpp import tokenizer_dir
from memq.plan.prompt import planner_prompt

TEXTS = [
    "", " ", "what does jamaican people speak?", "  two  spaces\tand a tab\n\nnew lines\n",
    "Find the spouse of the person Tom Hanks, assign it to ?x.\nFinally the answer is ?x.",
    "Beyoncé, Zürich, São Paulo, Ålesund, Kraków, 東京, Москва, 🙂 and ﬁ ligatures",
    "Make sure ?date is 2008-05-01 or later. Sort ?x by height, descending; take 1.",
    "a literal <|im_end|> and <|endoftext|> inside the text, and <|im_start|>user",
    "SELECT ?x WHERE { ns:m.03_r3 ns:location.country.languages_spoken ?x . } # \\\" ' `",
    "  leading space", "trailing space  ", "don't won't it's they're I'm we've",
] + [planner_prompt(q, {"m.0x": name}) for q, name in [
    ("who was the first wife of tom hanks?", "Tom Hanks"), ("what currency is used in São Tomé?", "São Tomé"),
    ("which team did michael jordan play for in 1995?", "Michael Jordan")]]


@pytest.fixture(scope="module", params=["smollm2", "qwen2.5-coder-0.5b"])
def pair(request):
    from transformers import AutoTokenizer

    name, gguf, digest = gguf_source(request.param)
    directory, _ = tokenizer_dir(name, gguf, digest)
    return ChatTokenizer(directory), AutoTokenizer.from_pretrained(str(directory))


def test_ids_and_decoding_match_transformers(pair):
    ours, theirs = pair
    for text in TEXTS:
        for special in (True, False):
            ids = ours(text, add_special_tokens=special)["input_ids"]
            assert ids == list(theirs(text, add_special_tokens=special)["input_ids"]), (text, special)
            for skip in (True, False):
                assert ours.decode(ids, skip_special_tokens=skip) == theirs.decode(ids, skip_special_tokens=skip)
            for token in ids[:40]:  # the greedy line search decodes one token at a time
                assert ours.decode([token]) == theirs.decode([token])
    assert ours.eos_token == theirs.eos_token and ours.eos_token_id == theirs.eos_token_id
    assert ours.pad_token_id == (theirs.pad_token_id if theirs.pad_token is not None else theirs.eos_token_id)


def test_chat_text_matches_transformers(pair):
    ours, theirs = pair
    for text in TEXTS:
        for messages in ([{"role": "user", "content": text}],
                         [{"role": "system", "content": "You plan."}, {"role": "user", "content": text}]):
            for gen in (True, False):
                want = theirs.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen)
                assert ours.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen) == want


def test_bad_tokenizer_directories_are_named(tmp_path):
    with pytest.raises(LLMError, match="cannot read the tokenizer in"):
        ChatTokenizer(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{not json")
    (tmp_path / "tokenizer_config.json").write_text("{}")
    with pytest.raises(LLMError, match=str(tmp_path.name)):
        ChatTokenizer(tmp_path)


def test_a_tokenizer_asking_for_space_clean_up_is_transformers_own(pair, tmp_path):
    """transformers applies clean_up_tokenization_spaces by tokenizer type; ChatTokenizer leaves it to transformers."""
    import shutil

    ours, _ = pair
    directory = tmp_path / "tok"
    shutil.copytree(ours.directory, directory)
    config = json.loads((directory / "tokenizer_config.json").read_text())
    assert isinstance(open_tokenizer(directory), ChatTokenizer)
    (directory / "tokenizer_config.json").write_text(json.dumps(config | {"clean_up_tokenization_spaces": True}))
    got = open_tokenizer(directory)
    assert not isinstance(got, ChatTokenizer) and got.pad_token is not None
    assert got("Find the spouse .", add_special_tokens=False)["input_ids"] == ours("Find the spouse .",
                                                                                   add_special_tokens=False)["input_ids"]
