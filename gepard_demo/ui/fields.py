"""Gradio inputs that leave range checks to the server's own validation.

Gradio's Slider / Number / Radio refuse an out-of-range value in preprocess with a message
that does not say which control it was ("Value 0 is less than minimum value 1.") and print a
traceback for it. These subclasses pass the value through unchanged; the controller's
`parse_controls` checks it against CONTROL_RANGES and names the field in its error. They
render as the stock components (is_template).
"""

from __future__ import annotations

from typing import Any

import gradio as gr


class FieldSlider(gr.Slider):
    is_template = True

    def preprocess(self, payload: Any) -> Any:
        return payload


class FieldNumber(gr.Number):
    is_template = True

    def preprocess(self, payload: Any) -> Any:
        return payload


class FieldRadio(gr.Radio):
    is_template = True

    def preprocess(self, payload: Any) -> Any:
        return payload
