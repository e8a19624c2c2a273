"""The one aligner: the words of the text we asked for, timed in the audio that came out.

    aligner = Aligner(AlignmentSettings())          # weights load on the first call
    alignment = aligner.align(samples, 22050, "The text that was requested.")
    alignment.words                                 # AlignedWord: word, start, end, confidence, state

What it does, in order (each step's module says how):
1. words.py: the text's timeable words (vLLM-Omni's cut); none: no timestamps, a line saying why.
2. speech.py: Silero VAD; no speech: no timestamps, a line saying so, and Whisper is never run
   (on noise, facts §7). Forced alignment itself is one teacher-forced pass, so it cannot hang.
3. whisper_align.py: openai-whisper's forced alignment, one window of at most 30 s and as many
   words as its decoder takes (about 440 tokens). Longer audio goes window by window: the words a
   window times before its last 2 s are kept, the next window starts where the last of them ended;
   a window that times none of the words (30 s of babble) is passed over. Each model reads its
   cross-attention two ways (whisper_align.head_sets), and with several weights (settings.ENSEMBLE,
   the default) each model times the words on its own: each word's span is the median of all
   these readings' spans that gave it a frame (`median_spans`).
4. refine.py: word edges into the pauses, each word's confidence and state.

One alignment at a time per Aligner (a lock: openai-whisper reads the attention through hooks on
the shared model). Callers run it off any path a listener or Stop waits on.
"""

from __future__ import annotations

import contextlib
import logging
import statistics
import threading
import time
from typing import TYPE_CHECKING

import numpy as np

from .result import Alignment
from .settings import AlignmentSettings
from .speech import ASR_RATE, hiss, levels, speech_seconds, to_16k
from .words import TextWord, text_words, whisper_text

if TYPE_CHECKING:
    from whisper.model import Whisper
    from whisper.tokenizer import Tokenizer

MARGIN_S = 2.0  # a window's words ending this close to its end wait for the next window
MIN_SPEECH_S = 0.1  # less speech than this is no speech (Whisper would invent words)
NO_WORDS = "no alignable words in the text (only punctuation, symbols or emoji): no timestamps"
NO_SPEECH = "no speech found in the audio (Silero VAD): no timestamps"
log = logging.getLogger(__name__)


@contextlib.contextmanager
def _no_denormals():
    """Whisper's GELUs leave denormal floats (x Phi(x) for x below -13), which x86 multiplies about
    5x slower (measured: 1.0 against 0.21 CPU-s for 6 s of audio on tiny.en). Flushed to zero for
    the alignment only: the flag is the calling thread's (MXCSR), so the TTS engine's numbers on
    other threads are untouched, and it is put back after."""
    import torch

    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


class Aligner:
    def __init__(self, settings: AlignmentSettings = AlignmentSettings()):
        self.settings = settings
        self._models: list[tuple[Whisper, Tokenizer]] | None = None  # (model, tokenizer) per member
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._models is not None

    @property
    def models(self) -> list[tuple[Whisper, Tokenizer]]:
        """(model, tokenizer) per member of the weights, in their order (loaded on first use)."""
        with self._lock, _no_denormals():
            return list(self._load())

    def load(self) -> "Aligner":
        """Load the weights now (else the first align does): a converted checkpoint is cached."""
        with self._lock, _no_denormals():
            self._load()
        return self

    def _load(self) -> list[tuple[Whisper, Tokenizer]]:
        """Under the lock: the members, loaded on the first call."""
        if self._models is None:
            from .whisper_align import align_window, load_whisper, piece_tokens

            s = self.settings
            models = [load_whisper(w, s.cache_dir, s.trim_context) for w in s.members]
            # One throwaway pass: the DTW is numba code compiled on its first call (about 2 s),
            # which the first visitor's words would otherwise wait for.
            noise = np.random.default_rng(0).normal(0, 0.01, ASR_RATE).astype(np.float32)
            for model, tokenizer in models:
                align_window(model, tokenizer, noise, piece_tokens(tokenizer, ["warm", "up"]))
            self._models = models
        return self._models

    def align(self, audio: np.ndarray, sample_rate: int, text: str) -> Alignment:
        t0 = time.perf_counter()
        x = to_16k(np.asarray(audio, np.float32).reshape(-1), sample_rate)
        audio_s = len(x) / ASR_RATE
        weights = self.settings.weights

        def done(words=(), note: str = "") -> Alignment:
            return Alignment(tuple(words), audio_s, time.perf_counter() - t0, weights, note)

        words = text_words(text)
        if not words:
            return done(note=NO_WORDS)
        level = levels(x)
        speech = speech_seconds(x, level)
        if sum(e - s for s, e in speech) < MIN_SPEECH_S:
            return done(note=NO_SPEECH)
        with self._lock, _no_denormals():
            raw = median_spans([r for model, tokenizer in self._load() for r in _raw_spans(model, tokenizer, x, words)])
        from .refine import refine

        return done(refine(words, raw, speech, self.settings.low_confidence, level, hiss(x)))


