"""`python -m eval` end to end on the tiny random checkpoint, and its bad-input errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from tests.support.eval_fixtures import rows_of

from eval.cli import main
from eval.runs.seeds import utterance_seed

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, tiny_cache_dir):
    out = tmp_path_factory.mktemp("cli") / "tiny-smoke"
    rc = main(["run", "--model", "tiny", "--model-cache", str(tiny_cache_dir), "--set", "smoke", "--out", str(out),
               "--max-frames", "24", "--batch-size", "3", "--seed", "7", "--temperature", "0.8", "--fade-ms", "10",
               "--asr", "faster-whisper", "--asr-model", "tiny.en"])
    assert rc == 0
    return out


def test_run_score_report_on_tiny(tiny_run, tiny_cache_dir):
    rows = rows_of(tiny_run)
    assert sorted(r["id"] for r in rows) == [f"smoke-{i}" for i in range(1, 7)]  # written as each one ends
    for r in rows:
        assert (tiny_run / r["wav"]).is_file()
        assert r["seed"] == utterance_seed(7, r["id"])
        assert 1 <= r["frames"] <= 24 and r["stop_fired"] != r["runaway"]
        assert r["runaway"] == (r["frames"] == 24)
        assert len(r["p_stop"]) == r["frames"] + (1 if r["stop_fired"] else 0)
        assert r["settings"]["sampling"]["temperature"] == 0.8 and r["settings"]["stream"]["fade_ms"] == 10
        assert r["ttfa_s"] > 0 and r["rtf"] > 0
    cfg = json.loads((tiny_run / "config.json").read_text())
    assert cfg["run"]["sampling"]["temperature"] == 0.8 and cfg["items"] == 6
    env = json.loads((tiny_run / "environment.json").read_text())["sessions"][0]
    assert env["engine"]["random_weights"] is True and env["packages"]["torch"]
    for name in ("table.csv", "table.parquet", "summary.json", "report.md", "charts/wer_by_category.png",
                 "charts/duration_ratio.png", "charts/frames_vs_words.png", "charts/stop_head.png"):
        assert (tiny_run / name).is_file(), name
    summary = json.loads((tiny_run / "summary.json").read_text())
    # random weights make noise, not speech: Whisper hears (almost) none of the words
    assert summary["overall"]["wer_corpus"]["value"] > 0.8
    assert summary["overall"]["n_scored"] == 6
    assert set(summary["by_category"]) == {r["category"] for r in rows}
    table = pd.read_parquet(tiny_run / "table.parquet")
    assert len(table) == 6 and {"wer", "hyp", "duration_ratio", "frames_per_word"} <= set(table.columns)
    report = (tiny_run / "report.md").read_text()
    assert "corpus WER" in report and "**Random weights**" in report  # noise, and the report says so
    # report alone rebuilds the outputs; compare against itself is no regression
    assert main(["report", str(tiny_run)]) == 0
    assert main(["compare", str(tiny_run), str(tiny_run)]) == 0


def test_bad_input_is_a_clear_error(tiny_run, tmp_path, capsys):
    assert main(["run", "--set", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "a")]) == 2
    assert "not found" in capsys.readouterr().err
    (tmp_path / "empty.txt").write_text("\n")
    assert main(["run", "--set", str(tmp_path / "empty.txt"), "--out", str(tmp_path / "b")]) == 2
    assert "empty" in capsys.readouterr().err
    assert main(["run", "--temperature", "0", "--out", str(tmp_path / "c")]) == 2
    assert "temperature" in capsys.readouterr().err
    assert main(["run", "--decode-mode", "exact", "--lookback-frames", "999", "--out", str(tmp_path / "d")]) == 2
    # resuming with other settings would mix two experiments in one folder
    assert main(["run", "--out", str(tiny_run), "--temperature", "0.5"]) == 2
    assert "different sampling" in capsys.readouterr().err
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "x").write_text("x")
    assert main(["run", "--out", str(tmp_path / "junk")]) == 2
    assert main(["score", str(tmp_path / "junk")]) == 2
    assert main(["report", str(tmp_path / "nowhere")]) == 2
    assert main(["score", str(tiny_run), "--asr-model", "large-v9"]) == 2
    assert "no offline Whisper weights" in capsys.readouterr().err


def test_sweep_makes_one_subrun_per_point(tmp_path, tiny_cache_dir):
    out = tmp_path / "sweep"
    assert main(["sweep", "--out", str(out), "--model-cache", str(tiny_cache_dir), "--set", "smoke", "--limit", "2",
                 "--max-frames", "8", "--temperatures", "0.5", "1.0", "--stop-thresholds", "0.2", "0.6"]) == 0
    df = pd.read_csv(out / "sweep.csv")
    assert len(df) == 4 and set(df["temperature"]) == {0.5, 1.0} and set(df["stop_threshold"]) == {0.2, 0.6}
    for m in ("runaway_rate", "truncation_rate", "duration_ratio_median"):
        assert (out / "charts" / f"sweep_{m}.png").is_file() and (out / "charts" / f"sweep_{m}.csv").is_file()
    assert not (out / "charts" / "sweep_wer_corpus.png").exists()  # not scored: no WER chart
    for t, s in [(0.5, 0.2), (1.0, 0.6)]:
        cfg = json.loads((out / f"T{t:g}_S{s:g}" / "config.json").read_text())["run"]["sampling"]
        assert (cfg["temperature"], cfg["stop_threshold"]) == (t, s)
    info = json.loads((out / "sweep.json").read_text())
    assert info["last_call"]["one_pass"] and info["last_call"]["sources_generated"] == 4  # 2 temperatures x 2 sentences
    assert main(["sweep", "--out", str(tmp_path / "bad"), "--axis", "colour=1,2"]) == 2


def test_stream_chart_measures_real_decodes(tmp_path, tiny_engine):
    from eval.charts.stream_chart import EXACT_SNR_DB, StreamChartConfig, stream_chart
    from gepard_demo.codec import load_codec

    cfg = StreamChartConfig(limit=1, max_frames=16, chunk_sizes=(4, 16), lookback_frames=(0, 8), hardware_rtfs=(0.1, 5.0))
    out = stream_chart(cfg, tmp_path / "sc", engine=tiny_engine, codec=load_codec(tiny_engine.codec_source()))
    m = pd.read_csv(out / "chunk_timing.csv")
    for name in ("stream_stalls", "boundary_snr", "codec_cost"):
        assert (out / f"{name}.png").is_file() and (out / f"{name}.csv").is_file()
    exact = m[m["mode"] == "exact"]
    no_lookback = m[(m["mode"] == "lookback") & (m["lookback"] == 0) & (m["chunk"] == 4)]
    # the exact streamer equals one whole decode; re-decoding without history does not
    assert (exact["snr_db"] > 100).all()
    assert no_lookback["snr_db"].iloc[0] < 60
    assert (m["decode_s_per_audio_s"] > 0).all()
    stalls = pd.read_csv(out / "stream_stalls.csv")
    assert set(stalls["chunk"]) == {4, 16}
    # generation 5x slower than real time stalls between chunks; 10x faster does not
    fast, slow = (stalls[(stalls["rtf"] == r) & (stalls["chunk"] == 4)].iloc[0] for r in (0.1, 5.0))
    assert slow["gaps"] > 0 and slow["gap_s"] > fast["gap_s"] and slow["ttfa_s"] > fast["ttfa_s"]
    snr = pd.read_csv(out / "boundary_snr.csv")
    assert snr[snr["setting"] == "exact"]["snr_db_min"].min() >= 100 and EXACT_SNR_DB >= 100
    # a rerun with the same settings reuses the measurements (resumable)
    before = (out / "chunk_timing.csv").stat().st_mtime_ns
    stream_chart(cfg, out, engine=tiny_engine, codec=load_codec(tiny_engine.codec_source()))
    assert (out / "chunk_timing.csv").stat().st_mtime_ns == before


def test_simulated_playback_counts_stalls():
    from eval.charts.stream_chart import simulate_playback

    # 3 chunks of 10 frames (0.5 s each at frame_s 0.05), decode free
    assert simulate_playback([(10, 0.0)] * 3, 0.5, 0.05) == {"ttfa_s": 0.25, "gaps": 0, "gap_s": 0.0}
    r = simulate_playback([(10, 0.0)] * 3, 2.0, 0.05)  # each chunk takes 1 s to make, plays 0.5 s
    assert r["ttfa_s"] == 1.0 and r["gaps"] == 2 and r["gap_s"] == pytest.approx(1.0)

def test_batched_adapter_and_streaming_session_agree(tiny_engine):
    """The batch path (generate + whole decode + end shaping) and the app's streaming path
    make the same utterance from the same seed (solo, so no batch-shape rounding)."""
    import numpy as np

    from eval.engines.local import GepardLocal, GepardStreaming
    from eval.engines.request import SynthesisItem
    from gepard_demo.codec import load_codec
    from gepard_demo.settings import SamplingSettings, StreamSettings

    codec = load_codec(tiny_engine.codec_source())
    sampling = SamplingSettings(max_frames=14, temperature=0.7)
    stream = StreamSettings(first_chunk_frames=4, chunk_frames=5, decode_mode="exact", fade_ms=10, silence_ms=20)
    req = [SynthesisItem("Turn off the kitchen lights.", 4242)]
    a = GepardLocal(tiny_engine, codec).synthesize(req, sampling, stream)[0]
    b = GepardStreaming(tiny_engine, codec).synthesize(req, sampling, stream)[0]
    assert (a.frames, a.stop_fired, a.runaway, a.seed) == (b.frames, b.stop_fired, b.runaway, b.seed)
    assert np.allclose(a.p_stop, b.p_stop, atol=1e-6)
    assert len(a.audio) == len(b.audio) == a.frames * 1024 + round(0.02 * codec.sample_rate)
    assert np.abs(a.audio - b.audio).max() < 1e-4
    assert 0 < b.ttfa_s and 0 < a.ttfa_s


def test_score_runs_dnsmos_on_every_utterance_by_default_through_the_command(tmp_path):
    """`python -m eval score RUN`, as a user types it, with no --dnsmos flag: DNSMOS is on by default,
    so every utterance of the run (two of Piper's real speech) gets its scores in dnsmos.jsonl
    and the report's naturalness counts both; the measured cost is printed."""
    from eval.engines.piper import PiperReference
    from eval.runs.run import RunConfig, run

    set_file = tmp_path / "set.jsonl"
    items = [{"id": "one", "text": "The weather is sunny today, with a light breeze."},
             {"id": "two", "text": "Please close the door behind you when you leave."}]
    set_file.write_text("".join(json.dumps(u) + "\n" for u in items))
    out = tmp_path / "piper"
    run(RunConfig(engine="piper", model="en_US-joe-medium", set=str(set_file)), out, engine=PiperReference.load(),
        log=lambda m: None)
    p = subprocess.run([sys.executable, "-m", "eval", "score", str(out)], cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(line) for line in (out / "dnsmos.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == ["one", "two"]
    for r in rows:  # real speech, over 1 s of it: real scores on the MOS scale, not the None of a skipped clip
        assert all(1.0 <= r[k] <= 5.0 for k in ("dnsmos_ovrl", "dnsmos_sig", "dnsmos_bak", "dnsmos_p808")), r
    assert "DNSMOS scored 2 utterances" in p.stdout + p.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["overall"]["naturalness"]["dnsmos_ovrl"]["n"] == 2
