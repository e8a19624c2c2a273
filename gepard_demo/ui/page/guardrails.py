"""The page's derailment guardrails: the authors' repetition penalty and force stop (facts §15;
gepard_demo/model/guards/guardrails.py), a sub-group of the Sampling controls: the settings declared in
the "guardrails" group, under a note on what derailment is.
"""

from __future__ import annotations

from collections.abc import Mapping

import gradio as gr
from gradio.components import Component

from gepard_demo.ui.page.fields import build_group
from gepard_demo.units import Json


def build_guardrail_controls(values: Mapping[str, Json]) -> dict[str, Component]:
    """The group's controls by name, inside the Sampling accordion; `values`: what they show."""
    with gr.Accordion("Derailment guardrails (the authors' runner)", open=False, elem_id="gepard-guardrails"):
        gr.Markdown("On short texts Gepard can fail to lock onto the words and babble until a cap: no stop "
                    "threshold rescues that (its stop head is saturated). These are the authors' guards; the "
                    "plot's dashed line is the model's belief entropy, which stays high when it derails.")
        return build_group("guardrails", values)
