"""End-of-speech shaping: fade length, ramp values, silence length."""

from __future__ import annotations

import numpy as np
import pytest

from gepard_demo.codec import apply_end_of_speech

SR = 22050


def test_fade_then_silence_lengths_and_values():
    audio = np.full(SR, 0.5, dtype=np.float32)  # 1 s
    out = apply_end_of_speech(audio, SR, fade_ms=10.0, silence_ms=100.0)
    n_fade, n_sil = int(SR * 0.010), int(SR * 0.100)  # 220, 2205
    assert out.dtype == np.float32
    assert out.shape == (SR + n_sil,)
    body, fade, silence = out[: SR - n_fade], out[SR - n_fade : SR], out[SR:]
    assert np.all(body == 0.5)
    assert fade[0] == pytest.approx(0.5) and fade[-1] == 0.0
    assert np.all(np.diff(fade) < 0)  # strictly decreasing ramp
    expected = 0.5 * np.linspace(1.0, 0.0, n_fade)
    assert np.allclose(fade, expected, atol=1e-7)
    assert np.all(silence == 0.0)


def test_zero_settings_return_an_equal_copy():
    audio = np.linspace(-1, 1, 1000, dtype=np.float32)
    out = apply_end_of_speech(audio, SR, 0.0, 0.0)
    assert np.array_equal(out, audio) and out is not audio


def test_input_is_not_modified_and_short_audio_fades_whole():
    audio = np.ones(100, dtype=np.float32)
    out = apply_end_of_speech(audio, SR, fade_ms=50.0, silence_ms=0.0)  # 1102 > 100 samples
    assert np.all(audio == 1.0)
    assert out.shape == (100,) and out[0] == 1.0 and out[-1] == 0.0


def test_silence_only_keeps_the_last_sample():
    audio = np.full(500, 0.25, dtype=np.float32)
    out = apply_end_of_speech(audio, SR, fade_ms=0.0, silence_ms=1.0)
    assert out.shape == (500 + 22,) and out[499] == 0.25 and np.all(out[500:] == 0)


def test_negative_durations_are_rejected():
    with pytest.raises(ValueError):
        apply_end_of_speech(np.zeros(10, np.float32), SR, fade_ms=-1.0, silence_ms=0.0)
