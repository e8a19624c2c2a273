"""A voice-like test sound (sound, not silence) and its bytes in an audio file format."""

import io

import numpy as np
import soundfile as sf


RATE = 22050


def voice_like(seconds: float, rate: int = RATE, f0: float = 140.0, seed: int = 0) -> np.ndarray:
    """A harmonic tone with a syllable-rate envelope and a little noise: sound, not silence."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    tone = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 6))
    env = 0.5 + 0.5 * np.sin(2 * np.pi * 4 * t) ** 2
    return (0.2 * tone * env + 0.01 * rng.standard_normal(t.size)).astype(np.float32)


def wav_bytes(audio: np.ndarray, rate: int = RATE, fmt: str = "WAV", subtype: str | None = None) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, audio, rate, format=fmt, subtype=subtype)
    return buf.getvalue()
