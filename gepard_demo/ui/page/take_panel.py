"""The Takes panel: the visitor's last takes, A/B side by side, a re-cut at another threshold,
"use these settings", and a take as WAV + settings JSON + frames (takes.py holds the data and the rules).

Everything here reads the visitor's own `gr.State` list; nothing is kept between visitors.
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import gradio as gr
import numpy as np
import soundfile as sf
from gradio.components import Component

from gepard_demo.model.guards.stop_rule import THRESHOLD, threshold_of
from gepard_demo.settings import SamplingSettings
from gepard_demo.ui.captions import subtitle_files
from gepard_demo.ui.page.controls import CONTROL_NAMES, control_values
from gepard_demo.ui.page.pstop_plot import Trace, pstop_svg
from gepard_demo.ui.page.speak_link import GENERATE_JS
from gepard_demo.ui.takes import (
    MAX_TAKES,
    TABLE_HEADERS,
    TABLE_WIDTHS,
    Take,
    add_take,
    diff_markdown,
    find,
    next_number,
    settings_json,
    table_rows,
)
from gepard_demo.units import FRAME_RATE_HZ

if TYPE_CHECKING:
    from gepard_demo.ui.hosts.page_host import PageHost
    from gepard_demo.ui.jobs.controller import DemoController

KEEP_JSON = 200  # settings files kept for download (all visitors together; the newest)


@dataclass
class TakesPanel:
    state: gr.State
    pending: gr.State
    table: gr.Dataframe
    pick_a: gr.Dropdown
    pick_b: gr.Dropdown
    audio_a: gr.Audio
    audio_b: gr.Audio
    plot: gr.HTML
    diff: gr.Markdown
    use_a: gr.Button
    files: gr.File
    recut_threshold: gr.Slider
    recut_button: gr.Button
    recut_note: gr.Markdown
    recut_audio: gr.Audio
    generate_at: gr.Button


def build_takes_panel() -> TakesPanel:
    state = gr.State([])
    pending = gr.State(None)  # the Generate's finished run, before it joins `state`
    with gr.Accordion(f"Takes: replay, compare (A/B), re-cut (this page's last {MAX_TAKES})", open=True,
                      elem_id="gepard-takes-panel"):
        table = gr.Dataframe(headers=TABLE_HEADERS, column_widths=TABLE_WIDTHS, value=[], interactive=False, wrap=True,
                             elem_id="gepard-takes",
                             label="Every Generate is a take (newest first)")
        with gr.Row():
            pick_a = gr.Dropdown(choices=[], value=None, label="A", elem_id="gepard-take-a", allow_custom_value=False)
            pick_b = gr.Dropdown(choices=[], value=None, label="B", elem_id="gepard-take-b", allow_custom_value=False)
        with gr.Row():
            audio_a = gr.Audio(label="A", type="filepath", interactive=False, elem_id="gepard-take-a-audio")
            audio_b = gr.Audio(label="B", type="filepath", interactive=False, elem_id="gepard-take-b-audio")
        plot = gr.HTML("", elem_id="gepard-ab-plot")
        with gr.Row():
            use_a = gr.Button("Use A's settings", elem_id="gepard-use-a")
            files = gr.File(label="A as WAV + settings JSON + its frames (.codes.npy; python -m gepard_demo synth makes it again)",
                            file_count="multiple", interactive=False, elem_id="gepard-take-files")
        with gr.Group():
            recut_threshold = gr.Slider(0.01, 0.99, value=0.5, step=0.01, elem_id="gepard-recut-threshold",
                                        label="Re-cut A at stop threshold (no new generation; drag the red line)")
            with gr.Row():
                recut_button = gr.Button("Re-cut A", elem_id="gepard-recut")
                generate_at = gr.Button("Generate A's settings at this threshold", elem_id="gepard-generate-at")
            recut_note = gr.Markdown("", elem_id="gepard-recut-note")
            recut_audio = gr.Audio(label="A re-cut", type="filepath", interactive=False, elem_id="gepard-recut-audio")
        diff = gr.Markdown("", elem_id="gepard-take-diff")
    return TakesPanel(state, pending, table, pick_a, pick_b, audio_a, audio_b, plot, diff, use_a, files, recut_threshold,
                      recut_button, recut_note, recut_audio, generate_at)


def reach_words(take: Take | None, threshold: float) -> str:
    """Where A stops at `threshold`, or how far a re-cut goes and what to do beyond it."""
    if take is None:
        return ""
    why = take.recut_refusal()
    if why:
        return f"No re-cut for take #{take.number}: {why}."
    limit = take.recut_limit()
    reach = "every threshold" if limit is None else f"thresholds below **{limit:.3f}**"
    if limit is not None and threshold >= limit:
        return (f"At {threshold:g} take #{take.number} would run past its last frame: a re-cut reaches {reach}. "
                f"**Generate A's settings at this threshold** to hear it.")
    d = take.recut_at(threshold)
    where = (f"stops at frame {d.stop_frame} ({d.frames / FRAME_RATE_HZ:.2f} s)" if d.stop_fired
             else f"is force-stopped at {d.frames} frames" if d.force_stopped
             else f"runs to its budget ({d.frames} frames)")
    return f"At {threshold:g} take #{take.number} {where}; a re-cut reaches {reach}."


def ab_plot(a: Take | None, b: Take | None, threshold: float) -> str:
    """A's and B's p_stop traces in one plot, the threshold line at the re-cut's."""
    traces = [Trace(f"{name} #{t.number}", tuple(t.p_stop), t.stop_frame, tuple(t.entropy))
              for name, t in (("A", a), ("B", b)) if t is not None]
    return pstop_svg(traces, threshold, plot_id="ab") if traces else ""


