"""The Eval tab's settings form: every setting the Speak tab shows, from the same declarations
(gepard_demo.declare, through gepard_demo.ui.page.controls and fields), read back by the same parser,
less the seed (a run's seeds come from its base seed). A run and a sweep share it: a sweep's
points vary their axes over these settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.ui.page.controls import CONTROL_NAMES, REFERENCE, default_values, group_controls, parse_controls

if TYPE_CHECKING:
    from gradio.components import Component

    from gepard_demo.units import Json

# The Speak tab's controls this form shows, in their order (the tab's inputs after its own fields).
# An eval run hands each text over at once: the Speak tab's text arrival is not the form's.
FORM_NAMES = tuple(n for n in CONTROL_NAMES if n not in ("text", "seed", "random_seed", REFERENCE, *group_controls("text")))
PREFIX = "eval-"  # the form's element ids: eval-top-k, eval-max-frames, eval-force-stop...


def build_settings_form() -> dict[str, Component]:
    """The form's controls by name (FORM_NAMES), in the current Gradio context."""
    import gradio as gr

    from gepard_demo.ui.page.fields import build_group

    values = default_values()
    form = build_group("sampling", values, omit=("seed",), prefix=PREFIX)
    with gr.Accordion("Derailment guardrails (the authors' runner)", open=False):
        form.update(build_group("guardrails", values, prefix=PREFIX))
    with gr.Accordion("Guidance", open=False):
        form.update(build_group("voice", values, prefix=PREFIX))
    with gr.Accordion("Streaming and end of speech", open=False):
        form.update(build_group("stream", values, prefix=PREFIX))
    with gr.Accordion("Text normalization", open=False):
        form.update(build_group("reading", values, prefix=PREFIX))
    return {name: form[name] for name in FORM_NAMES}


def read_settings_form(form: Mapping[str, Json]) -> tuple[SamplingSettings, StreamSettings]:
    """The form's values (any of FORM_NAMES; one left out is the page's default) -> validated
    settings, or a SettingsError naming the bad field, as the Speak tab and the CLI refuse it."""
    return parse_controls({name: form[name] for name in FORM_NAMES if name in form})
