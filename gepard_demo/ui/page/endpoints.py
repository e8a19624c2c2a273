"""The page's API doors, as Gradio and `gradio_client` see them: /generate (the Generate button's
own) and /speak (the one to use from a script: README, "Use via API").

Each door is one named parameter per control, with a fresh page's value as its default
(controls.default_values, from the settings' declarations), then Gradio's request, which Gradio
recognizes by its annotation and passes last. A door only gathers its values by name for the
controller, which reads them once (controls.read_controls) and refuses a bad one naming it.

/generate takes the job id first (the page's player streams that job's PCM), then every control
(controls.CONTROL_NAMES), and answers with the page's outputs. /speak takes the text and the
settings, the seed left out for a random one and the job id optional (given, Stop and the PCM route
reach the run), and answers with the WAV and a small summary (views.speak_summary).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import gradio as gr
from gradio.components import Component

from gepard_demo.ui.jobs.registry import JOB_ID_RULE
from gepard_demo.ui.page.controls import CONTROL_NAMES, default_values

if TYPE_CHECKING:
    from gepard_demo.ui.jobs.controller import DemoController

# /speak's settings: every control but "random seed" (a seed left out is random).
SPEAK_NAMES = tuple(name for name in CONTROL_NAMES if name != "random_seed")
SPEAK_DESCRIPTION = ("Speak a text: returns the WAV and a JSON summary (seed used, frames, audio seconds, how it "
                     "ended). Every setting is optional; leave the seed out for a random one. job_id is optional: "
                     f"{JOB_ID_RULE} (given, /stop and the PCM stream reach the run).")


def _door(names: tuple[str, ...], defaults: dict, call: Callable) -> Callable:
    """A generator function Gradio calls with `names`' values in order (then its request): it yields
    what `call(values by name, request)` yields. Its signature names each with its default, as the
    API shows it."""
    P = inspect.Parameter

    def door(*args):  # a generator function, as Gradio must see it to stream its updates
        request = args[len(names)] if len(args) > len(names) else None
        yield from call(dict(zip(names, args)), request)

    params = [P(n, P.POSITIONAL_OR_KEYWORD, **({"default": defaults[n]} if n in defaults else {})) for n in names]
    params.append(P("request", P.POSITIONAL_OR_KEYWORD, default=None, annotation=gr.Request))
    door.__signature__ = inspect.Signature(params)
    door.__annotations__ = {"request": gr.Request}
    return door


def generate_door(controller: DemoController) -> Callable:
    """/generate: the job id, the text, then every other control with a fresh page's value as its default."""
    def call(values: dict, request: gr.Request | None) -> Iterator[tuple]:
        job_id = values.pop("job_id")
        return controller.generate(job_id, values, request)

    defaults = {n: v for n, v in default_values().items() if n != "text"}
    return _door(("job_id",) + CONTROL_NAMES, defaults, call)


def speak_door(controller: DemoController) -> Callable:
    """/speak: the text, the settings (the seed None: random), the job id ("" : a fresh one)."""
    def call(values: dict, request: gr.Request | None) -> Iterator[tuple]:
        job_id = values.pop("job_id") or ""
        seed = values.get("seed")
        values["random_seed"] = seed is None or str(seed).strip() == ""
        return controller.speak(job_id, values, request)

    defaults = {**{n: v for n, v in default_values().items() if n != "text"}, "seed": None, "job_id": ""}
    return _door(SPEAK_NAMES + ("job_id",), defaults, call)


def wire_speak(controller: DemoController, controls: dict[str, Component], job_id: gr.Textbox,
               concurrency: int) -> None:
    """/speak, an API-only event: the page's own controls as its inputs (their API types and
    checks), its answers in two hidden outputs named for the API. It shares Generate's places."""
    audio = gr.Audio(type="filepath", label="audio", visible=False)
    summary = gr.JSON(label="summary", visible=False)
    trigger = gr.Button(visible=False)
    trigger.click(speak_door(controller), inputs=[controls[n] for n in SPEAK_NAMES] + [job_id],
                  outputs=[audio, summary], api_name="speak", api_description=SPEAK_DESCRIPTION,
                  concurrency_limit=concurrency, concurrency_id="gepard-generate", show_progress="hidden")
