"""The Eval tab's sweep section: launch a sweep with a progress bar, reopen one, see its charts.

`build_sweep_section(engine_provider, runs_dir)` creates the components inside the caller's
Gradio context (eval.ui.tab.build_eval_tab calls it). Sweeps go to <runs_dir>/sweeps/<name>/, the
layout `python -m eval sweep --out` writes, so the CLI can resume a sweep started here and
the other way round. The engine is the app's (eval.ui.common.eval_engine_from_provider): generation
holds the app's engine lock.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import pandas as pd

from eval.runs.run import RunConfig, RunError
from eval.runs.sets import load_set
from eval.ui.common import EvalLimits, chart_images, tab_error
from gepard_demo.declare import declared
from gepard_demo.settings import SamplingSettings

if TYPE_CHECKING:
    from gradio.components import Component

    from gepard_demo.ui.hosts.model_host import EngineFacts
    from gepard_demo.units import Json

SWEEP_COLUMNS = ["run", "n", "wer_corpus", "wer_ci_low", "wer_ci_high", "runaway_rate", "force_stop_rate", "derail_rate",
                 "clean_rate", "reward_mean", "truncation_rate",
                 "loop_rate", "long_pause_rate", "failure_rate", "failure_ci_low", "failure_ci_high",
                 "duration_ratio_median", "stop_lag_ms_median"]
# The "Grid points" table's headers: short labels of whole words (an axis: its control's short label),
# each column as wide as its longest word (ui.takes.header_widths), so none breaks mid-word.
SWEEP_HEADERS = {"run": "point", "n": "n", "wer_corpus": "WER", "wer_ci_low": "WER CI low", "wer_ci_high": "WER CI high",
                 "runaway_rate": "runaway rate", "force_stop_rate": "force stop rate", "derail_rate": "derail rate",
                 "clean_rate": "clean rate", "reward_mean": "mean reward", "truncation_rate": "truncated rate",
                 "loop_rate": "loop rate", "long_pause_rate": "long pause rate", "failure_rate": "failure rate",
                 "failure_ci_low": "failure CI low", "failure_ci_high": "failure CI high",
                 "duration_ratio_median": "median length ratio", "stop_lag_ms_median": "median stop lag ms"}


def _box_text(name: str, values: tuple) -> str:
    """A default axis's values as its box shows them: each as its flag writes it, spaces between."""
    text = declared(SamplingSettings)[name]
    words = []
    for v in values:
        word = text.write(v)
        assert word is not None, f"{name}={v!r}"  # None: an unset value; settings.py's sweep defaults are numbers
        words.append(word)
    return " ".join(words)


def _axis_values(text: str, name: str) -> tuple:
    """A default axis's box: its values separated by spaces or commas, each read as its flag reads it."""
    from eval.sweeps.grid import axis_words

    read = declared(SamplingSettings)[name].read
    try:
        vals = tuple(read(x) for x in re.split(r"[,\s]+", (text or "").strip()) if x)
    except ValueError:
        raise ValueError(f"{axis_words(name)}: numbers separated by spaces or commas, got {text!r}") from None
    if not vals:
        raise ValueError(f"{axis_words(name)}: give at least one value")
    return vals


def list_sweeps(runs_dir: str | Path) -> list[str]:
    d = Path(runs_dir) / "sweeps"
    if not d.is_dir():
        return []
    found = [p.parent for p in d.glob("*/sweep.json")]
    return [p.name for p in sorted(found, key=lambda p: -(p / "sweep.json").stat().st_mtime)]


