"""`--engine files`: audio that already exists, from a folder or a JSONL/CSV manifest matched to the
set's ids, gets the same rows, scores, report and comparison as a run made here; an id the source
lacks fails the run naming it, before any row is written."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import soundfile as sf

from eval.cli import main
from eval.compare.table import compare_runs
from eval.runs.run import done_rows
from eval.runs.seeds import sample_seed

pytestmark = pytest.mark.slow

SET = [{"id": "one", "text": "The weather is sunny today.", "category": "plain"},
       {"id": "two", "text": "Please close the door behind you.", "category": "plain"},
       {"id": "three", "text": "We met at noon on Friday.", "category": "time"}]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A scored Piper run (real speech) of SET: the 'other system' whose WAVs are scored again."""
    from eval.engines.piper import PiperReference
    from eval.runs.run import RunConfig, run

    d = tmp_path_factory.mktemp("files-engine")
    set_file = d / "set.jsonl"
    set_file.write_text("".join(json.dumps(u) + "\n" for u in SET))
    run(RunConfig(engine="piper", model="en_US-joe-medium", set=str(set_file)), d / "piper", engine=PiperReference.load(),
        log=lambda m: None)
    assert main(["score", str(d / "piper"), "--asr-model", "tiny.en", "--dnsmos", "off"]) == 0
    return d, set_file


def test_a_folder_of_wavs_scores_like_the_run_that_made_them(made, capsys):
    d, set_file = made
    out = d / "from-files"
    assert main(["run", "--engine", "files", "--files", str(d / "piper" / "wav"), "--set", str(set_file), "--seed", "5",
                 "--out", str(out), "--asr", "faster-whisper", "--dnsmos", "off"]) == 0
    rows = {r["id"]: r for r in done_rows(out)}
    assert set(rows) == {"one", "two", "three"}
    for uid, r in rows.items():
        heard, _ = sf.read(out / r["wav"], dtype="int16")
        original, _ = sf.read(d / "piper" / "wav" / f"{uid}.wav", dtype="int16")
        assert np.array_equal(heard, original)  # the file's own samples, nothing re-made
        assert r["seed"] == sample_seed(5, uid) and r["frames"] is None and r["settings"]["engine"] == "files"
    report = (out / "report.md").read_text()
    assert "corpus WER" in report and "## Failures" in report
    # The same audio compared with the run that made it: every pair, no change in WER.
    c = compare_runs(d / "piper", out)
    assert c.pairs == 3 and c.deltas["all"]["corpus_wer"].delta == 0.0 and not c.notes
    # The same command again: nothing left to do.
    assert main(["run", "--engine", "files", "--files", str(d / "piper" / "wav"), "--set", str(set_file), "--seed", "5",
                 "--out", str(out)]) == 0
    assert len(done_rows(out)) == 3


def test_manifests_jsonl_and_csv_with_relative_paths_and_stereo(made, tmp_path):
    d, set_file = made
    audio, rate = sf.read(d / "piper" / "wav" / "one.wav", dtype="float32")
    clips = tmp_path / "clips"
    clips.mkdir()
    sf.write(clips / "a.flac", np.stack([audio, audio], axis=1), rate)  # stereo FLAC: read as mono
    for uid in ("two", "three"):
        sf.write(clips / f"{uid}.wav", audio[: rate // 2], rate)
    jsonl = clips / "manifest.jsonl"
    jsonl.write_text("".join(json.dumps({"id": i, "path": p}) + "\n"
                             for i, p in [("one", "a.flac"), ("two", "two.wav"), ("three", str(clips / "three.wav"))]))
    assert main(["run", "--engine", "files", "--files", str(jsonl), "--set", str(set_file), "--out", str(tmp_path / "j")]) == 0
    one = next(r for r in done_rows(tmp_path / "j") if r["id"] == "one")
    assert one["duration_s"] == pytest.approx(len(audio) / rate) and one["sample_rate"] == rate
    mono, _ = sf.read(tmp_path / "j" / one["wav"], dtype="float32")
    assert mono.ndim == 1 and np.abs(mono - audio).max() < 1e-4  # 16-bit WAV of the mean of two equal channels
    with open(clips / "manifest.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerows([["id", "path"], ["one", "a.flac"], ["two", "two.wav"], ["three", "three.wav"]])
    assert main(["run", "--engine", "files", "--files", str(clips / "manifest.csv"), "--set", str(set_file),
                 "--out", str(tmp_path / "c")]) == 0
    assert len(done_rows(tmp_path / "c")) == 3


def test_what_the_source_lacks_is_named_and_nothing_is_written(made, tmp_path, capsys):
    d, set_file = made
    partial = tmp_path / "partial"
    partial.mkdir()
    audio, rate = sf.read(d / "piper" / "wav" / "one.wav", dtype="float32")
    sf.write(partial / "one.wav", audio, rate)
    out = tmp_path / "missing"
    assert main(["run", "--engine", "files", "--files", str(partial), "--set", str(set_file), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no audio for 2 of the set's 3 utterances: two, three" in err
    assert not (out / "rows.jsonl").exists() or not done_rows(out)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "one"}\n')
    assert main(["run", "--engine", "files", "--files", str(bad), "--set", str(set_file), "--out", str(tmp_path / "b")]) == 2
    assert "row 1 needs an id and a path" in capsys.readouterr().err
    broken = tmp_path / "broken"
    broken.mkdir()
    for u in SET:
        (broken / f"{u['id']}.wav").write_bytes(b"not audio")
    assert main(["run", "--engine", "files", "--files", str(broken), "--set", str(set_file), "--out", str(tmp_path / "x")]) == 2
    assert "not readable audio" in capsys.readouterr().err
    assert main(["run", "--engine", "files", "--files", str(tmp_path / "nowhere"), "--set", str(set_file),
                 "--out", str(tmp_path / "y")]) == 2
    assert "--files" in capsys.readouterr().err
    assert main(["run", "--engine", "files", "--files", str(partial), "--set", str(set_file), "--ref-audio",
                 str(partial / "one.wav"), "--out", str(tmp_path / "z")]) == 2
    assert "cannot take --ref-audio" in capsys.readouterr().err
