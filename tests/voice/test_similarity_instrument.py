"""The speaker-similarity instrument checked on real voices (Piper's and espeak-ng's), not only on
one clip against another: its equal-error rate (benchmarks/speaker_eer.py measures it in full)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from eval.runs.sets import load_set
from gepard_demo.voice.similarity import equal_error_rate

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "speaker_eer.py"


def _bench():
    spec = importlib.util.spec_from_file_location("speaker_eer", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_equal_error_rate_is_where_false_accepts_meet_false_rejects():
    eer, threshold = equal_error_rate(np.array([0.9, 0.8, 0.7]), np.array([0.1, 0.2, 0.75]))
    assert eer == pytest.approx(1 / 3) and 0.7 <= threshold <= 0.8
    assert equal_error_rate(np.array([0.9, 0.8]), np.array([0.1, 0.2]))[0] == 0.0


@pytest.mark.slow
def test_ge2e_tells_real_voices_apart():
    bench = _bench()
    sentences = [u.text for u in load_set("core") if 6 <= len(u.text.split()) <= 16][:4]
    result = bench.measure(bench.voices_speak(sentences, ("m3", "f2")))
    pairs, refs = result["pairs"], result["reference_clip"]
    # One voice's utterances are closer to each other than to another voice's, by a clear margin,
    # and a voice's reference clip picks its own utterances out better than chance by far.
    assert pairs["target_mean"] > pairs["nontarget_mean"] + 0.1, result
    assert refs["eer"] < 0.25, result
    assert "not the authors' WavLM-SV" in result["instrument"]
