"""The page's API doors, as Gradio and `gradio_client` see them: /generate (the Generate button's
own) and /speak (the one to use from a script: README, "Use via API").

Each door is one named parameter per control, then Gradio's request, which Gradio recognizes by
its annotation and passes last. The API shows each parameter's default as its input component's
value: what a fresh page shows, derived from the settings' declarations (with the checkpoint's
operating point, or a server's fixed settings, over them); a value the door leaves out is a fresh
page's (controls.default_values). A door only gathers its values by name for the
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
    what `call(values by name, request)` yields. Its signature names each parameter (the API's
    names), with `defaults` (the API shows one where its component's value is None)."""
    P = inspect.Parameter

    def door(*args):  # a generator function, as Gradio must see it to stream its updates
        request = args[len(names)] if len(args) > len(names) else None
        yield from call(dict(zip(names, args)), request)

    params = [P(n, P.POSITIONAL_OR_KEYWORD, **({"default": defaults[n]} if n in defaults else {})) for n in names]
    params.append(P("request", P.POSITIONAL_OR_KEYWORD, default=None, annotation=gr.Request))
    door.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]  # what Gradio reads
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
    """/speak: the text, the settings, the seed (None: a random one), the job id (None: a fresh one)."""
    def call(values: dict, request: gr.Request | None) -> Iterator[tuple]:
        job_id = values.pop("job_id") or ""
        values["random_seed"] = values.get("seed") is None
        return controller.speak(job_id, values, request)

    # Gradio's API shows each input component's value as its parameter's default (the page's
    # controls: what a fresh page shows), or the signature's where that value is None.
    return _door(SPEAK_NAMES + ("job_id",), {**default_values(), "seed": None, "job_id": None}, call)


def wire_speak(controller: DemoController, controls: dict[str, Component], job_id: gr.Textbox,
               concurrency: int) -> None:
    """/speak, an API-only event: the page's own controls as its inputs (their API types and
    checks) but for the seed, a whole number or none (random); its answers in two hidden outputs
    named for the API. It shares Generate's places."""
    seed = gr.Number(value=None, precision=0, label="seed", visible=False)
    inputs = [seed if name == "seed" else controls[name] for name in SPEAK_NAMES] + [job_id]
    audio = gr.Audio(type="filepath", label="audio", visible=False)
    summary = gr.JSON(label="summary", visible=False)
    trigger = gr.Button(visible=False)
    trigger.click(speak_door(controller), inputs=inputs, outputs=[audio, summary], api_name="speak",
                  api_description=SPEAK_DESCRIPTION, concurrency_limit=concurrency, concurrency_id="gepard-generate",
                  show_progress="hidden")
