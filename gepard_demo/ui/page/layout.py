"""The page: text, controls, Generate/Stop, live player line, results, and the Eval tab."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from typing import Callable, cast

import gradio as gr
from gradio.components import Component

from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.streaming.text_input import CHAPTER_CHARS, MAX_TEXT_CHARS, SEGMENT_CHARS
from gepard_demo.ui.audio_route import PCM_PREFIX, QUEUE_PREFIX, STATIC_DIR, WORKLET_PATH
from gepard_demo.ui.hosts.page_host import PageHost
from gepard_demo.ui.hosts.served import lock_controls
from gepard_demo.ui.jobs.controller import DemoController
from gepard_demo.ui.jobs.queue_line import QUEUE_STATES
from gepard_demo.ui.page.banner import banner_markdown
from gepard_demo.ui.page.controls import CONTROL_NAMES, control_values, default_values
from gepard_demo.ui.page.endpoints import generate_door, wire_speak
from gepard_demo.ui.page.fields import build_group
from gepard_demo.ui.page.guardrails import build_guardrail_controls
from gepard_demo.ui.page.reading_preview import build_preview, wire_preview
from gepard_demo.ui.page.speak_link import SPEAK_TAB_ID, SpeakLink
from gepard_demo.ui.page.take_panel import TakeHandlers, build_takes_panel, wire_takes
from gepard_demo.ui.page.saved_voices import VISITOR_KEY, VisitorVoices, wire_saved_voices
from gepard_demo.ui.page.voice import PageVoices, build_voice_group, wire_voice_events
from gepard_demo.ui.words_route import WORDS_PREFIX
from gepard_demo.units import EXPECTED_BASE_S, EXPECTED_PER_WORD_S, Json

EXAMPLES = [
    "Hello! This is Gepard, a text to speech model that starts talking almost at once.",
    "The weather is sunny today.",
    "She sells sea shells by the sea shore, and the shells she sells are surely sea shells.",
    "Please call Dr. Smith at 555-0142 before 9:30 a.m. on Monday.",
    "Streaming speech should begin within a moment of the click, and then play without a single gap.",
]

CSS = """
#gepard-player-status { font-size: 0.95em; padding: 6px 0 2px; font-weight: 600; }
#gepard-player-status[data-state=idle] { font-weight: 400; opacity: 0.7; }
#gepard-charcount { font-size: 0.85em; opacity: 0.75; text-align: right; }
#gepard-charcount[data-over="1"] { color: #d62728; opacity: 1; font-weight: 600; }
.gepard-range-note { font-size: 0.85em; color: #d62728; font-weight: 600; margin-top: 2px; }
#gepard-banner { border-left: 4px solid #e0a800; padding-left: 10px; }
#gepard-banner details > summary { cursor: pointer; }
/* The previous result while a new request runs (or after it failed): greyed, and said so. */
#gepard-results.gepard-stale #gepard-audio, #gepard-results.gepard-stale #gepard-stats,
#gepard-results.gepard-stale #gepard-plot { opacity: 0.35; filter: grayscale(1); }
#gepard-results.gepard-stale::before { content: "Previous result"; font-size: 0.85em; opacity: 0.7; }
/* While the live stream plays: the full-audio player waits, and "Done" is not said yet. */
body.gepard-playing #gepard-audio { opacity: 0.4; pointer-events: none; }
body.gepard-playing #gepard-status { display: none; }
/* The p_stop plots (pstop_plot.py): SVG in the page's own colours, so the dark theme needs nothing. */
.gepard-pstop { font-size: 0.85em; touch-action: none; }
.gepard-pstop-title { margin-bottom: 2px; }
.gepard-pstop-readout { min-height: 1.3em; opacity: 0.85; font-variant-numeric: tabular-nums; }
/* Captions (captions.js): the word being spoken lit; low confidence dotted; unaligned greyed. */
.gepard-words { line-height: 1.8; }
.gepard-w { padding: 1px 2px; border-radius: 3px; }
.gepard-w[data-seek] { cursor: pointer; }
.gepard-w[data-state=low] { text-decoration: underline dotted; }
.gepard-w[data-state=unaligned] { opacity: 0.4; }
.gepard-w.gepard-now { background: #ffd54f; color: #111; }
.gepard-words-note { font-size: 0.85em; opacity: 0.75; }
#gepard-reading-preview mark { background: rgba(255, 213, 79, 0.45); color: inherit; border-radius: 3px; }
.gepard-w[data-op=sub] { background: rgba(255, 152, 0, 0.35); }
.gepard-w[data-op=del] { background: rgba(214, 39, 40, 0.3); text-decoration: line-through; }
.gepard-w[data-op=ins] { background: rgba(31, 119, 180, 0.3); }
"""


# The page's scripts, in the order they run: the player's parts before player.js, which builds the
# player from them (window.gepardPlayerParts); the page, the plot and the captions read the player.
PLAYER_SCRIPTS = ("player_clock.js", "player_buffer.js", "player_fetch.js", "player_line.js", "player.js")
PAGE_SCRIPTS = PLAYER_SCRIPTS + ("page.js", "pstop.js", "captions.js")


def player_config(sample_rate: int, gain: float = 1.0) -> dict:
    """window.GEPARD_PLAYER_CONFIG: what player.js and its parts read."""
    # Relative URLs, so the page also works when a proxy serves it under a path prefix.
    return {"sampleRate": sample_rate, "pcmPrefix": PCM_PREFIX.lstrip("/"), "workletUrl": WORKLET_PATH.lstrip("/"),
            "queuePrefix": QUEUE_PREFIX.lstrip("/"), "queueStates": list(QUEUE_STATES), "gain": gain,
            "segmentChars": SEGMENT_CHARS, "expected": {"baseS": EXPECTED_BASE_S, "perWordS": EXPECTED_PER_WORD_S}}


def page_head(sample_rate: int, gain: float = 1.0, max_chars: int = MAX_TEXT_CHARS) -> str:
    """<head> markup: the player's and the page's config and code (inline, so it runs before any click)."""
    scripts = "".join(f"<script>\n{(STATIC_DIR / name).read_text(encoding='utf-8')}\n</script>\n" for name in PAGE_SCRIPTS)
    return (
        f"<script>window.GEPARD_PLAYER_CONFIG = {json.dumps(player_config(sample_rate, gain))};\n"
        f"window.GEPARD_PAGE_CONFIG = {json.dumps({'maxChars': max_chars})};\n"
        f"window.GEPARD_CAPTIONS_CONFIG = {json.dumps({'wordsPrefix': WORDS_PREFIX.lstrip('/')})};</script>\n"
        + scripts.rstrip("\n")
    )


def _start_js(n_inputs: int) -> str:
    # Runs in the click, before the request: starts the player on a fresh job id (which also
    # resumes the AudioContext inside the user gesture) and sends that id as the first input.
    return (
        "(...args) => { const out = args.slice(0, %d);"
        " if (window.gepardPage) window.gepardPage.onStart();"
        " const pre = document.querySelector('#gepard-prebuffer input[type=number]');"
        " const prebufferMs = pre ? Number(pre.value) || 0 : 0;"
        " const autoBox = document.querySelector('#gepard-prebuffer-auto input[type=checkbox]');"
        " const auto = autoBox ? autoBox.checked : true;"
        " const text = document.querySelector('#gepard-text textarea');"
        " const words = text ? (text.value.match(/[\\p{L}\\p{N}]+/gu) || []).length : 0;"
        " out[0] = window.gepardPlayer ? window.gepardPlayer.start({prebufferMs, auto, words, chars: text ? text.value.length : 0}) : ''; return out; }" % n_inputs
    )


_STOP_JS = "(...args) => [window.gepardPlayer ? window.gepardPlayer.stop('stopped') : '']"
_STOP_LINE_JS = "(line, status) => window.gepardPage ? window.gepardPage.stopAnswered(line, status) : line"
_CANCEL_QUEUED_JS = ("(line) => { if (String(line).includes('had not started'))"
                     " document.querySelector('#gepard-cancel-queued')?.click(); }")
_FAILED_JS = ("() => { if (window.gepardPlayer) window.gepardPlayer.failed();"
              " if (window.gepardPage) window.gepardPage.onFailure(); }")
_SUCCESS_JS = "() => { if (window.gepardPage) window.gepardPage.onSuccess(); }"


@dataclass
class Results:
    status: gr.Markdown
    audio: gr.Audio
    stats: gr.Markdown
    plot: gr.HTML
    take: gr.State | None = None  # the finished run's Take, which the Takes panel adds to the visitor's list

    def outputs(self) -> list:
        return [self.status, self.audio, self.stats, self.plot, self.take]


def text_and_buttons(max_chars: int = MAX_TEXT_CHARS) -> tuple[gr.Textbox, gr.Button, gr.Button, gr.UploadButton,
                                                              gr.HTML]:
    """Text box (with its character count, the preview of what the model reads, the host's limit and
    a .txt upload), Generate / Stop, the live line."""
    text = gr.Textbox(
        label="Text (Ctrl+Enter generates)", lines=4, value=EXAMPLES[0], elem_id="gepard-text",
        placeholder=f"Type what Gepard should say (up to {max_chars} characters; long text is read segment by "
                    "segment, the next ones made while one plays).",
    )
    gr.HTML(f'<div id="gepard-charcount" data-over="0">{len(EXAMPLES[0])} / {max_chars} characters</div>')
    preview = build_preview()  # reading_preview.py: shown while normalisation or a lexicon is on
    with gr.Row():
        upload = gr.UploadButton("Open a .txt file", file_types=[".txt"], size="sm", elem_id="gepard-text-file")
        gr.Markdown(limit_words(max_chars), elem_id="gepard-text-limit")
    with gr.Row():
        generate_btn = gr.Button("Generate", variant="primary", elem_id="gepard-generate")
        stop_btn = gr.Button("Stop", variant="stop", elem_id="gepard-stop")
    # The live line (player.js writes it): place in line and wait, then generating / playing, and
    # for a long text the segments ready ahead of playback.
    gr.HTML('<div id="gepard-player-status" data-state="idle" aria-live="polite">Ready.</div>')
    return text, generate_btn, stop_btn, upload, preview


def limit_words(max_chars: int) -> str:
    """The host's text limit, and why, in a line under the text box."""
    if max_chars >= CHAPTER_CHARS:
        return (f"Up to {max_chars:,} characters: a chapter (about {max_chars // 15 // 60} min of speech). "
                "Long text plays while its next segments are made.")
    return (f"Up to {max_chars:,} characters here (about {max(1, max_chars // 15 // 60)} min of speech): a public "
            "page shares its engine and each visitor's GPU quota. Run the app yourself for a chapter.")


def result_panel() -> Results:
    """Status, full audio, stats and p_stop: beside the text on a wide screen, right under
    the buttons on a narrow one (Gradio stacks a row's columns in order)."""
    status = gr.Markdown("", elem_id="gepard-status")
    audio = gr.Audio(label="Full audio (WAV; playable when the live playback ends)", type="filepath",
                     interactive=False, buttons=["download"], elem_id="gepard-audio")
    # The words, filled by captions.js from /gepard/words/{job} (ui/captions.py); SRT and VTT links with them.
    gr.HTML('<div id="gepard-captions" aria-live="polite"></div>', elem_id="gepard-captions-box")
    stats = gr.Markdown("", elem_id="gepard-stats")
    plot = gr.HTML("", elem_id="gepard-plot")  # pstop_plot.py's SVG: live while generating, then interactive
    return Results(status, audio, stats, plot)


def page_values(sampling: SamplingSettings, stream: StreamSettings) -> dict[str, Json]:
    """What the controls show on a fresh page: these settings, the seed box's start when random."""
    return {**default_values(), **control_values(sampling, stream)}


def sampling_controls(values: dict[str, Json]) -> dict[str, Component]:
    c = build_group("sampling", values)
    c.update(build_guardrail_controls(values))
    return c


def stream_controls(values: dict[str, Json]) -> dict[str, Component]:
    c = build_group("stream", values, extra={"lookback_frames": {"interactive": values["decode_mode"] == "lookback"}})
    # Read by the page's player only (see _start_js), never sent to Python.
    gr.Checkbox(value=True, elem_id="gepard-prebuffer-auto", interactive=True,
                label="Start buffer: automatic (from the generation rate the player measures and the text's length)")
    gr.Slider(0, 10000, value=0, step=100, elem_id="gepard-prebuffer",
              label="Player start buffer (ms) when automatic is off: 0 starts on the first chunk")
    decode_mode = cast(gr.Radio, c["decode_mode"])  # its declared widget
    decode_mode.change(lambda m: gr.update(interactive=m == "lookback"), c["decode_mode"], c["lookback_frames"],
                            queue=False, show_progress="hidden", api_visibility="private")
    return c


def build_demo(
    host: PageHost,
    controller: DemoController,
    sampling: SamplingSettings,
    stream: StreamSettings,
    eval_tab: Callable[..., None] | None = None,  # eval.ui.tab.build_eval_tab: (host, speak=SpeakLink)
    eval_tab_error: str | None = None,
    max_chars: int = MAX_TEXT_CHARS,
    saved_voices: VisitorVoices | None = None,
) -> gr.Blocks:
    """The Blocks app. `sampling`/`stream` are the controls' initial values; saved_voices: the
    voice picker's libraries (saved_voices.py; None: no picker).

    Speak tab: [text + buttons + live line | results] in one row, then the control groups
    (each a function returning {control name: component}; a new group is one more call)."""
    with gr.Blocks(title="Gepard-1.0 TTS demo") as demo:
        gr.Markdown("# Gepard-1.0 text to speech\nType, press **Generate** (or Ctrl+Enter), and the speech streams as it is made.")
        gr.Markdown(banner_markdown(host), elem_id="gepard-banner")
        # The visitor's token for their saved voices (saved_voices.py): at the top, so it is mounted, and
        # read back from the browser, before the page's load event asks for it. Encrypted under the
        # page's lasting secret, so a browser still reads its token after the app restarts.
        visitor = None if saved_voices is None else \
            gr.BrowserState("", storage_key=VISITOR_KEY, secret=saved_voices.secret)
        with gr.Tabs() as tabs:
            with gr.Tab("Speak", id=SPEAK_TAB_ID):
                with gr.Row(equal_height=False):
                    with gr.Column(scale=3, min_width=320):
                        text, generate_btn, stop_btn, upload, preview = text_and_buttons(max_chars)
                    with gr.Column(scale=2, min_width=320, elem_id="gepard-results"):
                        results = result_panel()
                # Below the buttons and the results, so that on a phone Generate is on the first
                # screen and the results come right under it.
                gr.Examples(EXAMPLES, inputs=[text], label="Examples", elem_id="gepard-examples")
                controls: dict[str, Component] = {"text": text}
                values = page_values(sampling, stream)
                with gr.Row(equal_height=False):
                    with gr.Column(min_width=320):
                        with gr.Accordion("Sampling", open=True):
                            controls.update(sampling_controls(values))
                        with gr.Accordion("Text arrival: at once, or as a language model writes it", open=False):
                            controls.update(build_group("text", values))
                        with gr.Accordion("Text normalization: how numbers, money and times are read", open=False):
                            controls.update(build_group("reading", values))
                    with gr.Column(min_width=320):
                        with gr.Accordion("Streaming", open=False):
                            controls.update(stream_controls(values))
                        # The "Voice and guidance" group (issue 9, voice.py).
                        voice_controls, ref_status, picker = build_voice_group(values, saved_voices is not None)
                        controls.update(voice_controls)
                panel = build_takes_panel()
                results.take = panel.pending
                lock_controls(host, controls)  # a served model fixes some (issue 8): greyed, with the reason
                job_id = gr.Textbox(visible="hidden", elem_id="gepard-job-id")
            if eval_tab is not None or eval_tab_error:
                with gr.Tab("Eval", id="eval"):
                    if eval_tab_error:
                        gr.Markdown(f"The Eval tab could not be built: `{html.escape(eval_tab_error)}`")
                    elif eval_tab is not None:
                        eval_tab(host, speak=SpeakLink(controls, tabs))
        wire_events(controller, controls, job_id, generate_btn, stop_btn, results, host.concurrency)
        wire_speak(controller, controls, job_id, host.concurrency)  # the API's own way in (README)
        wire_takes(panel, TakeHandlers(host, controller), controls)
        wire_preview(preview, text, controls["text_normalization"], controls["lexicon_entries"])
        ref_audio = cast(gr.Audio, controls["ref_audio"])  # its declared widget (voice.py)
        wire_voice_events(controller.voices, ref_audio, ref_status)
        if saved_voices is not None:
            voices = controller.voices
            # A page with saved voices makes its voices here or in its GPU calls, and built the picker.
            assert isinstance(voices, PageVoices) and picker is not None and visitor is not None
            wire_saved_voices(saved_voices, voices, picker, visitor, ref_audio, demo)
        upload.upload(controller.read_text_file, [upload], [text], show_progress="minimal", api_name="read_text_file")
    return demo


def wire_events(controller: DemoController, controls: dict[str, Component], job_id: gr.Textbox,
                generate_btn: gr.Button, stop_btn: gr.Button, results: Results, concurrency: int = 1) -> None:
    """concurrency: Generates that run at once (a batching host's max_batch; the rest queue)."""
    inputs = [job_id] + [controls[name] for name in CONTROL_NAMES]
    generated = generate_btn.click(
        generate_door(controller),
        inputs=inputs,
        outputs=results.outputs(),
        js=_start_js(len(inputs)),
        api_name="generate",
        concurrency_limit=concurrency,
        concurrency_id="gepard-generate",
        show_progress="minimal",
        # A click while one runs is not dropped: the player replaces the old stream (which
        # cancels that request) and this one queues behind it.
        trigger_mode="multiple",
    )
    # A refused request (bad input): close the stream opened for it; results stay greyed.
    generated.failure(None, js=_FAILED_JS)
    generated.success(None, js=_SUCCESS_JS)
    stop_line = gr.Textbox(visible="hidden", elem_id="gepard-stop-line")  # the API's answer to Stop
    stopped = stop_btn.click(
        controller.stop,
        inputs=[job_id],
        outputs=[stop_line],
        js=_STOP_JS,
        api_name="stop",
        concurrency_limit=None,  # never waits behind the generation it stops
    )
    stopped.then(None, inputs=[stop_line, results.status], outputs=[results.status], js=_STOP_LINE_JS,
                 api_visibility="private")
    # A request stopped before its turn also leaves Gradio's queue at once (the registry already
    # made it a no-op). Only then: cancelling a running generator would lose its final stats.
    cancel_queued = gr.Button(visible="hidden", elem_id="gepard-cancel-queued")
    cancel_queued.click(None, cancels=[generated], queue=False, api_visibility="private")
    stopped.then(None, inputs=[stop_line], js=_CANCEL_QUEUED_JS, api_visibility="private")