def view_sweep(runs_dir: str | Path, name: str) -> tuple[str, pd.DataFrame, list[str]]:
    """(summary markdown, sweep table, chart paths) of a finished sweep."""
    if not name:
        return "Pick a sweep.", pd.DataFrame(columns=SWEEP_COLUMNS), []
    d = Path(runs_dir) / "sweeps" / name
    if not (d / "sweep.csv").is_file():
        raise RunError(f"{d} has no finished sweep (no sweep.csv)")
    df = pd.read_csv(d / "sweep.csv")
    info = json.loads((d / "sweep.json").read_text())
    axes = info["config"]["axes"]
    lines = [f"**Sweep {name}**: " + " x ".join(f"{k} {v}" for k, v in axes.items()) +
             f", {int(df['n'].max())} utterances per point, ASR {info.get('asr') or 'none'}"]
    cost = info.get("last_call", {})
    if cost:
        lines.append(f"Last call: {cost.get('rows', 0)} rows from {cost.get('sources_generated', 0)} generations "
                     f"(one-pass: {cost.get('one_pass')}), {cost.get('wall_s', 0):.0f} s.")
    best_path = d / "sweep_best.json"
    if best_path.is_file():
        best = json.loads(best_path.read_text()).get("best")
        if best:
            held = best.get("held_out_wer_delta_vs_default")
            lines.append(f"Best point ({best['rule']}): **{best['run']}**, tuning WER {100 * best['tuning_wer']:.1f}%"
                         + (f"; on the {len(best['held_out_ids'])} held-out sentences vs the default: "
                            f"{100 * held['delta']:+.1f} points [{100 * held['ci_low_delta']:+.1f}, {100 * held['ci_high_delta']:+.1f}]"
                            if held else "; no held-out sentences in this set"))
    axis_cols = [c for c in axes if c in df.columns]
    cols = axis_cols + [c for c in SWEEP_COLUMNS if c in df.columns]
    charts = sorted(str(p) for p in (d / "charts").glob("*.png"))
    return "\n\n".join(lines), df[cols], charts


def shown_sweep(table: pd.DataFrame) -> dict:
    """view_sweep's table as the tab shows it: a gr.update of its value, headed by SWEEP_HEADERS
    (an axis by its words), with the column widths that keep each header's words whole."""
    import gradio as gr

    from gepard_demo.declare import page_controls
    from gepard_demo.ui.takes import header_widths

    controls = page_controls(SamplingSettings)  # an axis: its control's short label, as the takes table heads it
    shown = table.rename(columns=lambda c: SWEEP_HEADERS.get(c) or (controls[c].short if c in controls else
                                                                    c.replace("_", " ")))
    return gr.update(value=shown, column_widths=header_widths(list(shown.columns), ()))


def run_sweep_ui(engine_provider: EngineFacts, runs_dir, name: str, form: Mapping[str, Json], axes: dict[str, str],
                 extra_axes: str, progress: Callable[[float, str], None] | None = None,
                 limits: EvalLimits = EvalLimits()):
    """Run (or resume) a sweep with the app's engine; returns (name, *view_sweep(...)). form: the
    tab's (settings_form.RUN_FIELDS and FORM_NAMES): the points vary the axes over its settings.
    axes: each default axis's box (grid.DEFAULT_AXES) by name; extra_axes: NAME=V1,V2 specs."""
    from eval.sweeps.grid import DEFAULT_AXES, SweepConfig, parse_axes
    from eval.sweeps.sweep import sweep
    from eval.ui.common import eval_engine_from_provider
    from eval.ui.settings_form import read_run_fields, read_settings_form

    sampling, stream = read_settings_form(form)
    name = (name or "").strip() or time.strftime("sweep-%Y%m%d-%H%M%S")
    if not re.fullmatch(r"[A-Za-z0-9._-]+", name) or name.startswith("."):
        raise ValueError(f"sweep name {name!r}: use letters, digits, '.', '_' or '-'")
    extra = parse_axes([a for a in re.split(r"[;\n]+", extra_axes or "") if a.strip()])
    engine = eval_engine_from_provider(engine_provider, "local")
    fields = read_run_fields(form)
    base = RunConfig(engine="local", model=engine.describe()["model"], set=fields.set,
                     sampling=sampling, stream=stream, batch_size=fields.batch_size, base_seed=fields.base_seed,
                     limit=fields.limit)
    # One-pass thresholds read the engine in this process; behind a GPU boundary each point runs
    # through GPU calls instead.
    swept = tuple((n, _axis_values(axes.get(n, ""), n)) for n in DEFAULT_AXES) + extra
    cfg = SweepConfig(base=base, swept=swept, one_pass=engine_provider.gpu is None)
    limits.check(len(load_set(base.set, base.limit)), base.sampling.max_frames, base.batch_size, len(cfg.points()))
    asr = fields.asr()
    sweep(cfg, Path(runs_dir) / "sweeps" / name, asr=asr, engine=engine, log=lambda m: None, progress=progress)
    return (name, *view_sweep(runs_dir, name))


