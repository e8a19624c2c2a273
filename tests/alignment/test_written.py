"""The written token over the span of the spoken words it became (alignment/written.py): the aligner
is given what was said, and each written word is timed from its piece's first spoken word to its
last, on the server's word timestamps and the page's captions alike (serving/timestamps.py and
ui/captions.py call the same function). The aligner here is a stand-in that times word i of what it
is given at [i, i + 0.5] s and records that text, so the mapping itself is what is checked."""

from __future__ import annotations

import numpy as np

from gepard_demo.alignment.result import AlignedWord, Alignment
from gepard_demo.alignment.subtitles import to_srt
from gepard_demo.alignment.words import text_words
from gepard_demo.alignment.written import align_written
from gepard_demo.serving.timestamps import align_segments
from gepard_demo.settings import SamplingSettings


class CountingAligner:
    def __init__(self):
        self.given: list[str] = []

    def align(self, audio, rate, text):
        self.given.append(text)
        low = {"fifty"}  # one spoken word the aligner is not sure of
        return Alignment(tuple(AlignedWord(w.word, w.written, float(i), i + 0.5, 0.3 if w.word in low else 0.9, 0.8,
                                           "low" if w.word in low else "aligned", "unsure" if w.word in low else "")
                               for i, w in enumerate(text_words(text))), audio_s=len(audio) / rate)


def test_a_written_token_spans_the_words_it_was_read_as():
    aligner = CountingAligner()
    got = align_written(aligner, np.zeros(22050, np.float32), 22050, "It costs $5.50 today.", "rules")
    assert aligner.given == ["It costs five dollars fifty cents today."]
    assert [(w.written, w.start, w.end, w.state) for w in got.words] == [
        ("It", 0.0, 0.5, "aligned"), ("costs", 1.0, 1.5, "aligned"),
        ("$5.50", 2.0, 5.5, "low"),  # five(2) dollars(3) fifty(4, low) cents(5)
        ("today.", 6.0, 6.5, "aligned")]
    assert [w.word for w in got.words] == [w.word for w in text_words("It costs $5.50 today.")]  # the wire's words
    assert got.words[2].confidence == 0.3
    assert "$5.50" in to_srt(got)


def test_as_written_the_aligner_gets_the_text_and_segments_keep_their_reading():
    aligner = CountingAligner()
    align_written(aligner, np.zeros(100, np.float32), 22050, "It costs $5.50.")  # off: nothing read otherwise
    assert aligner.given == ["It costs $5.50."]
    said = align_segments(aligner, np.zeros(4096, np.float32), 22050, ["Call SQL.", "At 9 a.m. sharp."], [2, 2], 1024,
                          [0, 0], SamplingSettings(text_normalization="rules", lexicon_entries="SQL = sequel"))
    assert aligner.given[1:] == ["Call sequel.", "At nine a m sharp."]
    assert [w.written for w in said.words] == ["Call", "SQL.", "At", "9", "a.m.", "sharp."]
    # "9 a.m." is one piece read "nine a m" (words 1-3): each written token over all three, placed
    # after the first segment's 2 frames.
    nine, am = said.words[3], said.words[4]
    assert (nine.start, nine.end) == (am.start, am.end) == (1.0 + 2048 / 22050, 3.5 + 2048 / 22050)
