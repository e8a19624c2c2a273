"""The page's setting controls as Gradio components, built from their declarations
(declare.Control, read through controls.group_controls), and the inputs they use.

Gradio's Slider / Number / Radio refuse an out-of-range value in preprocess with a message
that does not say which control it was ("Value 0 is less than minimum value 1.") and print a
traceback for it. These subclasses pass the value through unchanged; the controller's
`parse_controls` checks it against the control's declared range and names the field in its error. They
render as the stock components (is_template).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import gradio as gr
from gradio.components import Component

from gepard_demo.declare import Control, declared
from gepard_demo.ui.page.controls import group_controls
from gepard_demo.units import Json


class FieldSlider(gr.Slider):
    is_template = True

    def preprocess(self, payload: Json) -> Json:  # type: ignore[override]  # wider on purpose (module docstring)
        return payload


class FieldNumber(gr.Number):
    is_template = True

    def preprocess(self, payload: Json) -> Json:  # type: ignore[override]  # wider on purpose (module docstring)
        return payload


class FieldRadio(gr.Radio):
    is_template = True

    def preprocess(self, payload: Json) -> Json:  # type: ignore[override]  # wider on purpose (module docstring)
        return payload


def _widget(c: Control, value: Json, choices: tuple[str, ...] | None, prefix: str, **extra: Any) -> Component:
    """The control's component showing `value` (of the type its widget declares); extra: the form's
    own arguments for it (gradio's keywords, passed on as given)."""
    label, elem_id = c.label, prefix + c.key
    if c.widget == "slider":
        return FieldSlider(c.lo, c.hi, value=cast("float | None", value), step=c.step, label=label, elem_id=elem_id,
                           **extra)
    if c.widget == "checkbox":
        return gr.Checkbox(value=bool(value), label=label, elem_id=elem_id, **extra)
    if c.widget == "radio":
        return FieldRadio(list(choices or ()), value=cast("str | None", value), label=label, elem_id=elem_id, **extra)
    # None: an empty box
    return gr.Textbox(value="" if value is None else str(value), max_lines=1, label=label, elem_id=elem_id, **extra)


def build_group(group: str, values: Mapping[str, Json], extra: dict[str, dict] | None = None,
                omit: tuple[str, ...] = (), prefix: str = "gepard-") -> dict[str, Component]:
    """One page group's controls (declare.PAGE_GROUPS), in declared order, showing `values`
    (controls.default_values with the form's settings). extra: more arguments for a control;
    omit: settings this form leaves out; prefix: the form's element ids ("eval-" on the Eval tab)."""
    out: dict[str, Component] = {}
    for name, (cls, c) in group_controls(group).items():
        more = (extra or {}).get(name, {})
        if name in omit:
            continue
        if c.widget == "seed":
            with gr.Row():
                random_seed = out["random_seed"] = gr.Checkbox(
                    value=bool(values["random_seed"]), label="Random seed (the one used is shown)",
                    elem_id=prefix + "random-seed")
                out[name] = _widget(c, values[name], None, prefix, interactive=not values["random_seed"], **more)
            # The seed box only matters with a fixed seed.
            random_seed.change(lambda r: gr.update(interactive=not r), random_seed, out[name],
                               queue=False, show_progress="hidden", api_visibility="private")
        else:
            text = declared(cls).get(name)
            out[name] = _widget(c, values[name], text.choices if text else None, prefix, **more)
    return out
