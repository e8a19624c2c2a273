"""The page: text, controls, Generate/Stop, live player line, results, and the Eval tab."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any, Callable

import gradio as gr

from gepard_demo.settings import DECODE_MODES, MAX_FRAMES_LIMIT, SamplingSettings, StreamSettings

from .audio_route import PCM_PREFIX, WORKLET_PATH
from .banner import banner_markdown
from .controller import CONTROL_NAMES, DemoController
from .fields import FieldNumber, FieldRadio, FieldSlider
from .model_host import ModelHost
from .served import lock_controls
from .voice import build_voice_group

EXAMPLES = [
    "Hello! This is Gepard, a text to speech model that starts talking almost at once.",
    "The weather is sunny today.",
    "She sells sea shells by the sea shore, and the shells she sells are surely sea shells.",
    "Please call Dr. Smith at 555-0142 before 9:30 a.m. on Monday.",
    "Streaming speech should begin within a moment of the click, and then play without a single gap.",
]

CSS = """
#gepard-player-status { font-family: ui-monospace, monospace; font-size: 0.9em; padding: 4px 0; }
#gepard-banner { border-left: 4px solid #e0a800; padding-left: 10px; }
"""


def page_head(sample_rate: int) -> str:
    """<head> markup: the player's config and code (inline, so it runs before any click)."""
    # Relative URLs, so the page also works when a proxy serves it under a path prefix.
    config = {"sampleRate": sample_rate, "pcmPrefix": PCM_PREFIX.lstrip("/"), "workletUrl": WORKLET_PATH.lstrip("/")}
    player_js = Path(__file__).with_name("player.js").read_text(encoding="utf-8")
    return (
        f"<script>window.GEPARD_PLAYER_CONFIG = {json.dumps(config)};</script>\n"
        f"<script>\n{player_js}\n</script>"
    )


def _start_js(n_inputs: int) -> str:
    # Runs in the click, before the request: starts the player on a fresh job id (which also
    # resumes the AudioContext inside the user gesture) and sends that id as the first input.
    return (
        "(...args) => { const out = args.slice(0, %d);"
        " const pre = document.querySelector('#gepard-prebuffer input[type=number]');"
        " const prebufferMs = pre ? Number(pre.value) || 0 : 0;"
        " out[0] = window.gepardPlayer ? window.gepardPlayer.start({prebufferMs}) : ''; return out; }" % n_inputs
    )


_STOP_JS = "(...args) => [window.gepardPlayer ? window.gepardPlayer.stop('stopped') : '']"