class TakeHandlers:
    """The panel's event handlers, bound to the page's host (its codec, or its GPU calls) and the
    controller (its WAV folder)."""

    def __init__(self, host: PageHost, controller: DemoController):
        self.host, self.controller = host, controller

    @property
    def wav_dir(self) -> Path:
        return Path(self.controller.wav_dir)

    @staticmethod
    def added(takes: list[Take], take: Take | None) -> list[Take]:
        if take is None:
            return gr.skip()
        return add_take(takes, dataclasses.replace(take, number=next_number(takes)))

    def listed(self, takes: list[Take], a: str | None, b: str | None):
        """After a new take: the table, A = the newest, B = the one before (unless chosen)."""
        labels = [t.label for t in takes or []]
        new_a = labels[0] if labels else None
        keep_b = b if b in labels and b != new_a else (labels[1] if len(labels) > 1 else None)
        return (table_rows(takes), gr.update(choices=labels, value=new_a), gr.update(choices=labels, value=keep_b))

    def compared(self, takes: list[Take], a: str | None, b: str | None, threshold: float):
        """A new B: both players, the plot, the diff and where A stops."""
        ta, tb = find(takes, a), find(takes, b)
        diff = diff_markdown(ta, tb) if ta and tb else ("Pick a second take as B to compare." if ta else "")
        return (_playable(ta), _playable(tb), ab_plot(ta, tb, threshold), diff, reach_words(ta, threshold))

    def picked_a(self, takes: list[Take], a: str | None, b: str | None):
        """A new A: what compared() shows, A's files, and the re-cut slider at A's own threshold."""
        ta = find(takes, a)
        threshold = threshold_of(ta.sampling if ta else SamplingSettings())
        return (gr.update(value=threshold), *self.compared(takes, a, b, threshold), self._files(ta) if ta else None,
                None)

    def threshold_moved(self, takes: list[Take], a: str | None, b: str | None, threshold: float):
        ta = find(takes, a)
        return ab_plot(ta, find(takes, b), threshold), reach_words(ta, threshold)

    def recut(self, takes: list[Take], a: str | None, threshold: float):
        take = find(takes, a)
        if take is None:
            raise gr.Error("Pick a take as A first.", title="No take")
        try:
            take.recut_at(threshold)  # the rule's refusal here, in words, before any GPU call
        except ValueError as exc:
            raise gr.Error(str(exc), title="Re-cut not possible", print_exception=False) from None
        try:
            audio, derived = self.host.recut(take, threshold)  # in a GPU call of its own under ZeroGPU
        except Exception as exc:
            line = self.host.explain(exc)
            if line is None:
                raise
            raise gr.Error(line, title="GPU not available", print_exception=False) from None
        path = self.wav_dir / f"gepard-recut-{take.number}-{secrets.token_hex(4)}.wav"
        sf.write(str(path), audio, self.host.sample_rate, subtype="FLOAT")
        where = (f"stops at frame {derived.stop_frame}" if derived.stop_fired
                 else f"is force-stopped at {derived.frames} frames" if derived.force_stopped
                 else f"runs to {derived.frames} frames")
        note = (f"Re-cut of take #{take.number} at {threshold:g}: {where}, {len(audio) / self.host.sample_rate:.2f} s "
                f"(from its own frames, no new generation).")
        return str(path), note

    def use(self, takes: list[Take], a: str | None, threshold: float | None = None):
        """A's controls back into the page (the seed fixed to the one it used)."""
        take = find(takes, a)
        if take is None:
            raise gr.Error("Pick a take as A first.", title="No take")
        values = {**control_values(take.sampling), **take.controls}  # a take from before a control existed: its setting
        if threshold is not None:
            values[THRESHOLD] = threshold
        out = []
        for name in CONTROL_NAMES:
            value = values.get(name)
            if name == "ref_audio" and value and not Path(str(value)).exists():
                value = None  # the upload is gone from the server (Gradio's cache): say so
                gr.Warning(f"Take #{take.number}'s reference voice is no longer on the server: the default "
                           "voice is set; upload the clip again to clone it.")
            out.append(value)
        return out

    def _files(self, take: Take) -> list[str]:
        folder = self.wav_dir / "takes"
        folder.mkdir(parents=True, exist_ok=True)
        doc = settings_json(take)
        # Named by its content: every visitor's take #1 gets its own file, a second pick rewrites nothing.
        digest = hashlib.sha256(doc.encode()).hexdigest()[:10]
        json_path = folder / f"take-{take.number}-seed-{take.sampling.seed}-{digest}.json"
        if json_path.exists():
            json_path.touch()  # picked again: the newest, so the pruning below keeps it
        else:
            json_path.write_text(doc, encoding="utf-8")
        codes_path = None
        if take.codes is not None:  # its frames, (frames, 32) int16: to decode elsewhere or compare with an eval row's
            codes_path = json_path.with_suffix(".codes.npy")
            if not codes_path.exists():
                np.save(codes_path, np.asarray(take.codes, np.int16))
        old = sorted(folder.glob("take-*.json"), key=lambda q: q.stat().st_mtime)
        for stale in old[: max(0, len(old) - KEEP_JSON)]:  # one a take: keep the folder bounded
            stale.unlink(missing_ok=True)
            for kind in (".codes.npy", ".srt", ".vtt"):
                stale.with_suffix(kind).unlink(missing_ok=True)
        ref = take.controls.get("ref_audio")
        ref = str(ref) if ref and Path(str(ref)).exists() else None  # the synth line's --ref-audio
        # Its words as subtitles beside its WAV (captions.py; none while captions are off).
        subtitles = subtitle_files(self.controller.captions, take.job_id, folder, json_path.stem)
        return [p for p in (_playable(take), *subtitles, str(json_path), codes_path and str(codes_path), ref) if p]


