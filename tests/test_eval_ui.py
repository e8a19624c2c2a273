"""The Eval tab: it builds inside a Blocks/Tab, and its handlers run, score, reopen and
compare runs with the app's own engine (and hold the app's lock while synthesizing)."""

from __future__ import annotations

import threading

import pytest

from eval.runs.run import RunError
from eval.ui.tab import build_eval_tab, compare_runs, failed_rows, list_runs, row_audio, run_eval, view_run

pytestmark = pytest.mark.slow


class _Provider:
    """Shaped like gepard_demo.ui.model_host.ModelHost: callable, with .codec and .lock."""

    def __init__(self, engine, codec):
        self.engine, self.codec, self.lock, self.calls = engine, codec, _CountingLock(), 0

    def __call__(self):
        self.calls += 1
        return self.engine


class _CountingLock:
    def __init__(self):
        self._lock, self.entered = threading.Lock(), 0

    def __enter__(self):
        self._lock.acquire()
        self.entered += 1

    def __exit__(self, *exc):
        self._lock.release()


@pytest.fixture(scope="module")
def provider(tiny_engine):
    from gepard_demo.codec import load_codec

    return _Provider(tiny_engine, load_codec(tiny_engine.codec_source()))


def test_tab_builds_in_a_blocks_context(provider, tmp_path):
    import gradio as gr

    with gr.Blocks() as demo:
        with gr.Tab("Eval"):
            build_eval_tab(provider, runs_dir=tmp_path)
    text = str(demo.config)
    assert "Run evaluation" in text and "Corpus WER" in text


def test_handlers_run_open_and_compare(provider, tmp_path):
    steps = []
    args = dict(set_name="smoke", set_file=None, limit=2, batch_size=2, base_seed=5, engine_name="local",
                temperature=0.5, top_k=0, greedy=False, stop_threshold=0.5, max_frames=8, fade_ms=5, silence_ms=0,
                asr_backend="faster-whisper", asr_model="tiny.en", vad=True)
    name, text, table, charts = run_eval(provider, tmp_path, "first", *args.values(), progress=lambda f, d: steps.append((f, d)))
    assert name == "first" and len(table) == 2 and "corpus WER" in text
    assert any(p.endswith("wer_by_category.png") for p in charts)
    assert provider.lock.entered >= 1  # synthesis ran under the app's lock
    assert steps and steps[-1][0] > 0.9 and any("synthesis 2/2" in d for _, d in steps)
    run_eval(provider, tmp_path, "second", *args.values())
    assert set(list_runs(tmp_path)) == {"first", "second"}
    assert "no significant regression" in compare_runs(tmp_path, "first", "second", 0.0)
    assert view_run(tmp_path, "first")[1].shape[0] == 2
    # The failure table is in the tab's report, and a failed row plays (tiny's noise fails everything).
    assert "## Failures" in text and "| catastrophic | 2 / 2 |" in text
    failed = failed_rows(tmp_path, "first")
    assert len(failed) == 2 and "catastrophic" in failed[0][0]
    sr, audio = row_audio(tmp_path, "first", failed[0][1])
    assert sr == 22050 and len(audio) == table["duration_s"].iloc[0] * sr
    with pytest.raises(RunError, match="no utterance"):
        row_audio(tmp_path, "first", "nope")
    with pytest.raises(ValueError, match="run name"):
        run_eval(provider, tmp_path, "../escape", *args.values())
    with pytest.raises(ValueError, match="temperature"):
        run_eval(provider, tmp_path, "bad", *{**args, "temperature": 0}.values())
