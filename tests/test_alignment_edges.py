"""Word edges where no pause marks them (inside connected speech, after an acronym) and at an
utterance's two ends, on Piper speech with known edges (alignment_fixtures: pieces spoken apart and joined with no gap,
each cut to its own sound). Each bound is met by the aligner as it is and missed by a one-line
breakage of the step it pins (named in each test)."""

from __future__ import annotations

import numpy as np
import pytest
from alignment_fixtures import RATE, aligner, core_sentences, join_errors, joined, thirds, utterance_errors  # noqa: F401

pytestmark = pytest.mark.slow


def test_edges_inside_connected_speech_land_near_the_word_boundary(aligner):  # noqa: F811
    # 20 sentences, 40 joins, 80 edges. The default aligner averages tiny.en's spans (late, by up to
    # 0.3 s on a short word) and base's (early): median 6 ms, max 156 ms measured. One model alone
    # (mean_spans returning the first model's spans) gives 25 / 321 ms and fails both bounds; no
    # dip step (DIP_S = 0) fails the median.
    errors = []
    for sentence in core_sentences(20, least=8, most=20):
        sp = joined(thirds(sentence))
        a = aligner.align(sp.audio, RATE, sp.text)
        assert all(w.timed for w in a.words), [(w.word, w.state) for w in a.words]
        errors += join_errors(a, sp)
    e = np.abs(errors)
    assert len(e) == 80 and np.median(e) <= 0.015 and e.max() <= 0.25, (np.median(e), np.quantile(e, 0.9), e.max())
    assert abs(np.median(errors)) <= 0.02, np.median(errors)  # no lean either way


def test_an_acronym_ends_where_its_letters_end(aligner):  # noqa: F811
    # An acronym is said letter by letter; as one or two tokens the DTW ended it 0.1-0.34 s early
    # (median 0.25 s at these six joins). Spelled for Whisper ("G P S": words.whisper_text) each
    # letter takes its own frames: median 3 ms, max 143 ms measured. `whisper_text` returning the
    # acronym as written fails both bounds.
    pairs = [("The GPS", "says we are 2 km away."), ("The FBI", "and the CIA shared the report."),
             ("The BBC", "reported heavy snow in the UK."), ("The USB", "cable is in the top drawer."),
             ("The CEO", "gave a speech at the AGM."), ("She works for IBM", "in the R and D department.")]
    errors = []
    for first, second in pairs:
        sp = joined([first, second])
        errors += join_errors(aligner.align(sp.audio, RATE, sp.text), sp)
    e = np.abs(errors)
    assert np.median(e) <= 0.03 and e.max() <= 0.2, errors


def test_the_ensemble_averages_the_spans_that_gave_a_word_frames():
    # A word one model gave no frame (start == end) takes the other's span: averaging in the
    # empty point would pull its edges toward wherever that model squeezed it. Where neither timed
    # it, it stays frameless, so refine calls it unaligned (a truncation's lost words).
    from gepard_demo.alignment.aligner import mean_spans

    tiny = [(0.30, 0.50, 0.9), (0.50, 0.80, 0.8), (2.0, 2.0, 0.1)]
    base = [(0.20, 0.40, 0.7), (0.80, 0.80, 0.6), (2.0, 2.0, 0.3)]
    got = mean_spans([tiny, base])
    assert got[0] == pytest.approx((0.25, 0.45, 0.8))
    assert got[1] == pytest.approx((0.50, 0.80, 0.7))  # base's empty point left out
    assert got[2] == pytest.approx((2.0, 2.0, 0.2))  # neither timed it: still no frame
    assert mean_spans([tiny]) == tiny


@pytest.mark.parametrize("margin_s", [0.0, 0.3])
def test_an_utterances_first_and_last_edges_are_its_speechs_own(aligner, margin_s):  # noqa: F811
    # With no silence after the last word (a TTS utterance's end) and with 0.3 s of it. Each
    # breakage fails: PAD_S = 0 (the end-of-text row takes the last word's frames: "copies" 95 ms
    # early, 81 ms median with no tail), no widening of the VAD's late start (20-50 ms late), no
    # _reach_end (the last word short of its speech's end by up to 95 ms).
    firsts, lasts = [], []
    for sentence in core_sentences(12):
        sp = joined(thirds(sentence), lead_s=margin_s, tail_s=margin_s)
        first, last = utterance_errors(aligner.align(sp.audio, RATE, sp.text), sp)
        firsts.append(first)
        lasts.append(last)
    assert max(np.abs(firsts)) <= 0.03, firsts
    assert max(np.abs(lasts)) <= 0.03, lasts


def test_a_subtitle_cue_closes_at_its_word_cap():
    from gepard_demo.alignment.result import AlignedWord, Alignment
    from gepard_demo.alignment.subtitles import cues

    words = "one two three four five six seven eight nine ten".split()  # no stop, no pause
    a = Alignment(tuple(AlignedWord(w, w, 0.5 + 0.3 * i, 0.75 + 0.3 * i, 1.0, 1.0, "aligned") for i, w in enumerate(words)))
    got, lost = cues(a)
    assert not lost
    assert [text for _, _, text in got] == ["one two three four five six seven", "eight nine ten"]
    assert got[0][:2] == (0.5, 0.75 + 0.3 * 6) and got[1][:2] == (0.5 + 0.3 * 7, 0.75 + 0.3 * 9)


def test_the_dtw_itself_ends_the_last_word_where_its_sound_ends(aligner):  # noqa: F811
    # No silence after the last word: the end-of-text row of Whisper's DTW takes the frames after
    # the last word, and with none there it took the last word's own (81 ms early in the median,
    # "copies" 150 ms). PAD_S of silence around each window gives it its own (PAD_S = 0 fails this).
    from gepard_demo.alignment.speech import to_16k
    from gepard_demo.alignment.whisper_align import align_window, piece_tokens

    model, tokenizer = aligner.models[0]  # tiny.en's own DTW
    ends = []
    for sentence in core_sentences(12):
        sp = joined(thirds(sentence), lead_s=0.0, tail_s=0.0)
        words = [w.strip(".,!?") for w in sp.text.split()]
        got = align_window(model, tokenizer, to_16k(sp.audio, RATE), piece_tokens(tokenizer, words))
        ends.append(got[-1].end - sp.edges[-1][1])
    assert np.median(np.abs(ends)) <= 0.03 and max(np.abs(ends)) <= 0.1, ends

