"""DNSMOS (P.835 SIG / BAK / OVRL and P.808), a predictor of how natural a clip sounds.

Never a ranking figure: a MOS predictor scores a looped clip about as high as a clean one (it
hears voice quality, not whether the words are right), so sweeps and the failure table do not
use it; the report gives it its own section.

From the `speechmos` package (MIT; Microsoft's ONNX models ship in its wheel). The audio is
prepared the way make-speech-benchmark prepares it: 16 kHz, cut to the speech (Silero VAD's
first to last span, 200 ms padding), peak-normalised to 0.99. Guarded: speechmos repeats a
clip until it is 9 s long with `while len(audio) < 9 s: audio = append(audio, audio)`, which
never ends on an empty one, so a clip with under MIN_SPEECH_S of speech (empty, silent, noise
the VAD rejects) scores None instead. A clip longer than 9 s is scored on 9 s windows every
second, averaged (speechmos's own rule).
"""

from __future__ import annotations

import numpy as np

from eval.scoring.audio import ASR_RATE, speech_spans

MIN_SPEECH_S = 1.0
PEAK = 0.99
FIELDS = {"ovrl_mos": "dnsmos_ovrl", "sig_mos": "dnsmos_sig", "bak_mos": "dnsmos_bak", "p808_mos": "dnsmos_p808"}


def prepare(audio16k: np.ndarray) -> np.ndarray | None:
    """The speech of a clip, peak-normalised; None when there is too little of it to score."""
    audio16k = np.asarray(audio16k, np.float32)
    spans = speech_spans(audio16k, pad_ms=200)
    if not spans:
        return None
    speech = audio16k[spans[0][0] : spans[-1][1]]
    peak = float(np.abs(speech).max()) if speech.size else 0.0
    if speech.size < MIN_SPEECH_S * ASR_RATE or peak <= 1e-6:
        return None
    return (speech * (PEAK / peak)).astype(np.float32)


def dnsmos(audio16k: np.ndarray) -> dict:
    """{dnsmos_ovrl, dnsmos_sig, dnsmos_bak, dnsmos_p808}: floats, or all None (module docstring)."""
    speech = prepare(audio16k)
    if speech is None:
        return dict.fromkeys(FIELDS.values())
    from speechmos import dnsmos as model

    scores = model.run(speech, ASR_RATE)
    return {ours: float(scores[theirs]) for theirs, ours in FIELDS.items()}
