"""The aligner on real speech (Piper) whose word edges are known: silences of known length put
between separately spoken pieces (alignment_fixtures.py). What it must equal comes from where the
samples were placed, never from the aligner."""

from __future__ import annotations

import numpy as np
import pytest
from alignment_fixtures import (  # noqa: F401  (aligner: fixture)
    RATE,
    SENTENCE_GAPS,
    SENTENCES,
    WORD_GAPS,
    WORDS,
    aligner,
    boundary_errors,
    say,
    spoken,
    trimmed,
)

from gepard_demo.alignment import aligner as aligner_module
from gepard_demo.alignment.aligner import NO_SPEECH, NO_WORDS

EDGE_S = 0.1  # every edge next to a silence within 100 ms (measured: at most 55 ms, docs/PERFORMANCE.md §10)


def _overlap(w, a, b):
    return max(0.0, min(b, w.end) - max(a, w.start))


@pytest.mark.parametrize("pieces, gaps", [(SENTENCES, SENTENCE_GAPS), (WORDS, WORD_GAPS)], ids=["sentences", "words"])
def test_edges_next_to_inserted_silences_are_found(aligner, pieces, gaps):
    sp = spoken(pieces, gaps)
    alignment = aligner.align(sp.audio, RATE, sp.text)
    assert [w.state for w in alignment.words] == ["aligned"] * len(sp.text.split())
    errors = np.abs(boundary_errors(alignment, sp))
    assert errors.max() <= EDGE_S, errors
    # No word reaches into a silence between two pieces (the DTW alone hands each silence to a word).
    for (_, end), (start, _) in zip(sp.edges, sp.edges[1:]):
        assert max(_overlap(w, end, start) for w in alignment.words) <= 0.06, (end, start)


def test_words_a_truncation_lost_come_out_unaligned_or_low(aligner):
    kept, lost = "The quick brown fox jumps over", "the lazy dog and then it runs into the park."
    sp = spoken([kept, lost], [0.3])
    cut = int(sp.edges[0][1] * RATE) + int(0.05 * RATE)  # the audio ends just after the first piece
    alignment = aligner.align(sp.audio[:cut], RATE, sp.text)
    n = len(kept.split())
    assert [w.state for w in alignment.words[:n]] == ["aligned"] * n
    assert all(w.state in ("unaligned", "low") for w in alignment.words[n:]), alignment.words[n:]
    assert all(w.start is None or w.start >= sp.edges[0][1] - EDGE_S for w in alignment.words[n:])


def test_a_cut_inside_speech_loses_the_words_after_it(aligner):
    """A truncation as Gepard makes one: the audio stops mid-sentence, inside a word."""
    sp = spoken(["The quick brown fox jumps", "over the lazy dog and then it runs into the park."], [0.25])
    second = trimmed(say("over the lazy dog and then it runs into the park."))
    cut = int(sp.edges[1][0] * RATE) + len(second) // 5  # a fifth into "over the lazy dog ..."
    alignment = aligner.align(sp.audio[:cut], RATE, sp.text)
    tail = alignment.words[-6:]  # "and then it runs into the park." is long gone
    assert all(w.state in ("unaligned", "low") for w in tail), tail
    assert [w.state for w in alignment.words[:5]] == ["aligned"] * 5


def test_a_repeated_phrase_is_not_silently_absorbed(aligner):
    """A loop: the audio says a phrase twice, the text once. The words the aligner vouches for
    cannot account for the second copy: the span holding it is low confidence."""
    a, b, c = "The quick brown fox", "jumps over the lazy dog", "and then it runs into the park."
    sp = spoken([a, b, b, c], [0.15, 0.15, 0.15])
    alignment = aligner.align(sp.audio, RATE, " ".join([a, b, c]))
    (b1_start, b1_end), (b2_start, b2_end) = sp.edges[1], sp.edges[2]
    copy_s = b1_end - b1_start
    vouched = sum(_overlap(w, b1_start, b2_end) for w in alignment.words if w.state == "aligned")
    assert vouched <= copy_s + 0.3, (vouched, copy_s, alignment.words)
    assert any(w.state != "aligned" and _overlap(w, b1_start, b2_end) > 0.2 for w in alignment.words)
    assert [w.state for w in alignment.words[:4]] == ["aligned"] * 4  # before the loop: untouched


@pytest.mark.parametrize("audio", [np.zeros(3 * RATE, np.float32),
                                   np.random.default_rng(1).normal(0, 0.2, 3 * RATE).astype(np.float32)],
                         ids=["silence", "white-noise"])
def test_no_speech_means_no_timestamps_and_whisper_is_never_asked(aligner, audio, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("Whisper was run on audio without speech")

    monkeypatch.setattr("gepard_demo.alignment.whisper_align.align_window", never)
    alignment = aligner.align(audio, RATE, "Nobody said anything here.")
    assert alignment.words == () and alignment.note == NO_SPEECH


@pytest.mark.parametrize("text", ["!!! ... ?", "😀 🎉", "— – …"])
def test_text_without_words_means_no_timestamps(aligner, text):
    alignment = aligner.align(say("Hello there."), RATE, text)
    assert alignment.words == () and alignment.note == NO_WORDS


def test_audio_past_one_whisper_window_is_aligned_window_by_window(aligner):
    """Longer than Whisper's 30 s: every word still timed, the edges as good past the window."""
    pieces = [f"{s} {t}" for s, t in zip(SENTENCES * 3, ["Truly.", "Indeed.", "Quite so."] * 3)]
    sp = spoken(pieces, [1.5] * len(pieces))
    assert len(sp.audio) / RATE > 33  # past one window and its 2 s margin
    alignment = aligner.align(sp.audio, RATE, sp.text)
    assert all(w.timed for w in alignment.words), [w for w in alignment.words if not w.timed]
    assert alignment.counts["aligned"] >= 0.9 * len(alignment.words), alignment.counts
    errors = np.abs(boundary_errors(alignment, sp))
    assert errors.max() <= EDGE_S, errors


def test_one_window_takes_what_whisper_can_read(aligner):
    """The token budget: a window is given at most the decoder's context."""
    model, tokenizer = aligner._model
    assert aligner_module.MARGIN_S < 30
    from gepard_demo.alignment.whisper_align import max_text_tokens

    assert max_text_tokens(model, tokenizer) == 448 - len(tokenizer.sot_sequence) - 2
