"""The page's derailment guardrails: the authors' repetition penalty and force stop (facts §15;
gepard_demo/model/guardrails.py), a sub-group of the Sampling controls.

The controller receives their three values after the voice group's (controls.CONTROL_NAMES), and
controls.parse_controls reads them with the others, so the page, its API and "Open in the demo"
parse them alike: `force_stop_frames` is a text box because it takes a number of frames, "auto"
or "off" (`force_stop_setting`).
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from gepard_demo.settings import AUTO, MAX_FRAMES_LIMIT, MAX_REPETITION_PENALTY, SamplingSettings, SettingsError

from .fields import FieldSlider

GUARD_CONTROL_NAMES = ("repetition_penalty", "repetition_window", "force_stop_frames")
OFF = "off"


def force_stop_text(value: int | str | None) -> str:
    """A setting's force_stop_frames as the page's box shows it."""
    return OFF if value is None else str(value)


def force_stop_setting(value: Any) -> int | str | None:
    """The box's text (or an API client's number) -> force_stop_frames; SettingsError naming it."""
    if value is None or isinstance(value, str) and value.strip().lower() in ("", OFF, "none"):
        return None
    if isinstance(value, str) and value.strip().lower() == AUTO:
        return AUTO
    if isinstance(value, bool):
        raise SettingsError(f"force_stop_frames must be {OFF!r}, {AUTO!r} or a whole number of frames, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise SettingsError(f"force_stop_frames must be {OFF!r}, {AUTO!r} or a whole number of frames, got {value!r}") from None
    if not number.is_integer():
        raise SettingsError(f"force_stop_frames must be a whole number of frames, got {value!r}")
    return int(number)


def control_values(sampling: SamplingSettings) -> dict[str, Any]:
    """What the controls show for these settings ("use these settings", "Open in the demo")."""
    return {"repetition_penalty": sampling.repetition_penalty, "repetition_window": sampling.repetition_window,
            "force_stop_frames": force_stop_text(sampling.force_stop_frames)}


def build_guardrail_controls(sampling: SamplingSettings) -> dict[str, Any]:
    """The group's controls by name (GUARD_CONTROL_NAMES), inside the Sampling accordion."""
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
