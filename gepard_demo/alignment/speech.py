"""Where the speech is: 16 kHz resampling and Silero VAD spans (the ONNX model inside
faster-whisper). The aligner asks it first (no speech: no Whisper at all, facts §7) and snaps word
edges to its silences; eval's timing, naturalness and ASR trimming use the same two functions
(eval/scoring/audio.py takes them from here). Two measures per 10 ms window, `levels` and `hiss`,
are what refine.py reads word edges from inside speech."""

from __future__ import annotations

import numpy as np
import soxr

ASR_RATE = 16000  # Whisper's and Silero's rate


def to_16k(audio: np.ndarray, sample_rate: int) -> np.ndarray:
    """Mono float32 at 16 kHz; soxr "HQ" (high quality), the make-speech-benchmark choice."""
    audio = np.asarray(audio, np.float32)
    if sample_rate == ASR_RATE:
        return audio
    return soxr.resample(audio, sample_rate, ASR_RATE, quality="HQ").astype(np.float32)


def speech_spans(audio16k: np.ndarray, threshold: float = 0.5, pad_ms: int = 200,
                 min_silence_ms: int = 2000) -> list[tuple[int, int]]:
    """(start, end) sample indices of the speech Silero VAD finds: silences shorter than
    min_silence_ms stay inside a span, each span is widened by pad_ms on both sides."""
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    if len(audio16k) == 0:
        return []
    options = VadOptions(threshold=threshold, speech_pad_ms=pad_ms, min_silence_duration_ms=min_silence_ms)
    return [(s["start"], s["end"]) for s in get_speech_timestamps(np.asarray(audio16k, np.float32), options,
                                                                  sampling_rate=ASR_RATE)]


LEVEL_WINDOW = 160  # 10 ms
QUIET_DB = 35.0  # a 10 ms window this far below the loudest one is not speech
PAUSE_MS = 100  # a quiet stretch this long is a pause between spans; a shorter one lies inside speech


def levels(audio16k: np.ndarray) -> np.ndarray:
    """The level of each whole LEVEL_WINDOW (10 ms) of the audio, in dB (mean square)."""
    x = np.asarray(audio16k, np.float32)
    n = len(x) // LEVEL_WINDOW
    return 10 * np.log10((x[: n * LEVEL_WINDOW].reshape(n, LEVEL_WINDOW).astype(np.float64) ** 2).mean(axis=1) + 1e-12)


HISS_HZ = 4000  # a sibilant's noise lies above this; a vowel's or a nasal's energy mostly below
HISS_WINDOW = 4 * LEVEL_WINDOW  # 40 ms (Hann) centred on each 10 ms window: enough bins for the split


def hiss(audio16k: np.ndarray) -> np.ndarray:
    """For each whole LEVEL_WINDOW of the audio: its energy above HISS_HZ over its energy from
    100 Hz to HISS_HZ, in dB; refine's hiss step reads where a sibilant ends from it. Measured on
    Piper: the last 50 ms of words ending in a sibilant, median +12 dB (a quarter under +5); speech
    as a whole, median -31 dB. Digital silence reads 0 dB (nothing over nothing): the step only
    looks inside speech."""
    x = np.asarray(audio16k, np.float32)
    n = len(x) // LEVEL_WINDOW
    pad = (HISS_WINDOW - LEVEL_WINDOW) // 2
    x = np.pad(x[: n * LEVEL_WINDOW], (pad, pad))
    bin_hz = ASR_RATE / HISS_WINDOW
    lo, split = int(100 / bin_hz), int(HISS_HZ / bin_hz)
    taper = np.hanning(HISS_WINDOW).astype(np.float32)
    out = np.empty(n)
    for a in range(0, n, 1000):  # 10 s at a time: the frames overlap 4x, so bound their copy
        b = min(n, a + 1000)
        frames = np.lib.stride_tricks.sliding_window_view(x[a * LEVEL_WINDOW: b * LEVEL_WINDOW + 2 * pad],
                                                          HISS_WINDOW)[::LEVEL_WINDOW]
        power = np.abs(np.fft.rfft(frames * taper, axis=1)) ** 2
        out[a:b] = 10 * np.log10((power[:, split:].sum(axis=1) + 1e-10) / (power[:, lo:split].sum(axis=1) + 1e-10))
    return out


def speech_seconds(audio16k: np.ndarray, level: np.ndarray | None = None) -> list[tuple[float, float]]:
    """The speech as (start, end) seconds at the aligner's resolution: Silero's spans (no padding,
    pauses of 100 ms or more are gaps, a word edge snaps to them), each fitted to the 10 ms windows
    within QUIET_DB of the loudest. Silero decides on 32 ms windows, so its edges are off both
    ways: it holds a span open after the speech (measured on Piper: 30-80 ms past a word's end),
    which would give the next word, lost in a truncation, a place in the audio, so a span is
    tightened to its first and last loud window; and it opens a span late, on a soft onset ("h",
    "f", a breathy vowel: 20-50 ms after the sound starts, every one of 12 sentences), so a span
    is widened while the windows just outside it are loud too, never into the span before or after.
    Widening back also crosses a quiet stretch shorter than a pause to the loud windows before it:
    Silero can miss a short first word whole (a "The" at the audio's first sample, then a stop's
    closure: its span opened at 0.12 s, after the word; 6 of 60 Piper starts measured), and a
    stretch that short is not a pause by this function's own rule.
    level: the audio's levels() when the caller has them already."""
    x = np.asarray(audio16k, np.float32)
    level = levels(x) if level is None else level
    n = len(level)
    if n == 0:
        return []
    loud = level >= level.max() - QUIET_DB
    windows = []
    for a, b in speech_spans(x, pad_ms=0, min_silence_ms=PAUSE_MS):
        i, j = a // LEVEL_WINDOW, min(n, -(-b // LEVEL_WINDOW))
        hits = np.nonzero(loud[i:j])[0]
        if len(hits):
            windows.append([i + hits[0], i + hits[-1] + 1])
    pause = PAUSE_MS * ASR_RATE // 1000 // LEVEL_WINDOW
    for k, w in enumerate(windows):
        floor = windows[k - 1][1] if k else 0
        while True:
            while w[0] > floor and loud[w[0] - 1]:
                w[0] -= 1
            before = np.nonzero(loud[max(floor, w[0] - pause): w[0]])[0]
            if not len(before):
                break
            w[0] = max(floor, w[0] - pause) + before[-1] + 1
        ceiling = windows[k + 1][0] if k + 1 < len(windows) else n
        while w[1] < ceiling and loud[w[1]]:
            w[1] += 1
    return [(float(a) * LEVEL_WINDOW / ASR_RATE, float(b) * LEVEL_WINDOW / ASR_RATE) for a, b in windows]
