"""Audio in and out: WAV files, 16 kHz resampling for ASR, VAD trimming."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

ASR_RATE = 16000


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


def to_16k(audio: np.ndarray, sample_rate: int) -> np.ndarray:
    """Mono float32 at 16 kHz; soxr "HQ" (high quality), the make-speech-benchmark choice."""
    audio = np.asarray(audio, np.float32)
    if sample_rate == ASR_RATE:
        return audio
    return soxr.resample(audio, sample_rate, ASR_RATE, quality="HQ").astype(np.float32)


def speech_spans(audio16k: np.ndarray, threshold: float = 0.5, pad_ms: int = 200,
                 min_silence_ms: int = 2000) -> list[tuple[int, int]]:
    """(start, end) sample indices of the speech Silero VAD finds (the ONNX model shipped inside
    faster-whisper): silences shorter than min_silence_ms stay inside a span, each span is
    widened by pad_ms on both sides."""
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    if len(audio16k) == 0:
        return []
    options = VadOptions(threshold=threshold, speech_pad_ms=pad_ms, min_silence_duration_ms=min_silence_ms)
    return [(s["start"], s["end"]) for s in get_speech_timestamps(np.asarray(audio16k, np.float32), options,
                                                                  sampling_rate=ASR_RATE)]


def vad_trim(audio16k: np.ndarray, threshold: float = 0.5, pad_ms: int = 200) -> np.ndarray:
    """Cut leading and trailing non-speech with Silero VAD; pauses inside the speech are kept.
    No speech found: an empty array, so Whisper is not asked to transcribe noise (where
    tiny/base hallucinate, facts §7)."""
    spans = speech_spans(audio16k, threshold, pad_ms)
    if not spans:
        return audio16k[:0]
    return audio16k[spans[0][0] : spans[-1][1]]
