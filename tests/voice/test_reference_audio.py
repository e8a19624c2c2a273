"""Reference audio's decoding (gepard_demo/voice/reference_audio.py) bounded before it decodes: a
small compressed file holding an hour is refused from its header, with memory flat; a file past
the window is never decoded past it; libsndfile's reason without a Python repr. The prefix made
from a reference: tests/voice/test_speaker_prefix.py."""

from __future__ import annotations

import io
import shutil
import subprocess
import tracemalloc

import numpy as np
import pytest
import soundfile as sf

from gepard_demo.voice.reference_audio import MAX_FILE_S, ReferenceAudioError, decode_audio


def _encoded(samples: np.ndarray, rate: int, fmt: str, channels: int = 1) -> bytes:
    buf = io.BytesIO()
    data = samples if channels == 1 else np.stack([samples] * channels, axis=1)
    sf.write(buf, data, rate, format=fmt, subtype="PCM_16")
    return buf.getvalue()


@pytest.fixture(scope="module")
def hour_of_silence() -> bytes:
    """An hour of 8-kHz silence as FLAC: a small file (issue 62 measured 87 KB) that took 6.5-9 s
    and up to 0.8 GB to decode whole before its 400."""
    buf = io.BytesIO()
    with sf.SoundFile(buf, "w", 8000, 1, format="FLAC", subtype="PCM_16") as f:
        block = np.zeros(8000 * 60, np.int16)
        for _ in range(60):
            f.write(block)
    return buf.getvalue()


def test_an_hour_in_a_small_file_is_refused_from_its_header_with_memory_flat(hour_of_silence):
    assert len(hour_of_silence) < 1_000_000
    tracemalloc.start()
    try:
        with pytest.raises(ReferenceAudioError, match="holds 3600 s of audio; at most 60 s"):
            decode_audio(hour_of_silence)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20, f"{peak / 2**20:.1f} MB allocated to refuse it"  # the whole hour would be 115 MB


def test_a_file_under_the_bound_decodes_whole_mixed_to_mono():
    t = np.arange(22050 * 5) / 22050
    tone = (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    audio, rate = decode_audio(_encoded(tone, 22050, "WAV", channels=2))
    assert rate == 22050 and audio.shape == (len(tone), 1)
    assert np.max(np.abs(audio[:, 0] - tone)) < 1e-3


def test_a_header_that_under_counts_is_still_cut_at_the_bound(monkeypatch):
    """A decode never yields more than the bound, whatever the header says: here the header is
    taken to say nothing (frames unknown), and 70 s of audio are read up to 60 s and refused."""
    import gepard_demo.voice.reference_audio as ra

    long = _encoded(np.zeros(8000 * 70, np.float32), 8000, "WAV")
    real = ra.sf.info

    def unknown_length(file):
        info = real(file)
        info.frames = 0
        return info

    monkeypatch.setattr(ra.sf, "info", unknown_length)
    with pytest.raises(ReferenceAudioError, match=f"holds over {MAX_FILE_S:.0f} s"):
        decode_audio(long)


def test_unreadable_bytes_name_no_python_object():
    with pytest.raises(ReferenceAudioError) as err:
        decode_audio(b"%PDF-1.4 not audio" * 50)
    assert "not readable audio" in str(err.value) and "object at 0x" not in str(err.value)


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="no ffmpeg on PATH: the libsndfile path is the only one")
def test_ffmpegs_output_is_bounded_too(tmp_path):
    src = tmp_path / "long.wav"
    sf.write(src, np.zeros(8000 * 120, np.float32), 8000)
    m4a = tmp_path / "long.m4a"
    subprocess.run(["ffmpeg", "-v", "error", "-i", str(src), str(m4a)], check=True)
    with pytest.raises(ReferenceAudioError, match="holds over"):
        decode_audio(m4a.read_bytes())
