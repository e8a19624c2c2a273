"""The Eval tab: it builds inside a Blocks/Tab, and its handlers run, score, reopen and
compare runs with the app's own engine (and hold the app's lock while synthesizing)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from eval.runs.run import RunError, done_rows as _rows
from eval.ui.compare_section import compare_in_tab
from eval.ui.demo_link import demo_values
from eval.ui.runs_view import failed_rows, list_runs, row_audio, row_choices, view_run
from eval.ui.tab import build_eval_tab, run_eval

pytestmark = pytest.mark.slow


class _Provider:
    """Shaped like gepard_demo.ui.hosts.model_host.ModelHost: callable, with .codec and .lock (no GPU calls)."""

    gpu = None

    def __init__(self, engine, codec):
        self.engine, self.codec, self.lock, self.calls = engine, codec, _CountingLock(), 0

    def __call__(self):
        self.calls += 1
        return self.engine


class _CountingLock:
    """A TurnLock (streaming/seams.py) that counts its turns."""

    def __init__(self):
        self._lock, self.entered = threading.Lock(), 0

    def acquire(self, blocking=True, timeout=-1, abort=None):
        got = self._lock.acquire(blocking, timeout)
        self.entered += got
        return got

    def release(self):
        self._lock.release()

    def locked(self):
        return self._lock.locked()

    def __enter__(self):  # the sweep's own runs take it so
        self.acquire()

    def __exit__(self, *exc):
        self.release()


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
    name, text, table, charts = run_eval(provider, tmp_path, "first", args, progress=lambda f, d: steps.append((f, d)))
    assert name == "first" and len(table) == 2 and "corpus WER" in text
    assert any(p.endswith("wer_by_category.png") for p in charts)
    assert provider.lock.entered >= 1  # synthesis ran under the app's lock
    assert steps and steps[-1][0] > 0.9 and any("synthesis 2/2" in d for _, d in steps)
    run_eval(provider, tmp_path, "second", args)
    assert set(list_runs(tmp_path)) == {"first", "second"}
    compared, forest, failures, worse = compare_in_tab(tmp_path, "first", ["second"], None, 0.0)
    assert compared.startswith("**No significant regression**") and "| corpus_wer |" in compared
    assert "▶ below" not in compared
    assert forest.endswith("compare/first-vs-second/forest.png") and Path(forest).is_file() and Path(failures).is_file()
    assert worse == []  # the same command twice: the same frames, nothing got worse
    with pytest.raises(ValueError, match="is the base"):
        compare_in_tab(tmp_path, "first", ["first"], None, None)
    with pytest.raises(RunError, match="not a run"):
        compare_in_tab(tmp_path, "first", ["../../etc"], None, None)
    assert view_run(tmp_path, "first")[1].shape[0] == 2
    # The failure table is in the tab's report, and a failed row plays (tiny's noise fails everything).
    assert "## Failures" in text and "| catastrophic | 2 / 2 |" in text
    failed = failed_rows(tmp_path, "first")
    assert len(failed) == 2 and "catastrophic" in failed[0][0]
    assert row_choices(tmp_path, "first") == failed  # every row failed: the picker lists them all, failures first
    values, line = demo_values(tmp_path, "first", failed[0][1])
    row = next(r for r in _rows(tmp_path / "first") if r["id"] == failed[0][1])
    assert values["text"] == row["text"] and values["seed"] == row["seed"] and values["random_seed"] is False
    assert (values["temperature"], values["max_frames"], values["fade_ms"], values["ref_audio"]) == (0.5, 8, 5, None)
    assert f"seed {row['seed']}" in line
    sr, audio = row_audio(tmp_path, "first", failed[0][1])
    assert sr == 22050 and len(audio) == table["audio s"].iloc[0] * sr
    with pytest.raises(RunError, match="no utterance"):
        row_audio(tmp_path, "first", "nope")
    with pytest.raises(ValueError, match="run name"):
        run_eval(provider, tmp_path, "../escape", args)
    with pytest.raises(ValueError, match="temperature"):
        run_eval(provider, tmp_path, "bad", {**args, "temperature": 0})



def test_open_in_the_demo_loads_what_each_engine_recorded(tmp_path):
    """A served row gives its seed and budget only, a Piper or files row its text and seed, and a
    row's voice comes along (copied where Gradio may serve it) or is said to be gone."""
    import numpy as np
    import soundfile as sf
    from tests.support.eval_fixtures import fake_run

    from gepard_demo.ui.page.speak_link import SpeakLink

    voice = tmp_path / "elsewhere" / "voice.wav"
    voice.parent.mkdir()
    sf.write(voice, np.zeros(22050, np.float32), 22050, subtype="PCM_16")
    texts = ["served sentence", "piper sentence", "files sentence", "cloned sentence"]
    extra = [{"seed": 11, "settings": {"server_urls": ["http://x"], "seed": 11, "max_new_tokens": 300}},
             {"seed": 12, "settings": {"engine": "piper", "note": "n"}},
             {"seed": None, "settings": {"engine": "files", "source": "d", "seed": None}},
             {"seed": 14, "ref_audio": str(voice), "settings": {
                 "sampling": {"temperature": 0.9, "top_k": 3, "greedy": False, "stop_threshold": 0.4, "max_frames": 50,
                              "seed": 14, "cfg_scale": 2.0, "cfg_frames": 6},
                 "stream": {"first_chunk_frames": 5, "chunk_frames": 7, "decode_mode": "lookback", "lookback_frames": 3,
                            "fade_ms": 10.0, "silence_ms": 20.0}}}]
    fake_run(tmp_path / "r", texts, texts, extra=extra)
    served, line = demo_values(tmp_path, "r", "u000")
    assert served == {"text": "served sentence", "seed": 11, "random_seed": False, "max_frames": 300, "ref_audio": None}
    assert "server fixed" in line
    piper, line = demo_values(tmp_path, "r", "u001")
    assert piper == {"text": "piper sentence", "seed": 12, "random_seed": False, "ref_audio": None}
    assert "not made by Gepard" in line
    files, _ = demo_values(tmp_path, "r", "u002")
    assert files == {"text": "files sentence", "ref_audio": None}
    cloned, line = demo_values(tmp_path, "r", "u003")
    assert (cloned["cfg_scale"], cloned["cfg_frames"], cloned["decode_mode"], cloned["lookback_frames"]) == (2.0, 6, "lookback", 3)
    assert cloned["seed"] == 14 and cloned["top_k"] == 3 and cloned["chunk_frames"] == 7 and "voice voice.wav" in line
    copy = Path(cloned["ref_audio"])
    assert copy.read_bytes() == voice.read_bytes() and "elsewhere" not in str(copy)
    # The Speak tab's side: named controls set, the rest left as the visitor has them.
    from gepard_demo.ui.page.controls import CONTROL_NAMES

    link = SpeakLink({name: object() for name in CONTROL_NAMES}, object())
    updates = link.updates(served)
    assert updates[CONTROL_NAMES.index("seed")] == 11
    assert updates[CONTROL_NAMES.index("temperature")] == {"__type__": "update"}  # gr.skip(): left alone
    with pytest.raises(ValueError, match="not a Speak tab control"):
        link.updates({"tempo": 1})
    voice.unlink()
    gone, line = demo_values(tmp_path, "r", "u003")
    assert gone["ref_audio"] is None and "is gone" in line
    with pytest.raises(RunError, match="no utterance"):
        demo_values(tmp_path, "r", "u999")
