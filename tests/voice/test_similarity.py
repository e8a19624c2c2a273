"""The page's speaker similarity (voice/similarity.ReferenceSimilarity): a take in a reference voice
scored against the reference, each side embedded at its own sample rate. A reference recorded at
16 kHz (a microphone) and a take at the codec's 22.05 kHz are common; read at the wrong rate, a
side is pitched and timed wrong and the figure is the GE2E encoder's view of another voice."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
from tests.support.sound import voice_like

from gepard_demo.units import SAMPLE_RATE
from gepard_demo.voice.similarity import ReferenceSimilarity, SpeakerSimilarity

pytest.importorskip("resemblyzer")

MIC_RATE = 16000


@pytest.fixture(scope="module")
def scorer() -> ReferenceSimilarity:
    return ReferenceSimilarity()


def _take(tmp_path, audio: np.ndarray, rate: int = SAMPLE_RATE):
    path = tmp_path / "take.wav"
    sf.write(path, audio, rate, subtype="FLOAT")
    return path


def test_a_reference_at_another_rate_than_the_take_is_embedded_at_its_own(tmp_path, scorer):
    """A 16 kHz microphone reference and a 22.05 kHz take of the same sound: the page's figure is
    the cosine of the reference read at 16 kHz and the take read at 22.05 kHz, and it says the
    same voice (about 1)."""
    import librosa

    ref = voice_like(5.0, rate=MIC_RATE, f0=120.0, seed=4)
    take = librosa.resample(ref, orig_sr=MIC_RATE, target_sr=SAMPLE_RATE)
    score = scorer.score((MIC_RATE, ref), _take(tmp_path, take))
    sim = SpeakerSimilarity()
    expected = sim.cosine(sim.embed(ref, MIC_RATE), take, SAMPLE_RATE)
    assert score == pytest.approx(expected, abs=1e-4)
    assert score > 0.95


def test_a_stereo_reference_file_is_scored_as_its_mono_mix(tmp_path, scorer):
    """A reference given as a file (an upload) at 16 kHz, in stereo: read at its own rate and mixed
    to mono; the take is the same sound at 22.05 kHz."""
    import librosa

    mono = voice_like(5.0, rate=MIC_RATE, f0=200.0, seed=5)
    ref_path = tmp_path / "ref.wav"
    sf.write(ref_path, np.stack([mono, mono], axis=1), MIC_RATE)
    take = librosa.resample(mono, orig_sr=MIC_RATE, target_sr=SAMPLE_RATE)
    score = scorer.score(str(ref_path), _take(tmp_path, take))
    assert score is not None and score > 0.95


def test_a_silent_take_has_no_figure(tmp_path, scorer):
    """Silence has no speaker embedding: no figure (None), never a guess."""
    ref = voice_like(5.0, rate=MIC_RATE, seed=6)
    assert scorer.score((MIC_RATE, ref), _take(tmp_path, np.zeros(SAMPLE_RATE, np.float32))) is None
