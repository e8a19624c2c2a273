"""Eval in saved voices: `eval run --voice NAME` (several), each sentence in each voice with its
sentence's seed, a saved voice's rows equal to its clip's and scored for speaker similarity alike,
a per-voice breakdown in the report, and a gate per voice."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
from tests.support.eval_fixtures import fake_run, rows_of
from tests.support.sound import voice_like, wav_bytes

from eval.compare.gate import Gate, GateError, check
from eval.compare.table import compare_runs
from eval.engines.local import GepardLocal
from eval.report.markdown import render
from eval.report.summary import write_outputs
from eval.runs.run import RunConfig, RunError, run
from gepard_demo.model.checkpoints.tiny import TINY_CODEC_FILE
from gepard_demo.serving.voices import Upload, VoiceShelf
from gepard_demo.settings import SamplingSettings
from gepard_demo.voice.library import VoiceLibrary
from gepard_demo.voice.speaker_prefix import SpeakerPrefixer

CLIPS = {"Low": wav_bytes(voice_like(4.0, f0=110.0, seed=1)), "High": wav_bytes(voice_like(5.0, f0=230.0, seed=2))}


@pytest.fixture(scope="module")
def library(tiny_engine, tiny_model_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("saved-voices")
    shelf = VoiceShelf(VoiceLibrary(folder, reserved=("default",)),
                       SpeakerPrefixer.for_engine(tiny_engine, tiny_model_dir / TINY_CODEC_FILE))
    for name, clip in CLIPS.items():
        shelf.upload(Upload(clip, f"{name}.wav", "audio/wav", name, "rec"))
        (folder.parent / f"{folder.name}-{name}.wav").write_bytes(clip)
    return folder


@pytest.fixture(scope="module")
def local(tiny_engine):
    from gepard_demo.codec import load_codec

    return GepardLocal(tiny_engine, load_codec(tiny_engine.codec_source()))


def _cfg(library, **more) -> RunConfig:
    return RunConfig(set="smoke", limit=2, batch_size=4, sampling=SamplingSettings(max_frames=15),
                     voices_dir=str(library), **more)


def test_each_sentence_in_each_voice_paired_by_seed_and_scored(tmp_path, library, local):
    run(_cfg(library, voices=("Low", "High")), tmp_path / "two", engine=local, log=lambda m: None)
    rows = {r["id"]: r for r in rows_of(tmp_path / "two")}
    assert len(rows) == 4 and all("@" in i for i in rows)
    sentences = {r["sentence"] for r in rows.values()}
    assert len(sentences) == 2
    for s in sentences:  # both voices of a sentence share its seed
        pair = [r for r in rows.values() if r["sentence"] == s]
        assert {r["voice"] for r in pair} == {"Low", "High"} and len({r["seed"] for r in pair}) == 1
    assert all(r["ref_audio"] is None and -1 <= r["speaker_sim"] <= 1 for r in rows.values())
    # A saved voice's rows are its clip's: the same audio as the clip sent as --ref-audio, the same score.
    clip = library.parent / f"{library.name}-Low.wav"
    run(_cfg(library, ref_audio=str(clip)), tmp_path / "clip", engine=local, log=lambda m: None)
    for r in rows_of(tmp_path / "clip"):
        saved = rows[f"{r['id']}@low"]
        a, _ = sf.read(tmp_path / "clip" / r["wav"], dtype="float32")
        b, _ = sf.read(tmp_path / "two" / saved["wav"], dtype="float32")
        assert np.array_equal(a, b) and saved["seed"] == r["seed"]
        assert saved["speaker_sim"] == pytest.approx(r["speaker_sim"], abs=1e-4)  # its trimmed clip vs the file
    _, summary = write_outputs(tmp_path / "two")
    assert set(summary["by_voice"]) == {"Low", "High"}
    assert all(s["n"] == 2 and "speaker_sim" in s for s in summary["by_voice"].values())
    assert "## By voice" in render(summary, [], tmp_path / "two")
    _, plain = write_outputs(tmp_path / "clip")
    assert plain["by_voice"] == {}


def test_one_voice_keeps_the_ids_and_bad_voices_are_refused(tmp_path, library, local):
    run(_cfg(library, voices=("high",)), tmp_path / "one", engine=local, log=lambda m: None)
    assert all("@" not in r["id"] and r["voice"] == "high" for r in rows_of(tmp_path / "one"))
    with pytest.raises(RunError, match="voices"):  # the voices are part of the run's identity
        run(_cfg(library, voices=("Low",)), tmp_path / "one", engine=local, log=lambda m: None)
    with pytest.raises(RunError, match="nobody: no such saved voice"):
        run(_cfg(library, voices=("nobody",)), tmp_path / "x", engine=local)
    with pytest.raises(RunError, match="distinct"):
        run(_cfg(library, voices=("Low", "low")), tmp_path / "x", engine=local)
    with pytest.raises(RunError, match="not both"):
        run(_cfg(library, voices=("Low",), ref_audio=str(library.parent / f"{library.name}-Low.wav")), tmp_path / "x",
            engine=local)
    with pytest.raises(RunError, match="piper cannot take --voice"):
        run(_cfg(library, voices=("Low",), engine="piper"), tmp_path / "x", engine=local)


def _voice_run(path, sims: dict[str, float]):
    rng = np.random.default_rng(0)
    texts, ids, extra = [], [], []
    for voice, sim in sims.items():
        for i in range(24):
            texts.append(f"sentence number {i} is here")
            ids.append(f"s{i:02d}@{voice.lower()}")
            extra.append({"voice": voice, "sentence": f"s{i:02d}", "category": "c",
                          "speaker_sim": float(sim + 0.01 * rng.standard_normal())})
    return fake_run(path, texts, texts, ids=ids, extra=extra)


def test_the_gate_holds_each_voice_to_its_speaker_similarity(tmp_path):
    base = _voice_run(tmp_path / "base", {"Low": 0.80, "High": 0.80})
    new = _voice_run(tmp_path / "new", {"Low": 0.80, "High": 0.50})
    c = compare_runs(base, new)
    assert c.voices == ["High", "Low"]
    assert c.voice_deltas["High"]["speaker_sim"].delta == pytest.approx(-0.30, abs=0.02)
    breaches = check(Gate.parse({"voices": {"*": {"speaker_sim": 0.05}}}), c)
    assert [(b.voice, b.measure) for b in breaches] == [("High", "speaker_sim")]
    assert "voice High: speaker_sim fell" in breaches[0].line()
    assert check(Gate.parse({"voices": {"low": {"speaker_sim": 0.05}}}), c) == []  # names are case-insensitive
    with pytest.raises(GateError, match="voice 'nobody'"):
        check(Gate.parse({"voices": {"nobody": {"speaker_sim": 0.05}}}), c)


def test_each_voice_is_scored_against_its_own_clip(tmp_path, library, local):
    """In a run of several voices, every voice's rows are scored against that voice's clip (the
    references are cached per voice, not one for the run): each voice's speaker_sim equals its
    clip's sent as --ref-audio, for the second voice as for the first."""
    run(_cfg(library, voices=("Low", "High")), tmp_path / "two", engine=local, log=lambda m: None)
    rows = {r["id"]: r for r in rows_of(tmp_path / "two")}
    for name in ("Low", "High"):
        clip = library.parent / f"{library.name}-{name}.wav"
        run(_cfg(library, ref_audio=str(clip)), tmp_path / name, engine=local, log=lambda m: None)
        for r in rows_of(tmp_path / name):
            saved = rows[f"{r['id']}@{name.lower()}"]
            assert saved["voice"] == name and saved["speaker_sim"] is not None
            assert saved["speaker_sim"] == pytest.approx(r["speaker_sim"], abs=1e-4), name