def build_demo(
    host: ModelHost,
    controller: DemoController,
    sampling: SamplingSettings,
    stream: StreamSettings,
    eval_tab: Callable[[Any], Any] | None = None,
    eval_tab_error: str | None = None,
) -> gr.Blocks:
    """The Blocks app. `sampling`/`stream` are the controls' initial values."""
    with gr.Blocks(title="Gepard-1.0 TTS demo") as demo:
        gr.Markdown("# Gepard-1.0 text to speech\nType, press **Generate**, and the speech streams as it is made.")
        gr.Markdown(banner_markdown(host), elem_id="gepard-banner")
        with gr.Tabs():
            with gr.Tab("Speak", id="speak"):
                with gr.Row():
                    with gr.Column(scale=3):
                        text = gr.Textbox(
                            label="Text", lines=4, value=EXAMPLES[0], elem_id="gepard-text",
                            placeholder="Type what Gepard should say (up to 2000 characters; long text is read sentence by sentence).",
                        )
                        gr.Examples(EXAMPLES, inputs=[text], label="Examples")
                        with gr.Row():
                            generate_btn = gr.Button("Generate", variant="primary", elem_id="gepard-generate")
                            stop_btn = gr.Button("Stop", variant="stop", elem_id="gepard-stop")
                        gr.HTML(
                            '<div id="gepard-player-status" data-state="idle">Player: idle</div>',
                            js_on_load=None,
                        )
                        status = gr.Markdown("", elem_id="gepard-status")
                    with gr.Column(scale=2):
                        with gr.Accordion("Sampling", open=True):
                            temperature = FieldSlider(0.05, 5.0, value=sampling.temperature, step=0.05, label="Temperature", elem_id="gepard-temperature")
                            top_k = FieldSlider(0, 8, value=sampling.top_k, step=1, label="Top-k (0 = off; heads have 6-8 levels)", elem_id="gepard-top-k")
                            greedy = gr.Checkbox(value=sampling.greedy, label="Greedy (argmax; ignores temperature and top-k)", elem_id="gepard-greedy")
                            stop_threshold = FieldSlider(0.01, 0.99, value=sampling.stop_threshold, step=0.01, label="Stop threshold", elem_id="gepard-stop-threshold")
                            with gr.Row():
                                seed = FieldNumber(value=sampling.seed if sampling.seed is not None else 42, precision=0, label="Seed", minimum=0, maximum=2**53 - 1, elem_id="gepard-seed")
                                random_seed = gr.Checkbox(value=sampling.seed is None, label="Random seed (the one used is shown)", elem_id="gepard-random-seed")
                            max_frames = FieldSlider(1, MAX_FRAMES_LIMIT, value=sampling.max_frames, step=1, label="Max frames (21.5 per second)", elem_id="gepard-max-frames")
                        with gr.Accordion("Streaming", open=False):
                            first_chunk = FieldSlider(1, 100, value=stream.first_chunk_frames, step=1, label="First chunk frames", elem_id="gepard-first-chunk")
                            chunk = FieldSlider(1, 200, value=stream.chunk_frames, step=1, label="Chunk frames", elem_id="gepard-chunk")
                            decode_mode = FieldRadio(list(DECODE_MODES), value=stream.decode_mode, label="Decode mode (exact = one whole decode)", elem_id="gepard-decode-mode")
                            lookback = FieldSlider(0, 64, value=stream.lookback_frames, step=1, label="Lookback frames (lookback mode)", elem_id="gepard-lookback")
                            fade_ms = FieldSlider(0, 500, value=stream.fade_ms, step=5, label="End fade (ms)", elem_id="gepard-fade")
                            silence_ms = FieldSlider(0, 2000, value=stream.silence_ms, step=10, label="End silence (ms)", elem_id="gepard-silence")
                            # Read by the page's player only (see _start_js), never sent to Python.
                            gr.Slider(0, 10000, value=0, step=100, elem_id="gepard-prebuffer",
                                      label="Player start buffer (ms): 0 starts on the first chunk; raise it where generation is slower than real time")
                        voice_controls = build_voice_group(sampling)
                lock_controls(host, {"temperature": temperature, "top_k": top_k, "greedy": greedy,
                                     "stop_threshold": stop_threshold, "first_chunk_frames": first_chunk,
                                     "chunk_frames": chunk, "decode_mode": decode_mode, "lookback_frames": lookback,
                                     "fade_ms": fade_ms, "silence_ms": silence_ms})
                with gr.Row():
                    with gr.Column(scale=3):
                        audio = gr.Audio(label="Full audio (WAV)", type="filepath", interactive=False,
                                         buttons=["download"], elem_id="gepard-audio")
                        plot = gr.Plot(label="p_stop per step", elem_id="gepard-plot")
                    with gr.Column(scale=2):
                        stats = gr.Markdown("", elem_id="gepard-stats")
                job_id = gr.Textbox(visible="hidden", elem_id="gepard-job-id")
            if eval_tab is not None or eval_tab_error:
                with gr.Tab("Eval", id="eval"):
                    if eval_tab_error:
                        gr.Markdown(f"The Eval tab could not be built: `{html.escape(eval_tab_error)}`")
                    else:
                        eval_tab(host)

        inputs = [job_id, text, temperature, top_k, greedy, stop_threshold, seed, random_seed,
                  max_frames, first_chunk, chunk, decode_mode, lookback, fade_ms, silence_ms, *voice_controls]
        assert len(inputs) == 1 + len(CONTROL_NAMES)
        generated = generate_btn.click(
            controller.generate,
            inputs=inputs,
            outputs=[status, audio, stats, plot],
            js=_start_js(len(inputs)),
            api_name="generate",
            concurrency_limit=1,
            concurrency_id="gepard-engine",
            show_progress="minimal",
        )
        # If Gradio rejects the request before our handler runs (e.g. a value outside a
        # slider's range), nothing will ever be produced: stop the player's stream.
        generated.failure(None, js="() => { if (window.gepardPlayer) window.gepardPlayer.failed(); }")
        stop_btn.click(
            controller.stop,
            inputs=[job_id],
            outputs=[status],
            js=_STOP_JS,
            api_name="stop",
            concurrency_limit=None,  # never waits behind the generation it stops
        )
    return demo
