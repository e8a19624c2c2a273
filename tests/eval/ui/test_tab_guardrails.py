"""The Eval tab's run and sweep forms take the guardrails (repetition penalty, its window, the
force stop as frames / auto / off), refuse them out of range as the CLI does (naming the field),
and the run's table shows how each row ended and the new measures."""

from __future__ import annotations

import pytest

from eval.ui.sweep_section import run_sweep_ui
from eval.ui.tab import build_eval_tab, run_eval
from gepard_demo.settings import GUARDRAIL_FIELDS as GUARDRAILS, SettingsError, parse_force_stop

ARGS = dict(set_name="smoke", set_file=None, limit=2, batch_size=2, base_seed=5, engine_name="local", temperature=0.5,
            top_k=0, greedy=False, stop_threshold=0.5, max_frames=8, fade_ms=0, silence_ms=0,
            asr_backend="faster-whisper", asr_model="tiny.en", vad=True)


class _Provider:
    gpu = None

    def __init__(self, engine, codec):
        self.engine, self.codec, self.lock = engine, codec, None

    def __call__(self):
        return self.engine


@pytest.fixture(scope="module")
def provider(tiny_engine):
    from gepard_demo.codec import load_codec

    return _Provider(tiny_engine, load_codec(tiny_engine.codec_source()))


def test_the_force_stop_box_reads_as_the_flag():
    """The form, the page, the flag and a sweep axis read the box with one parser."""
    read = parse_force_stop
    assert (read("off"), read(""), read(" Auto "), read("40"), read(40.0)) == (None, None, "auto", 40, 40)
    with pytest.raises(SettingsError, match="force_stop_frames must be 'off', 'auto' or a whole number of frames") as e:
        read("soon")
    assert e.value.field == "force_stop_frames"


def test_the_forms_refuse_bad_guardrails_naming_the_field(provider, tmp_path):
    for extra, field in (((2.5, 32, "off"), "repetition_penalty"), ((1.2, -1, "off"), "repetition_window"),
                         ((1.0, 32, "9"), "force_stop_frames"), ((1.0, 32, "later"), "force_stop_frames")):
        form = {**ARGS, **dict(zip(GUARDRAILS, extra))}
        with pytest.raises(SettingsError, match=field) as e:
            run_eval(provider, tmp_path, "bad", form)
        assert e.value.field == field
        with pytest.raises(SettingsError, match=field):
            run_sweep_ui(provider, tmp_path, "bad", form, "0.5", "0.5", "")
    assert not (tmp_path / "bad").exists() and not (tmp_path / "sweeps").exists()


def test_the_forms_refuse_an_emptied_run_field_naming_it(provider, tmp_path):
    """An emptied Dropdown or Number gives None: both forms refuse it naming the field, before
    anything is written (eval/ui/settings_form.read_run_fields)."""
    for field, error in (("set_name", ValueError), ("asr_model", ValueError), ("batch_size", TypeError)):
        form = {**ARGS, field: None}
        with pytest.raises(error, match=field):
            run_eval(provider, tmp_path, "empty", form)
        with pytest.raises(error, match=field):
            run_sweep_ui(provider, tmp_path, "empty", form, {"temperature": "0.5", "stop_threshold": "0.5"}, "")
    assert not (tmp_path / "empty").exists() and not (tmp_path / "sweeps").exists()


def test_the_tab_has_the_guardrail_inputs(provider, tmp_path):
    import gradio as gr

    with gr.Blocks() as demo:
        build_eval_tab(provider, runs_dir=tmp_path)
    text = str(demo.config)
    assert "Repetition penalty (1 = off" in text and "Force stop at frame: off, auto" in text
    ids = {c["props"].get("elem_id") for c in demo.config["components"]}
    assert {"eval-repetition-penalty", "eval-repetition-window", "eval-force-stop"} <= ids


def test_a_run_from_the_tab_shows_how_rows_ended(provider, tmp_path):
    from tests.support.eval_fixtures import rows_of

    name, text, table, _ = run_eval(provider, tmp_path, "fs", {**ARGS, "max_frames": 12, **dict(zip(GUARDRAILS, (1.2, 16, "6")))})
    for frames, ended in zip(table["frames"], table["ended by"]):
        assert frames <= 6 and (ended == "force_stop") == (frames == 6)  # a stop at step 6 never comes
    assert {"ended by", "derail", "reward", "clean"} <= set(table.columns)
    sampling = rows_of(tmp_path / "fs")[0]["settings"]["sampling"]
    assert (sampling["repetition_penalty"], sampling["repetition_window"], sampling["force_stop_frames"]) == (1.2, 16, 6)
    assert "| force stop |" in text and "clean rollout" in text
