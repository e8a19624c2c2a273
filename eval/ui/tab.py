"""The Eval tab of the Gradio app.

    with gr.Blocks() as demo:
        with gr.Tab("Eval"):
            build_eval_tab(engine_provider)            # runs_dir="runs" by default

`build_eval_tab(engine_provider, runs_dir="runs", speak=None)` creates its components inside the
caller's current Blocks/Tab context and returns None.
- engine_provider: the page's host (gepard_demo.ui.hosts.page_host.PageHost: ModelHost or GpuHost),
  called for the engine to run on; its `.codec` decodes, its `.lock` is held by every synthesis
  (eval batches take turns with each other, and with the demo unless a scheduler lines them
  up), and with `.gpu` set (ZeroGPU) each batch runs in GPU calls.
- runs_dir: where run folders are written and listed (same layout as `python -m eval run`).
- speak: the page's gepard_demo.ui.page.speak_link.SpeakLink (the app passes it): every row's
  "Open in the demo" puts it in the Speak tab and makes it again as a take.
The tab: pick a set (built-in or an uploaded .txt/.jsonl) and settings, run with a progress
bar (synthesis, then Whisper scoring, then the report), see the summary, the per-utterance
table and the charts, play any row (failures first) and open it in the demo, reopen earlier
runs, compare runs (compare_section.py), a blind listening test (listening_section.py),
sweeps (sweep_section.py) and a speech server under load (load_section.py).
"""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path
from collections.abc import Mapping
from typing import TYPE_CHECKING, Callable

import pandas as pd

from eval.runs.run import RunConfig, run
from eval.runs.sets import builtin_sets, load_set
from eval.ui.common import EvalLimits, chart_images, eval_engine_from_provider, tab_error
from eval.ui.compare_section import build_compare_section
from eval.ui.demo_link import wire_open
from eval.ui.listening_section import build_listening_section
from eval.ui.load_section import build_load_section
from eval.ui.runs_view import WIDE, list_runs, row_audio, row_choices, run_folder, shown_table, view_run
from eval.ui.word_view import row_words as row_words_view
from eval.ui.sweep_section import build_sweep_section
from eval.ui.settings_form import RUN_FIELDS, build_settings_form, read_run_fields, read_settings_form

if TYPE_CHECKING:
    from gepard_demo.ui.hosts.model_host import EngineFacts
    from gepard_demo.ui.page.speak_link import SpeakLink
    from gepard_demo.units import Json


def run_eval(engine_provider: EngineFacts, runs_dir, name: str, form: Mapping[str, Json],
             progress: Callable[[float, str], None] | None = None, limits: EvalLimits = EvalLimits()):
    """Synthesize + score + report one run; returns view_run's outputs. form: RUN_FIELDS and any
    settings (settings_form.FORM_NAMES; one left out is the page's default). Raises on bad input
    (a setting out of range: SettingsError naming it, as the CLI's)."""
    from eval.runs.measure import measure
    from eval.runs.score import score

    sampling, stream = read_settings_form(form)
    name = (name or "").strip() or time.strftime("ui-%Y%m%d-%H%M%S")
    if not re.fullmatch(r"[A-Za-z0-9._-]+", name) or name.startswith("."):
        raise ValueError(f"run name {name!r}: use letters, digits, '.', '_' or '-'")
    fields = read_run_fields(form)
    engine_name = fields.engine_name
    cfg = RunConfig(engine=engine_name, model=engine_name == "piper" and "en_US-joe-medium" or "app",
                    set=fields.set, sampling=sampling, stream=stream,
                    batch_size=fields.batch_size, base_seed=fields.base_seed, limit=fields.limit)
    limits.check(len(load_set(cfg.set, cfg.limit)), cfg.sampling.max_frames, cfg.batch_size)
    engine = eval_engine_from_provider(engine_provider, engine_name)
    if engine_name == "local":
        cfg = dataclasses.replace(cfg, model=engine.describe()["model"])
    out = Path(runs_dir) / name
    say = progress or (lambda frac, desc: None)
    run(cfg, out, engine=engine, progress=lambda done, total: say(0.6 * done / total, f"synthesis {done}/{total}"), log=lambda m: None)
    score(out, fields.asr(), progress=lambda done, total: say(0.6 + 0.3 * done / total, f"ASR {done}/{total}"), log=lambda m: None)
    measure(out, progress=lambda done, total: say(0.9 + 0.06 * done / total, f"audio measures {done}/{total}"),
            log=lambda m: None)
    say(0.97, "report")
    return (name, *view_run(runs_dir, name))