def build_sweep_section(engine_provider: EngineFacts, runs_dir: str | Path, limits: EvalLimits,
                        form: dict[str, Component]) -> None:
    """The sweep accordion. form: the tab's form components by name (run_sweep_ui's `form`)."""
    import gradio as gr

    runs_dir = str(runs_dir)
    from eval.sweeps.grid import DEFAULT_AXES, axis_words

    grid = " x ".join(n.replace("_", " ") for n in DEFAULT_AXES)
    with gr.Accordion(f"Sweep: {grid} (one generation serves every threshold)", open=False):
        gr.Markdown("Every stop threshold of a point's other settings comes from one generation at the highest "
                    "threshold (exact prefixes). Charts: heatmaps with CIs and paired marks against the default point, the "
                    "best point (held-out sentences excluded), stop-head calibration. How to read them: eval/README.md.")
        with gr.Row():
            name = gr.Textbox(label="Sweep name (blank: timestamp; an existing name resumes it)")
            boxes = {n: gr.Textbox(value=_box_text(n, values), label=axis_words(n).capitalize())
                     for n, values in DEFAULT_AXES.items()}
            extra = gr.Textbox(value="", label="Extra axes (NAME=V1,V2; separate several with ';'), e.g. "
                                                   "repetition-penalty=1,1.15,1.3; force-stop-frames=off,auto")
        with gr.Row():
            run_btn = gr.Button("Run sweep", variant="primary")
            pick = gr.Dropdown(list_sweeps(runs_dir), label="Open a sweep", elem_id="eval-sweep-pick")
            refresh = gr.Button("Refresh list")
            open_btn = gr.Button("Open", elem_id="eval-sweep-open")
        summary = gr.Markdown()
        table = gr.Dataframe(label="Grid points", wrap=True, elem_id="eval-sweep-table")
        charts = gr.Gallery(label="Sweep charts", columns=2, height="auto")

    def _run(nm, *values, progress=gr.Progress()):
        axes, (extra_text, *values) = dict(zip(boxes, values)), values[len(boxes):]
        try:
            nm, text, tbl, imgs = run_sweep_ui(engine_provider, runs_dir, nm, dict(zip(form, values)), axes, extra_text,
                                               progress=lambda f, d: progress(f, desc=d), limits=limits)
        except Exception as e:  # shown in the tab: bad input must not look like a crash
            raise tab_error(e) from e
        return text, shown_sweep(tbl), chart_images(imgs), gr.update(choices=list_sweeps(runs_dir), value=nm)

    def _open(nm):
        try:
            text, tbl, imgs = view_sweep(runs_dir, nm)
        except Exception as e:
            raise tab_error(e) from e
        return text, shown_sweep(tbl), chart_images(imgs)

    run_btn.click(_run, api_name="eval_sweep", inputs=[name, *boxes.values(), extra, *form.values()],
                  outputs=[summary, table, charts, pick], concurrency_limit=1)
    refresh.click(lambda: gr.update(choices=list_sweeps(runs_dir)), None, [pick])
    open_btn.click(_open, [pick], [summary, table, charts], api_name="eval_sweep_open")

