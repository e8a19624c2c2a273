"""The page's derailment guardrails: the authors' repetition penalty and force stop (facts §15;
gepard_demo/model/guardrails.py), a sub-group of the Sampling controls.

The controller receives their three values (settings.GUARDRAIL_FIELDS) after the voice group's
(controls.CONTROL_NAMES), and controls.parse_controls reads them with the others, so the page, its
API and "Open in the demo" parse them alike: `force_stop_frames` is a text box because it takes a
number of frames, "auto" or "off" (settings.parse_force_stop).
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from gepard_demo.settings import (
    GUARDRAIL_FIELDS,
    MAX_FRAMES_LIMIT,
    MAX_REPETITION_PENALTY,
    SamplingSettings,
    force_stop_text,
)

from .fields import FieldSlider


def control_values(sampling: SamplingSettings) -> dict[str, Any]:
    """What the controls show for these settings ("use these settings", "Open in the demo")."""
    values = {name: getattr(sampling, name) for name in GUARDRAIL_FIELDS}
    return {**values, "force_stop_frames": force_stop_text(sampling.force_stop_frames)}


def build_guardrail_controls(sampling: SamplingSettings) -> dict[str, Any]:
    """The group's controls by name (settings.GUARDRAIL_FIELDS), inside the Sampling accordion."""
    with gr.Accordion("Derailment guardrails (the authors' runner)", open=False, elem_id="gepard-guardrails"):
        gr.Markdown("On short texts Gepard can fail to lock onto the words and babble until a cap: no stop "
                    "threshold rescues that (its stop head is saturated). These are the authors' guards; the "
                    "plot's dashed line is the model's belief entropy, which stays high when it derails.")
        c = {
            "repetition_penalty": FieldSlider(1.0, MAX_REPETITION_PENALTY, value=sampling.repetition_penalty, step=0.05,
                                            elem_id="gepard-repetition-penalty",
                                            label="Repetition penalty (1 = off; the authors' typical 1.1-1.3)"),
            "repetition_window": FieldSlider(0, MAX_FRAMES_LIMIT, value=sampling.repetition_window, step=1,
                                           elem_id="gepard-repetition-window",
                                           label="Penalty window: recent frames whose codes are penalized (0 = all)"),
            "force_stop_frames": gr.Textbox(value=force_stop_text(sampling.force_stop_frames), max_lines=1,
                                            elem_id="gepard-force-stop",
                                            label="Force stop at frame: off, auto (4 x the text's expected frames, "
                                                  "80-300) or a number"),
        }
    return c
