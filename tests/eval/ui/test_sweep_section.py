"""The Eval tab's sweep section: launched with the app's engine (under its lock), progress
reported, charts listed, reopened; the tab builds with it; tail-chart on Piper speech."""

from __future__ import annotations

import pandas as pd
import pytest
from tests.eval.ui.test_tab import _Provider

from eval.ui.sweep_section import list_sweeps, run_sweep_ui, view_sweep

pytestmark = pytest.mark.slow
FORM = dict(set_name="smoke", set_file=None, limit=2, batch_size=2, base_seed=5, engine_name="local",
            asr_backend="faster-whisper", asr_model="tiny.en", vad=True)


@pytest.fixture(scope="module")
def provider(tiny_engine):
    from gepard_demo.codec import load_codec

    return _Provider(tiny_engine, load_codec(tiny_engine.codec_source()))


def test_sweep_from_the_tab_reports_progress_and_charts(provider, tmp_path):
    import gradio as gr

    from eval.ui.tab import build_eval_tab

    with gr.Blocks() as demo:
        build_eval_tab(provider, runs_dir=tmp_path)
    assert "Run sweep" in str(demo.config)

    steps = []
    name, text, table, charts = run_sweep_ui(
        provider, tmp_path, "s1", {**FORM, "max_frames": 12}, {"temperature": "0.5 1.0", "stop_threshold": "0.2, 0.9"}, "", progress=lambda f, d: steps.append((f, d)))
    assert name == "s1" and list_sweeps(tmp_path) == ["s1"]
    assert len(table) == 4 and {"temperature", "stop_threshold", "wer_corpus"} <= set(table.columns)
    assert {"sweep_wer_corpus.png", "calibration_tradeoff.png"} <= {p.rsplit("/", 1)[-1] for p in charts}
    assert "Best point" in text or "Sweep s1" in text
    assert provider.lock.entered >= 1  # generation held the app's engine lock
    fracs = [f for f, _ in steps]
    assert fracs == sorted(fracs) and fracs[-1] == 1.0 and any("ASR" in d for _, d in steps)
    assert view_sweep(tmp_path, "s1")[1].shape[0] == 4
    with pytest.raises(ValueError, match="temperatures"):
        run_sweep_ui(provider, tmp_path, "s2", {**FORM, "max_frames": 12}, {"temperature": "hot", "stop_threshold": "0.5"}, "")


def test_tail_chart_on_piper_speech(tmp_path):
    from eval.charts.tail_chart import TailChartConfig, tail_chart, trailing_insertions
    from eval.scoring.asr import ASRSettings

    assert trailing_insertions("turn the lights off", "turn the lights off you") == 1
    assert trailing_insertions("turn the lights off", "turn the lights") == 0
    cfg = TailChartConfig(set="smoke", limit=2, fades_ms=(0, 20), silences_ms=(0, 300))
    out = tail_chart(cfg, tmp_path / "tail", ASRSettings())
    rows = pd.read_csv(out / "tail_rows.csv")
    assert len(rows) == 2 * 2 * 2
    for name in ("tail_click", "tail_asr"):
        assert (out / f"{name}.png").is_file() and (out / f"{name}.csv").is_file()
    # a 20 ms linear fade ends on exactly zero: no jump, and far less energy above 4 kHz
    raw, faded = (rows[(rows["fade_ms"] == f) & (rows["silence_ms"] == 0)].set_index("id") for f in (0, 20))
    assert (faded["last_step_dbfs"] == -120).all()
    assert (faded["hf_energy_dbfs"] <= raw["hf_energy_dbfs"] + 1.0).all()
    # real speech: Whisper hears the words whatever the tail
    assert rows["wer"].mean() < 0.5
    again = tail_chart(cfg, out, ASRSettings())  # resumes: Piper audio and transcripts are cached
    assert again == out and pd.read_csv(out / "tail_rows.csv").equals(rows)
    # the VAD end used to align p_stop on real speech: near where Piper's speech ends, not in the padding
    import numpy as np

    from eval.scoring.audio import read_mono
    from eval.sweeps.calibration import vad_end_step

    speech, sr = read_mono(out / "piper" / "smoke-2.wav")
    end = vad_end_step(np.concatenate([speech, np.zeros(sr, np.float32)]), sr)
    assert end is not None and abs(end - len(speech) / 1024) < 0.5 * sr / 1024
