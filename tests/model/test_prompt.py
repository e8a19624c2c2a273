import json

import pytest

from gepard_demo.model.config import GepardConfig
from gepard_demo.model.prompt import PromptError, build_prompt_ids, encode_text, normalize_text, repetitions


@pytest.fixture(scope="module")
def config(tiny_model_dir):
    return GepardConfig.from_dir(tiny_model_dir)


def _layout(model_dir, ids):
    """The ids as the checkpoint's own gepard_config.json names them (not as our config parses
    them): K slots from tokeniser_length (K: the compressor's num_queries), the text block, SOS."""
    side = json.loads((model_dir / "gepard_config.json").read_text())
    st, k = side["special_tokens"], side["voice_cloning"]["compressor"]["num_queries"]
    slots = list(range(st["tokeniser_length"], st["tokeniser_length"] + k))
    return slots, [st["start_of_text"], *ids, st["end_of_text"]], st["start_of_speech"]


def test_two_token_text_repeats_up_to_target(config, tiny_model_dir):
    ids = [11, 12]
    prompt = build_prompt_ids(ids, config)
    slots, block, sos = _layout(tiny_model_dir, ids)
    # ceil(16 / 2) = 8 copies, capped at max_repeats 8; only the last carries SOS.
    assert prompt == slots + block * 8 + [sos]
    assert prompt.count(sos) == 1


def test_twenty_token_text_does_not_repeat(config, tiny_model_dir):
    ids = list(range(20, 40))
    slots, block, sos = _layout(tiny_model_dir, ids)
    assert build_prompt_ids(ids, config) == slots + block + [sos]


@pytest.mark.parametrize(("n", "expected"), [(1, 8), (2, 8), (3, 6), (5, 4), (12, 2), (13, 1), (16, 1)])
def test_repetition_count_follows_the_published_rule(config, n, expected):
    assert repetitions(n, config.text_repetition) == expected


def test_empty_text_raises(config, tiny_engine):
    with pytest.raises(PromptError, match="empty"):
        build_prompt_ids([], config)
    for text in ["", "   \n\t ", "\x00\x07"]:
        with pytest.raises(PromptError, match="empty"):
            encode_text(text, tiny_engine.tokenizer)


def test_text_is_tokenized_without_special_tokens(tiny_engine):
    ids = encode_text("Hello world", tiny_engine.tokenizer)
    assert ids and max(ids) < tiny_engine.config.special_tokens.start_of_speech
    assert tiny_engine.tokenizer.decode(ids) == "Hello world"


def test_odd_unicode_is_normalised_not_rejected(tiny_engine):
    assert normalize_text("Cafe\u0301\u200b  na\u00efve\n\x00 \U0001f600") == "Café na\u00efve \U0001f600"
    assert tiny_engine.prompt_ids("\U0001f600 \u4e2d\u6587")[-1] == tiny_engine.config.special_tokens.start_of_speech