def build_eval_tab(engine_provider: EngineFacts, runs_dir: str | Path = "runs",
                   limits: EvalLimits = EvalLimits(), speak: SpeakLink | None = None) -> None:
    """Create the Eval tab's components in the current Gradio context (see the module doc)."""
    import gradio as gr

    from gepard_demo.ui.takes import header_widths

    runs_dir = str(runs_dir)
    gr.Markdown("Evaluate a whole test set: synthesize, transcribe with Whisper, and score. "
                "Corpus WER = sum(S+D+I) / sum(reference words) after Whisper's English normalizer; 95% bootstrap CIs.")
    form, run_name, run_btn = _run_form()
    summary = gr.Markdown(elem_id="eval-summary")
    with gr.Row():
        failed = gr.Dropdown([], label="Play an utterance (the failure table's first)", elem_id="eval-failed")
        failed_audio = gr.Audio(type="numpy", interactive=False, label="Its audio", elem_id="eval-failed-audio",
                                buttons=["download"])
        open_row = gr.Button("Open in the demo", elem_id="eval-open-row")
    row_words = gr.HTML(elem_id="eval-row-words")  # its words coloured by error (word_view.py)
    open_note = gr.Markdown()
    charts = gr.Gallery(label="Charts", columns=2, height="auto")
    empty = shown_table(pd.DataFrame())
    table = gr.Dataframe(value=empty, headers=list(empty.columns), label="Per utterance", wrap=True, elem_id="eval-table",
                         column_widths=header_widths(list(empty.columns), WIDE))
    with gr.Accordion("Earlier runs", open=False):
        with gr.Row():
            pick = gr.Dropdown(list_runs(runs_dir), label="Open a run", allow_custom_value=False, elem_id="eval-pick")
            refresh = gr.Button("Refresh the lists")
            open_btn = gr.Button("Open")
    pickers = [pick, *build_compare_section(runs_dir, speak).values(), *build_listening_section(runs_dir, speak).values()]
    build_sweep_section(engine_provider, runs_dir, limits, form)
    build_load_section(runs_dir)

    def _refresh():
        names = list_runs(runs_dir)
        return [gr.update(choices=names) for _ in pickers]

    def _run(name, *values, progress=gr.Progress()):
        try:
            name, text, tbl, imgs = run_eval(engine_provider, runs_dir, name, dict(zip(form, values)),
                                             progress=lambda f, d: progress(f, desc=d), limits=limits)
        except Exception as e:  # shown in the tab: a bad setting or set file must not look like a crash
            raise tab_error(e) from e
        names = list_runs(runs_dir)
        return (text, tbl, chart_images(imgs), gr.update(choices=names, value=name),
                *[gr.update(choices=names) for _ in pickers[1:]], gr.update(choices=row_choices(runs_dir, name), value=None))

    def _open(name):
        try:
            text, tbl, imgs = view_run(runs_dir, name)
            return text, tbl, chart_images(imgs), gr.update(choices=row_choices(runs_dir, name), value=None)
        except Exception as e:
            raise tab_error(e) from e

    def _play(name, utt_id):
        try:
            words = row_words_view(run_folder(runs_dir, name), utt_id) if name and utt_id else ""
            return row_audio(runs_dir, name, utt_id), words
        except Exception as e:
            raise tab_error(e) from e

    run_btn.click(_run, api_name="eval_run", inputs=[run_name, *form.values()],
                  outputs=[summary, table, charts, *pickers, failed], concurrency_limit=1)
    refresh.click(_refresh, None, pickers)
    open_btn.click(_open, [pick], [summary, table, charts, failed], api_name="eval_open")
    failed.change(_play, [pick, failed], [failed_audio, row_words], api_name="eval_play_failed")
    wire_open(open_row, [pick, failed], lambda name, uid: (name, uid), speak, open_note, runs_dir)


def _run_form():
    """The set, engine, settings and ASR columns: (the form's components by RUN_FIELDS and the
    declared settings, the run name box, the Run button)."""
    import gradio as gr

    from gepard_demo.alignment.weights import bundled_sizes

    with gr.Row():
        with gr.Column():
            set_name = gr.Dropdown(builtin_sets(), value="smoke", label="Test set", elem_id="eval-set")
            set_file = gr.File(label="...or your own set (.txt one sentence a line, or .jsonl with id/text/category)",
                               file_types=[".txt", ".jsonl"], type="filepath")
            with gr.Row():
                limit = gr.Number(value=0, precision=0, minimum=0, label="Limit (0 = all)", elem_id="eval-limit")
                batch_size = gr.Number(value=4, precision=0, minimum=1, maximum=256, label="Batch size", elem_id="eval-batch")
                base_seed = gr.Number(value=1234, precision=0, minimum=0, label="Base seed")
            engine_name = gr.Radio(["local", "piper"], value="local", label="Engine (piper = real-speech reference)")
            run_name = gr.Textbox(label="Run name (blank: timestamp)")
        with gr.Column():
            settings = build_settings_form()
        with gr.Column():
            sizes = bundled_sizes() or ["tiny.en"]
            asr_backend = gr.Radio(["faster-whisper", "openai-whisper"], value="faster-whisper", label="ASR")
            asr_model = gr.Dropdown(sizes, value=sizes[0], label="Whisper model", allow_custom_value=True)
            vad = gr.Checkbox(value=True, label="VAD trim (Silero)")
            run_btn = gr.Button("Run evaluation", variant="primary", elem_id="eval-run")
    fields = (set_name, set_file, limit, batch_size, base_seed, engine_name, asr_backend, asr_model, vad)
    return {**dict(zip(RUN_FIELDS, fields)), **settings}, run_name, run_btn