def _playable(take: Take | None) -> str | None:
    return take.wav if take is not None and take.wav and Path(take.wav).exists() else None


def wire_takes(panel: TakesPanel, handlers: TakeHandlers, controls: dict[str, Component]) -> None:
    """The panel's listeners: none in the page's API, none with a spinner but the re-cut's."""
    p = panel
    compare_out = [p.audio_a, p.audio_b, p.plot, p.diff, p.recut_note]
    p.pending.change(handlers.added, [p.state, p.pending], [p.state],
                     api_visibility="private", show_progress="hidden")
    p.state.change(handlers.listed, [p.state, p.pick_a, p.pick_b], [p.table, p.pick_a, p.pick_b],
                   api_visibility="private", show_progress="hidden")
    p.pick_a.change(handlers.picked_a, [p.state, p.pick_a, p.pick_b],
                    [p.recut_threshold, *compare_out, p.files, p.recut_audio],
                    api_visibility="private", show_progress="hidden")
    p.pick_b.change(handlers.compared, [p.state, p.pick_a, p.pick_b, p.recut_threshold], compare_out,
                    api_visibility="private", show_progress="hidden")
    p.recut_threshold.change(handlers.threshold_moved, [p.state, p.pick_a, p.pick_b, p.recut_threshold],
                             [p.plot, p.recut_note], api_visibility="private", show_progress="hidden")
    p.recut_button.click(handlers.recut, [p.state, p.pick_a, p.recut_threshold], [p.recut_audio, p.recut_note],
                         api_visibility="private")
    outs = [controls[name] for name in CONTROL_NAMES]
    p.use_a.click(lambda takes, a: handlers.use(takes, a), [p.state, p.pick_a], outs,
                  api_visibility="private", show_progress="hidden")
    p.generate_at.click(handlers.use, [p.state, p.pick_a, p.recut_threshold], outs,
                        api_visibility="private", show_progress="hidden").success(None, js=GENERATE_JS)
