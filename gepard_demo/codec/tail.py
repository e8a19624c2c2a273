"""End-of-speech shaping, applied once to the last audio of a stream.

The codec leaves the waveform on a non-zero sample; cutting to silence there clicks. A linear
fade over the final fade_ms removes the click (padding alone does not), then silence_ms of
zeros gives players a clean tail. Sample counts use int(sr * ms / 1000), as vLLM-Omni does.
"""

from __future__ import annotations

import numpy as np


def tail_lengths(sample_rate: int, fade_ms: float, silence_ms: float) -> tuple[int, int]:
    if fade_ms < 0 or silence_ms < 0:
        raise ValueError(f"fade_ms and silence_ms must be >= 0, got {fade_ms}, {silence_ms}")
    return int(sample_rate * fade_ms / 1000.0), int(sample_rate * silence_ms / 1000.0)


def apply_end_of_speech(audio, sample_rate: int, fade_ms: float = 0.0, silence_ms: float = 0.0) -> np.ndarray:
    """Fade the final fade_ms linearly to exactly zero, then append silence_ms of zeros.

    The fade's first sample keeps gain 1 and its last is 0; audio shorter than the fade is
    faded over its whole length. Returns a new float32 array; the input is not modified.
    """
    out = np.array(audio, dtype=np.float32, copy=True).reshape(-1)
    n_fade, n_silence = tail_lengths(sample_rate, fade_ms, silence_ms)
    n_fade = min(n_fade, out.shape[0])
    if n_fade > 0:
        out[-n_fade:] *= np.linspace(1.0, 0.0, n_fade, dtype=np.float32)
    if n_silence > 0:
        out = np.concatenate([out, np.zeros(n_silence, dtype=np.float32)])
    return out
