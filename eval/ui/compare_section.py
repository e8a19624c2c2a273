"""The Eval tab's comparison: a base run against one or more runs, as `python -m eval compare`.

The table (compare.md), the forest plot of per-category WER deltas and the failure-rate deltas,
the gate's verdict, and the utterances that got worse, worst first, played side by side (base and
new) and each one a click from the demo. The folder goes to <runs_dir>/compare/<base>-vs-<runs>/.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from eval.compare.folder import compare_into
from eval.compare.gate import Gate

from .common import tab_error
from .demo_link import wire_open
from .runs_view import list_runs, row_audio, run_folder

if TYPE_CHECKING:
    import gradio as gr

    from gepard_demo.ui.page.speak_link import SpeakLink

SEP = "\t"  # between a regression's run and id in the picker's value (neither holds a tab)


def comparison_name(base: str, news: list[str]) -> str:
    """The folder's name: base-vs-new[+new...], with a run's nesting flattened."""
    flat = lambda n: re.sub(r"[^A-Za-z0-9._-]+", "_", n)  # noqa: E731
    return f"{flat(base)}-vs-{'+'.join(flat(n) for n in news)}"[:200]


def compare_in_tab(runs_dir: str | Path, base: str, news: list[str] | str | None, gate_file: str | None,
                   max_wer_increase: float | None) -> tuple[str, str, str, list[tuple[str, str]]]:
    """(markdown, forest plot path, failures chart path, regressions as (label, run<TAB>id) worst first)."""
    news = [news] if isinstance(news, str) else [n for n in (news or []) if n]
    if not base or not news:
        raise ValueError("pick a base run and at least one run to compare with it")
    if base in news:
        raise ValueError(f"{base} is the base: compare it with other runs")
    gate = Gate.load(gate_file) if gate_file else Gate.max_wer_increase(0.0)
    if max_wer_increase not in (None, ""):
        gate = gate.with_overall_wer(float(max_wer_increase))
    out = Path(runs_dir) / "compare" / comparison_name(base, news)
    comparisons, written = compare_into(out, run_folder(runs_dir, base), [run_folder(runs_dir, n) for n in news], gate)
    breaches = sum(len(v) for v in written["breaches"].values())
    verdict = (f"**REGRESSION: {breaches} breach(es) of the gate**" if breaches else "**No significant regression** "
               "(no measure worse than the gate allows at 95%).")
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)\n?", "", (out / "compare.md").read_text())
    # The worse utterances' WAV links are relative to the folder; here they play below.
    text = re.sub(r"\[wav\]\([^)]*\)", "▶ below", text)
    worse = [(c.new, w) for c in comparisons for w in c.worse_utterances]
    worse.sort(key=lambda x: (-len(x[1]["new_failures"]), -x[1]["wer_delta"], x[1]["id"]))
    names = {str(run_folder(runs_dir, n)): n for n in news}
    picks = [(f"{names[new]}: {w['id']} ({w['category']}) WER {w['wer_base']:.2f} -> {w['wer_new']:.2f}"
              + (f", new: {', '.join(w['new_failures'])}" if w["new_failures"] else ""), f"{names[new]}{SEP}{w['id']}")
             for new, w in worse]
    return f"{verdict} Folder: `{out}`\n\n{text}", str(out / "forest.png"), str(out / "failures.png"), picks


def build_compare_section(runs_dir: str, speak: SpeakLink | None = None) -> dict[str, gr.Dropdown]:
    """The section's components in the current Gradio context; returns the run pickers (the tab
    refreshes their choices)."""
    import gradio as gr

    runs = list_runs(runs_dir)
    with gr.Accordion("Compare runs: per category and per failure, paired", open=False, elem_id="eval-compare"):
        with gr.Row():
            base = gr.Dropdown(runs, label="Base run", elem_id="eval-compare-base")
            news = gr.Dropdown(runs, multiselect=True, label="Runs to compare with it (one or more)",
                               elem_id="eval-compare-new")
        with gr.Row():
            gate_file = gr.File(label="Gate file (YAML, as eval/gates/example.yaml; empty: overall corpus WER only)",
                                file_types=[".yaml", ".yml"], type="filepath")
            max_inc = gr.Number(value=None, label="Allowed overall WER increase (0.01 = 1 point; overrides the gate's)")
            button = gr.Button("Compare", elem_id="eval-compare-run")
        out = gr.Markdown(elem_id="eval-compare-out")
        with gr.Row():
            forest = gr.Image(label="Per-category corpus WER deltas", type="filepath", elem_id="eval-compare-forest")
            failures = gr.Image(label="Failure-rate deltas", type="filepath", elem_id="eval-compare-failures")
        worse = gr.Dropdown([], label="Worse in the new run (worst first): play base and new",
                            elem_id="eval-compare-worse")
        with gr.Row():
            base_audio = gr.Audio(type="numpy", interactive=False, buttons=["download"], label="Base", elem_id="eval-compare-base-audio")
            new_audio = gr.Audio(type="numpy", interactive=False, buttons=["download"], label="New", elem_id="eval-compare-new-audio")
        with gr.Row():
            open_base = gr.Button("Open base in the demo", elem_id="eval-compare-open-base")
            open_new = gr.Button("Open new in the demo", elem_id="eval-compare-open-new")
        note = gr.Markdown(elem_id="eval-compare-note")

    def _compare(b, n, g, inc):
        try:
            text, forest_png, failures_png, picks = compare_in_tab(runs_dir, b, n, g, inc)
        except Exception as e:  # a bad gate or runs that cannot be compared: said in the tab
            raise tab_error(e) from e
        return text, forest_png, failures_png, gr.update(choices=picks, value=picks[0][1] if picks else None)

    def _play(b, pick):
        if not pick:
            return None, None
        run, uid = pick.split(SEP, 1)
        try:
            return row_audio(runs_dir, b, uid), row_audio(runs_dir, run, uid)
        except Exception as e:
            raise tab_error(e) from e

    button.click(_compare, [base, news, gate_file, max_inc], [out, forest, failures, worse], api_name="eval_compare")
    worse.change(_play, [base, worse], [base_audio, new_audio], api_visibility="private")
    wire_open(open_base, [base, worse], lambda b, pick: (b, pick.split(SEP, 1)[1] if pick else None), speak, note, runs_dir)
    wire_open(open_new, [worse], lambda pick: tuple(pick.split(SEP, 1)) if pick else (None, None), speak, note, runs_dir)
    return {"base": base, "news": news}
