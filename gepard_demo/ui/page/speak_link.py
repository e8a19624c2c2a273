"""A way into the Speak tab from elsewhere on the page: the Eval tab's "Open in the demo".

build_demo hands a SpeakLink to the Eval tab's builder (gepard_demo never imports eval). A handler
that returns `link.updates(values)` for `link.outputs()` puts a row's text and settings into the
Speak tab's controls and switches to it; chained with `.success(None, js=GENERATE_JS)` it then
presses Generate, so the row is made again as a take (p_stop, re-cut and downloads included).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import gradio as gr
from gradio.components import Component

from gepard_demo.ui.page.controls import CONTROL_NAMES

SPEAK_TAB_ID = "speak"
# After the controls' new values have reached the page (Gradio applies a handler's outputs
# before its .success chain runs; the pause lets the tab switch and the controls' own change
# events settle first).
GENERATE_JS = "() => { setTimeout(() => document.querySelector('#gepard-generate')?.click(), 300); }"


@dataclass(frozen=True)
class SpeakLink:
    controls: dict[str, Component]  # control name (CONTROL_NAMES) -> its component in the Speak tab
    tabs: gr.Tabs  # the one that holds the Speak tab

    def outputs(self) -> list:
        return [self.controls[name] for name in CONTROL_NAMES] + [self.tabs]

    def updates(self, values: Mapping[str, object]) -> list:
        """For outputs(): the controls named in `values` set, every other one left as the visitor
        has it (a served row knows only its seed and budget), and the Speak tab selected."""
        unknown = set(values) - set(CONTROL_NAMES)
        if unknown:
            raise ValueError(f"not a Speak tab control: {', '.join(sorted(unknown))}")
        return [values[name] if name in values else gr.skip() for name in CONTROL_NAMES] + \
            [gr.Tabs(selected=SPEAK_TAB_ID)]
