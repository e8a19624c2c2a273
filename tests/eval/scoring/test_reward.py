"""The authors' reward and clean rollout (eval/scoring/reward.py, from gepard-train's score.py) on
hand-made cases whose values are worked out here from the formula:
R = -1.0 WER - 0.5 max(0, dur - dur_max) - 2.0 [dur < dur_min] - 2.0 [empty] - 0.5 (1 - SIM)."""

from __future__ import annotations

import pytest

from eval.scoring.reward import reward, speech_seconds

TEXT = "The cat sat."  # 3 words: expected 0.7 + 1.2 = 1.9 s, dur_min 0.57 s, dur_max 3.8 s


def test_a_perfect_rollout_scores_zero_and_is_clean():
    r = reward(TEXT, "the cat sat", 1.5, truncated=False)
    assert r["reward"] == 0.0 and r["clean"] is True
    assert r["dur_min"] == pytest.approx(0.57) and r["dur_max"] == pytest.approx(3.8)


def test_each_term():
    assert reward(TEXT, "the cat", 1.5, False)["reward"] == pytest.approx(-1 / 3)  # one deletion of three
    assert reward(TEXT, "the cat sat", 5.0, False)["reward"] == pytest.approx(-0.5 * (5.0 - 3.8))
    assert reward(TEXT, "the cat sat", 0.5, False)["reward"] == pytest.approx(-2.0)  # under 0.57 s
    empty = reward(TEXT, "", 1.5, False)
    assert empty["reward"] == pytest.approx(-3.0) and empty["empty_asr"] and empty["reward_wer"] == 1.0
    assert empty["reward_cer"] == 1.0
    assert reward(TEXT, "the cat sat", 1.5, False, sim=0.8)["reward"] == pytest.approx(-0.5 * 0.2)
    # everything at once: WER 1/3, 1.2 s over, SIM 0.6
    assert reward(TEXT, "the cat", 5.0, False, sim=0.6)["reward"] == pytest.approx(-1 / 3 - 0.6 - 0.2)


def test_clean_needs_every_condition():
    assert reward(TEXT, "the cat sat", 1.5, truncated=True)["clean"] is False  # hit its cap (a runaway)
    assert reward(TEXT, "the cat sat", 3.9, False)["clean"] is False  # over dur_max
    assert reward(TEXT, "the cat sat", 2.0 * (0.7 + 0.4 * 3), False)["clean"] is True  # the bounds are inclusive
    assert reward(TEXT, "the cat sat", 0.3 * (0.7 + 0.4 * 3), False)["clean"] is True
    assert reward(TEXT, "the cat", 1.5, False)["clean"] is False  # WER 0.33 > 0.2
    five = "one two three four five"  # WER 0.2 exactly is still clean (chosen_max_wer 0.2)
    assert reward(five, "one two three four six", 2.0, False)["clean"] is True
    assert reward(TEXT, "the cat sat", 1.5, truncated=None)["clean"] is True  # no frame cap known: not truncated


def test_the_basic_normalizer_not_the_english_one():
    # BasicTextNormalizer: case and punctuation go, numbers stay as written (no "nine thirty" -> 9:30)
    assert reward("Hello, World!", "hello world", 1.5, False)["reward_wer"] == 0.0
    assert reward("It is 9:30.", "it is nine thirty", 1.5, False)["reward_wer"] == pytest.approx(2 / 4)  # "it is 9 30": 2 subs
    # a punctuation-only transcript normalises to a space: not empty (score.py's `not hyp`), WER 1
    r = reward(TEXT, "...", 1.5, False)
    assert r["empty_asr"] is False and r["reward"] == pytest.approx(-1.0)


def test_expected_length_of_one_word():
    assert reward("Hi", "hi", 0.32, False)["dur_min"] == pytest.approx(0.3 * 1.1)  # 0.7 + 0.4 x 1
    assert reward("Hi", "hi", 0.32, False)["reward"] == pytest.approx(-2.0)  # 0.32 < 0.33


def test_speech_seconds():
    assert speech_seconds(43, 9.0) == pytest.approx(43 * 1024 / 22050)  # frames win over the audio length
    assert speech_seconds(None, 2.5, silence_ms=300) == pytest.approx(2.2)
    assert speech_seconds(float("nan"), 2.5) == pytest.approx(2.5)
