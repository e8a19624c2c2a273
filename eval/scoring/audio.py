"""Audio in and out: WAV files, 16 kHz resampling for ASR (gepard_demo/alignment/speech.py), VAD trimming."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf

# Resampling and the VAD are the aligner's too (gepard_demo never imports eval): defined there.
from gepard_demo.alignment.speech import ASR_RATE, speech_spans, to_16k

__all__ = ["ASR_RATE", "read_mono", "speech_spans", "to_16k", "vad_trim", "write_wav_atomic"]


def write_wav_atomic(path: str | Path, audio: np.ndarray, sample_rate: int) -> None:
    """16-bit PCM WAV, written to a temp file in the same folder then renamed, so a killed
    run never leaves a half-written WAV under the final name."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".wav.tmp")
    os.close(fd)
    try:
        sf.write(tmp, np.clip(np.asarray(audio, np.float32), -1.0, 1.0), sample_rate, subtype="PCM_16", format="WAV")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def read_mono(path: str | Path) -> tuple[np.ndarray, int]:
    audio, sr = sf.read(str(path), dtype="float32", always_2d=True)
    return audio.mean(axis=1), sr


def vad_trim(audio16k: np.ndarray, threshold: float = 0.5, pad_ms: int = 200) -> np.ndarray:
    """Cut leading and trailing non-speech with Silero VAD; pauses inside the speech are kept.
    No speech found: an empty array, so Whisper is not asked to transcribe noise (where
    tiny/base hallucinate, facts §7)."""
    spans = speech_spans(audio16k, threshold, pad_ms)
    if not spans:
        return audio16k[:0]
    return audio16k[spans[0][0] : spans[-1][1]]
