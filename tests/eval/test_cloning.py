"""Eval with a reference voice and CFG: per-run --ref-audio, a per-sentence ref_audio column,
speaker similarity with a bootstrap CI, and CFG scale as a sweep axis (tiny model)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import soundfile as sf
from tests.support.eval_fixtures import rows_of
from tests.support.sound import voice_like

from eval.engines.local import GepardLocal
from eval.report.summary import write_outputs
from eval.runs.run import RunConfig, RunError, run
from eval.runs.sets import SetError, load_set
from gepard_demo.voice.similarity import SpeakerSimilarity
from eval.sweeps.grid import SweepConfig
from eval.sweeps.sweep import sweep
from gepard_demo.settings import SamplingSettings


@pytest.fixture(scope="module")
def voices(tmp_path_factory):
    d = tmp_path_factory.mktemp("voices")
    a, b = d / "low.wav", d / "high.flac"
    sf.write(a, voice_like(4.0, f0=110.0, seed=1), 22050)
    sf.write(b, np.stack([voice_like(5.0, 44100, f0=230.0, seed=2)] * 2, axis=1), 44100)
    return a, b


@pytest.fixture(scope="module")
def cloning_local(tiny_engine, tiny_codec):
    return GepardLocal(tiny_engine, tiny_codec)  # builds its prefixer from the tiny's own compressor


@pytest.fixture(scope="module")
def tiny_codec(tiny_engine):
    from gepard_demo.codec import load_codec

    return load_codec(tiny_engine.codec_source())


def test_speaker_similarity_is_a_cosine_that_tells_voices_apart(voices):
    sim = SpeakerSimilarity()
    a, b = voices
    audio_a, rate_a = sf.read(a, dtype="float32")
    same = sim.similarity(a, audio_a, rate_a)
    assert same == pytest.approx(1.0, abs=1e-5)
    audio_b, rate_b = sf.read(b, dtype="float32")
    other = sim.similarity(a, audio_b.mean(axis=1), rate_b)
    assert -1.0 <= other < same - 0.01
    assert sim.similarity(a, np.zeros(22050, np.float32), 22050) is None  # nothing to embed


def test_run_with_ref_audio_reports_speaker_similarity(tmp_path, cloning_local, voices, tiny_cache_dir):
    cfg = RunConfig(model="tiny", set="smoke", limit=3, batch_size=2, model_cache=str(tiny_cache_dir),
                    sampling=SamplingSettings(max_frames=20, cfg_scale=2.0, cfg_frames=5), ref_audio=str(voices[0]))
    run(cfg, tmp_path / "r", engine=cloning_local, log=lambda m: None)
    rows = rows_of(tmp_path / "r")
    assert all(r["ref_audio"] == str(voices[0]) and -1 <= r["speaker_sim"] <= 1 for r in rows)
    assert rows[0]["settings"]["sampling"]["cfg_scale"] == 2.0
    _, summary = write_outputs(tmp_path / "r")
    s = summary["overall"]["speaker_sim"]
    assert s["n"] == 3 and s["ci_low"] <= s["value"] <= s["ci_high"]
    assert "speaker_sim" in summary["definitions"]
    # the reference is part of the run's identity: another voice on the same folder is refused
    with pytest.raises(RunError, match="ref_audio"):
        run(RunConfig(**{**cfg.__dict__, "ref_audio": str(voices[1])}), tmp_path / "r", engine=cloning_local)


def test_per_sentence_ref_audio_column(tmp_path, cloning_local, voices):
    a, b = voices
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "a.wav").write_bytes(a.read_bytes())
    lines = [{"id": "x1", "text": "Hello there.", "ref_audio": "v/a.wav"},
             {"id": "x2", "text": "A default voice line."},
             {"id": "x3", "text": "And another voice.", "ref_audio": str(b)}]
    set_path = tmp_path / "cloning.jsonl"
    set_path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    items = load_set(str(set_path))
    assert [u.ref_audio for u in items] == [str((tmp_path / "v" / "a.wav").resolve()), None, str(b)]
    run(RunConfig(set=str(set_path), batch_size=3, sampling=SamplingSettings(max_frames=15)), tmp_path / "r",
        engine=cloning_local, log=lambda m: None)
    rows = {r["id"]: r for r in rows_of(tmp_path / "r")}
    assert rows["x2"]["ref_audio"] is None and rows["x2"]["speaker_sim"] is None
    assert rows["x1"]["speaker_sim"] is not None and rows["x3"]["ref_audio"] == str(b)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": "x", "ref_audio": "missing.wav"}) + "\n")
    with pytest.raises(SetError, match="missing.wav"):
        load_set(str(bad))
    with pytest.raises(RunError, match="piper cannot take"):
        run(RunConfig(engine="piper", set=str(set_path)), tmp_path / "p", engine=cloning_local)


def test_cfg_scale_is_a_sweep_axis(tmp_path, cloning_local, voices):
    base = RunConfig(set="smoke", limit=2, batch_size=2, sampling=SamplingSettings(max_frames=12), ref_audio=str(voices[0]))
    cfg = SweepConfig(base=base, swept=(("temperature", (0.7,)), ("stop_threshold", (0.5,)), ("cfg_scale", (1.0, 2.5))))
    csv = sweep(cfg, tmp_path / "sw", engine=cloning_local, log=lambda m: None)
    df = pd.read_csv(csv)
    assert list(df["cfg_scale"]) == [1.0, 2.5]
    assert df["speaker_sim"].notna().all()  # the reference went through (not the one-pass traces)
    guided = rows_of(tmp_path / "sw" / df["run"][1])
    assert guided[0]["settings"]["sampling"]["cfg_scale"] == 2.5 and guided[0]["ref_audio"] == str(voices[0])
