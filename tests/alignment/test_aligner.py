"""The aligner on real speech (Piper) whose word edges are known: silences of known length put
between separately spoken pieces (tests/support/alignment_fixtures.py). What it must equal comes from where the
samples were placed, never from the aligner."""

from __future__ import annotations

import numpy as np
import pytest
from tests.support.alignment_fixtures import (  # noqa: F401  (aligner: fixture)
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
    assert aligner_module.MARGIN_S < 30
    from gepard_demo.alignment.whisper_align import max_text_tokens

    assert len(aligner.models) == 2  # the default: tiny.en and base
    for model, tokenizer in aligner.models:
        assert max_text_tokens(model, tokenizer) == 448 - len(tokenizer.sot_sequence) - 2


def test_subtitles_cue_by_sentence_and_pause_and_leave_out_what_no_word_times():
    from gepard_demo.alignment.result import AlignedWord, Alignment
    from gepard_demo.alignment.subtitles import to_srt, to_vtt

    def w(text, s=None, e=None):
        return AlignedWord(text.strip(".,"), text, s, e, 1.0 if s is not None else 0.0, 1.0,
                           "aligned" if s is not None else "unaligned")

    a = Alignment((w("Hello", 0.5, 0.9), w("there.", 0.95, 1.4), w("Wait", 3.0, 3.3), w("for", 3.35, 3.5),
                   w("it", 3.55, 3.7), w("now", 4.8, 5.1), w("lost"), w("words.")))
    assert to_srt(a) == ("1\n00:00:00,500 --> 00:00:01,400\nHello there.\n\n"  # closed by the full stop
                         "2\n00:00:03,000 --> 00:00:03,700\nWait for it\n\n"  # closed by the 1.1 s pause before "now"
                         "3\n00:00:04,800 --> 00:00:05,100\nnow lost words.\n")  # unaligned words ride along, untimed
    assert to_vtt(Alignment((w("Hello", 0.5, 0.9), w("lost."), w("Gone"), w("too.")))) == (
        "WEBVTT\n\nNOTE not in the audio (unaligned): Gone too.\n\n00:00:00.500 --> 00:00:00.900\nHello lost.\n")


@pytest.mark.slow
def test_loading_the_aligner_leaves_the_engines_numbers_alone(tiny_cache_dir, tmp_path):
    """Whisper's DTW is numba code compiled with parallel=True; numba's OpenMP layer, once started,
    moved the engine's p_stop in the 8th digit when torch runs on fewer threads than the cores (the
    speed layer's talker thread): a replayed seed could draw another frame. In a fresh process (the
    layer is process-wide): the same request before and after an alignment gives the same floats.
    Without whisper_align's workqueue choice this fails."""
    import subprocess
    import sys

    script = f"""
import numpy as np
import torch
from gepard_demo.alignment.aligner import Aligner
from gepard_demo.alignment.settings import AlignmentSettings
from gepard_demo.model.engine import GepardEngine
from gepard_demo.settings import SamplingSettings

torch.set_num_threads(1)  # as the speed layer runs the talker: OpenMP's start gave MKL more threads
engine = GepardEngine.load("tiny", cache_dir={str(tiny_cache_dir)!r})
s = SamplingSettings(temperature=1.0, max_frames=40, seed=3, stop_threshold=0.99)
before = list(engine.generate(["The quick brown fox jumps over the lazy dog."], s)[0].p_stop)
aligner = Aligner(AlignmentSettings(weights="tiny.en", cache_dir={str(tmp_path)!r})).load()
aligner.align(np.random.default_rng(0).normal(0, 0.1, 22050 * 2).astype(np.float32), 22050, "hello world")
after = list(engine.generate(["The quick brown fox jumps over the lazy dog."], s)[0].p_stop)
print("same" if before == after else f"moved: {{max(abs(a - b) for a, b in zip(before, after))}}")
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "same", out.stdout