def _raw_spans(model, tokenizer, x: np.ndarray, words: list[TextWord]) -> list[list[tuple[float, float, float]]]:
    """Per reading (whisper_align.head_sets), each word's DTW span (seconds) and probability, window
    by window (module doc, step 3). The windows follow the first reading (the official heads)."""
    from .whisper_align import WINDOW_S, align_window, head_sets, max_text_tokens, piece_tokens

    written = list(dict.fromkeys((w.piece, w.written) for w in words))  # pieces in order
    tokens = piece_tokens(tokenizer, [whisper_text(w) for _, w in written])
    budget = max_text_tokens(model, tokenizer)
    tokens = [t[:budget] for t in tokens]
    total = len(x) / ASR_RATE
    pieces: list[list[tuple[float, float, float] | None]] = [[None] * len(tokens) for _ in head_sets(model)]
    t, i = 0.0, 0
    while i < len(tokens) and total - t >= MIN_SPEECH_S:
        end = min(total, t + WINDOW_S)
        last_window = end >= total - 1e-6
        j, n = i, 0
        while j < len(tokens) and n + len(tokens[j]) <= budget:
            n += len(tokens[j])
            j += 1
        got = align_window(model, tokenizer, x[int(t * ASR_RATE): int(end * ASR_RATE)], tokens[i:j])
        if last_window and j == len(tokens):
            keep: int | None = j - 1
        else:
            timed = [k for k, r in enumerate(got[0]) if r.end > r.start and t + r.end <= end - MARGIN_S]
            keep = i + timed[-1] if timed else None
        if keep is None:  # nothing of the text in this window: go past it
            t = end - MARGIN_S if not last_window else total
            continue
        for reading, spans in zip(got, pieces):
            for k in range(i, keep + 1):
                r = reading[k - i]
                spans[k] = (t + r.start, t + r.end, r.probability)
        t, i = t + got[0][keep - i].end, keep + 1
    return [_word_spans(spans, words, total) for spans in pieces]


def _word_spans(pieces: list[tuple[float, float, float] | None], words: list[TextWord],
                total: float) -> list[tuple[float, float, float]]:
    """Each word's span from its piece's (a CJK piece's words share it in equal parts)."""
    out = []
    for w in words:
        span = pieces[w.piece]
        if span is None:  # never reached: no frame of its own
            out.append((total, total, 0.0))
            continue
        share = [v for v in words if v.piece == w.piece]
        k, n = share.index(w), len(share)
        a, b, p = span
        out.append((a + (b - a) * k / n, a + (b - a) * (k + 1) / n, p))
    return out


def median_spans(readings: list[list[tuple[float, float, float]]]) -> list[tuple[float, float, float]]:
    """One span per word from each reading's: the median start and end of those that gave it a
    frame (of all, where none did: refine then calls it unaligned, or squeezed when Whisper heard
    it), with the mean probability. A median, not a mean: a reading 0.2-0.6 s off on a word is
    outvoted rather than averaged in (measured in benchmarks/alignment_cost.py)."""
    from .refine import has_frame

    out = []
    for spans in zip(*readings):
        timed = [s for s in spans if has_frame(s)] or list(spans)
        out.append((statistics.median(s[0] for s in timed), statistics.median(s[1] for s in timed),
                    sum(s[2] for s in spans) / len(spans)))
    return out
