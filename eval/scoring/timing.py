"""Timing and prosody of one utterance: where the speech is (Silero VAD), how fast and with what
pauses it is spoken, and its pitch (SwiftF0). Whisper cannot see a pause: its word timestamps
close over a 2-second silence inside a sentence; the VAD does not.

Every figure, from 16 kHz audio:
- spans: Silero VAD at threshold 0.5, no padding, silences under 100 ms kept inside a span; so
  a pause is a gap of at least 100 ms between two spans.
- speech_s: the spans' total seconds; speech_ratio = speech_s / audio seconds.
- leading_silence_s: audio start -> first span; trailing_silence_s: last span end -> audio end
  (an engine's configured end silence is in it; failures.py allows for that).
- end_of_speech_s: where the last span ends (the stop lag is measured from here).
- pauses: the gaps between spans; pause_count counts gaps of at least PAUSE_S (0.25 s);
  longest_pause_s is the longest gap (0 with one span), less what the text asked for there: a
  `<break time=.../>` (gepard_demo/streaming/breaks.py) excuses its seconds from the one gap
  nearest its place (its words before it / the text's words, against the speech before the gap /
  all the speech, within PLACE_SLACK) that is at least the break less PAUSE_S long (`asked_pauses`).
- speaking_rate_wps: words of the input text / speech_s.
- f0_median_hz, f0_range_st: SwiftF0 (MIT, its ONNX model inside the wheel) on voiced frames
  (confidence >= 0.5); range = 12 log2(p95 / p5) semitones; voiced_ratio = voiced frames /
  frames inside the spans. SwiftF0 was measured against librosa.pyin on 8 Piper sentences of the
  core set (benchmarks/eval_throughput.py section 4): their F0 medians differ by 1.0 Hz (median;
  at most 11.4 Hz), and SwiftF0 costs a tenth of pyin's CPU time with the VAD and the loop
  detector included (0.008 against 0.10 CPU-s per audio second).
No speech found: spans is 0 and every other figure is None (the failure table's no_speech).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from eval.scoring.audio import ASR_RATE, speech_spans
from gepard_demo.streaming.breaks import split_breaks
from gepard_demo.streaming.text_input import TextError

if TYPE_CHECKING:
    from swift_f0 import SwiftF0

PAUSE_S = 0.25
VOICED = 0.5
PLACE_SLACK = 0.25  # how far (a fraction of the speech) a gap may lie from where its break was written


def asked_pauses(text: str) -> list[tuple[float, float]]:
    """The pauses a text's breaks ask for: (where, as the fraction of its words before it; seconds).
    None (an empty list) for a text without a readable break (a bad one was refused before any audio)."""
    try:
        parts = split_breaks(text)
    except TextError:
        return []
    counts = [len(p.text.split()) for p in parts]
    total, out, before = max(sum(counts), 1), [], 0
    for part, n in zip(parts, counts):
        before += n
        if part.pause_s:
            out.append((before / total, part.pause_s))
    return out


def unasked_gaps(spans: list[tuple[float, float]], asked: list[tuple[float, float]]) -> list[float]:
    """The gaps between spans, each less the break that asked for it (asked_pauses: the nearest gap
    to its place, within PLACE_SLACK, at least its length less PAUSE_S; each gap excuses one break)."""
    gaps = [b0 - a1 for (_, a1), (b0, _) in zip(spans, spans[1:])]
    spoken = np.cumsum([b - a for a, b in spans])
    places = [float(spoken[k] / spoken[-1]) if spoken[-1] else 0.0 for k in range(len(gaps))]
    for where, seconds in asked:
        near = [k for k, g in enumerate(gaps) if g >= seconds - PAUSE_S and abs(places[k] - where) <= PLACE_SLACK]
        if near:
            k = min(near, key=lambda k: abs(places[k] - where))
            gaps[k], places[k] = max(0.0, gaps[k] - seconds), float("inf")  # excused once
    return gaps


class SpeechTiming:
    """Measures utterances; holds one pitch tracker (about 20 ms to build)."""

    def __init__(self) -> None:
        self._f0: SwiftF0 | None = None

    def pitch(self, audio16k: np.ndarray):
        if self._f0 is None:
            import swift_f0

            self._f0 = swift_f0.SwiftF0(threads=1, spin=False)
        return self._f0.detect(audio16k, ASR_RATE)

    def measure(self, audio16k: np.ndarray, words: int, asked: list[tuple[float, float]] | None = None) -> dict:
        """asked: the pauses the text's breaks asked for (asked_pauses), not counted as long pauses."""
        audio16k = np.asarray(audio16k, np.float32)
        total = len(audio16k) / ASR_RATE
        spans = [(a / ASR_RATE, b / ASR_RATE) for a, b in speech_spans(audio16k, pad_ms=0, min_silence_ms=100)]
        out = {"audio_s": total, "spans": len(spans), "speech_s": None, "speech_ratio": None,
               "leading_silence_s": None, "trailing_silence_s": None, "end_of_speech_s": None,
               "pause_count": None, "longest_pause_s": None, "speaking_rate_wps": None,
               "f0_median_hz": None, "f0_range_st": None, "voiced_ratio": None}
        if not spans:
            return out
        gaps = [b0 - a1 for (_, a1), (b0, _) in zip(spans, spans[1:])]
        unasked = unasked_gaps(spans, asked or [])
        speech = sum(b - a for a, b in spans)
        out.update(speech_s=speech, speech_ratio=speech / total if total else None,
                   leading_silence_s=spans[0][0], trailing_silence_s=total - spans[-1][1], end_of_speech_s=spans[-1][1],
                   pause_count=sum(g >= PAUSE_S for g in gaps), longest_pause_s=max(unasked, default=0.0),
                   speaking_rate_wps=words / speech if speech > 0 else None)
        pitch = self.pitch(audio16k)
        inside = np.zeros(len(pitch.timestamps), bool)
        for a, b in spans:
            inside |= (pitch.timestamps >= a) & (pitch.timestamps < b)
        voiced = inside & (pitch.confidence >= VOICED)
        if inside.any():
            out["voiced_ratio"] = float(voiced.sum() / inside.sum())
        if voiced.sum() >= 5:
            f0 = pitch.pitch_hz[voiced]
            p5, p95 = np.percentile(f0, [5, 95])
            out.update(f0_median_hz=float(np.median(f0)), f0_range_st=float(12 * math.log2(p95 / p5)))
        return out
