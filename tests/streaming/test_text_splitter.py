"""Our text splitter cuts streamed text where vLLM-Omni 0.30's speech WebSocket cuts it: the wheel's
own SpeechTextSplitter is fed the same pieces, and every feed and flush must return the same units."""

from __future__ import annotations

import random

import pytest
from tests.support.vllm_omni_reference import text_splitter

from gepard_demo.streaming.text_splitter import GRANULARITIES, TextSplitter

HARD = [
    "Hello world. How are you? Fine!",
    "Pi is 3.14 and a thousand is 1,000. Done.",
    "Dr. Smith met Mr. Jones at 5 p.m. yesterday. They talked.",
    "J. R. R. Tolkien wrote it. e.g. this, i.e. that. U.S. and U.K. too.",
    "Wait... What?! Really?!? Yes.",
    'He said "Hello." Then she left. (It was late.) [Really.] {Yes.}',
    "She wrote 'fine.' and \u201cdone.\u201d then \u00abbien.\u00bb ok.",
    "\u4eca\u5929\u5929\u6c14\u5f88\u597d\u3002\u6211\u4eec\u53bb\u516c\u56ed\u5427\uff01\u597d\u5417\uff1f\u597d\u7684\uff0c\u8d70\u5427\u3002",
    "\u092f\u0939 \u090f\u0915 \u0935\u093e\u0915\u094d\u092f \u0939\u0948\u0964 \u092f\u0939 \u0926\u0942\u0938\u0930\u093e \u0939\u0948\u0965 \u0924\u0940\u0938\u0930\u093e",
    "\u0647\u0644 \u0623\u0646\u062a \u0628\u062e\u064a\u0631\u061f \u0646\u0639\u0645\u060c \u0634\u0643\u0631\u0627\u061b \u062d\u0633\u0646\u0627.",
    "Visit example.com today. Or www.test.org, maybe; or not.",
    "No. 5 is fig. 3 vs. fig. 4 etc. and so on. Prof. X agrees, approx. 10 Inc. Ltd. Co.",
    "Ellipsis\u2026 then more\u2026 and the end",
    "a.a.a.a.a.a.a.a.a.a.a.a.a.a. b. End.",
    "Trailing mark at the very end.",
    "Mid-wo",
    "   spaces   around.   and   tabs\tinside.\n New line? ",
    "Clause one, clause two; clause three. Sentence four",
    "!?.,;",
    "",
]


def _pieces(text: str, rng: random.Random, how: str) -> list[str]:
    if how == "whole":
        return [text]
    if how == "chars":
        return list(text)
    out, i = [], 0
    while i < len(text):
        n = rng.randint(1, 7)
        out.append(text[i : i + n])
        i += n
    return out


@pytest.mark.parametrize("granularity", GRANULARITIES)
@pytest.mark.parametrize("how", ["whole", "chars", "random"])
def test_every_feed_and_flush_cuts_where_the_wheel_cuts(granularity, how):
    Wheel = text_splitter()
    rng = random.Random(7)
    for text in HARD:
        ours, theirs = TextSplitter(granularity), Wheel(granularity)
        for piece in _pieces(text, rng, how):
            assert ours.feed(piece) == theirs.feed(piece), (text, piece)
        assert ours.flush() == theirs.flush(), text
        # After a flush (input.done) the splitter serves the next utterance from empty.
        assert ours.feed("Next one. And") == theirs.feed("Next one. And")
        assert ours.flush() == theirs.flush()


def test_a_flush_mid_word_speaks_what_is_there_and_the_next_utterance_starts_clean():
    s = TextSplitter("sentence")
    assert s.feed("First sentence. Second is unfin") == ["First sentence."]
    assert s.flush() == ["Second is unfin"]
    assert s.feed("ished. ") == ["ished."]


def test_random_text_cuts_where_the_wheel_cuts():
    Wheel = text_splitter()
    rng = random.Random(11)
    alphabet = "ab1 .,;!?\u2026\u3002\uff0c\"')]\u00bb\u0964 Dr.e.g.3.1"
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        for granularity in ("sentence", "clause"):
            ours, theirs = TextSplitter(granularity), Wheel(granularity)
            for piece in _pieces(text, rng, "random"):
                assert ours.feed(piece) == theirs.feed(piece), text
            assert ours.flush() == theirs.flush(), text


def test_an_unknown_granularity_is_refused_naming_it():
    with pytest.raises(ValueError, match="split_granularity"):
        TextSplitter("word")
