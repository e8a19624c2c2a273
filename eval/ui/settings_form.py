"""The Eval tab's settings form: every setting the Speak tab shows, from the same declarations
(gepard_demo.declare, through gepard_demo.ui.page.controls and fields), read back by the same parser,
less the seed (a run's seeds come from its base seed). A run and a sweep share it: a sweep's
points vary their axes over these settings. Before them the form has its run fields (RUN_FIELDS:
the set, engine and ASR), read back typed by `read_run_fields`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from eval.scoring.asr import ASRSettings
from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.ui.page.controls import CONTROL_NAMES, REFERENCE, default_values, group_controls, parse_controls

if TYPE_CHECKING:
    from gradio.components import Component

    from gepard_demo.units import Json

# The form's own fields, before its settings (FORM_NAMES): a run's set, engine and ASR.
RUN_FIELDS = ("set_name", "set_file", "limit", "batch_size", "base_seed", "engine_name", "asr_backend", "asr_model", "vad")

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


@dataclass(frozen=True)
class RunFields:
    """The run fields as a run and a sweep use them: set is the uploaded file's path, else the
    built-in set's name; limit None: the whole set."""

    set: str
    limit: int | None
    batch_size: int
    base_seed: int
    engine_name: str
    asr_backend: str
    asr_model: str
    vad: bool

    def asr(self) -> ASRSettings:
        """The ASR settings, checked when asked for (a run asks after its synthesis)."""
        return ASRSettings(backend=self.asr_backend, model=self.asr_model, vad=self.vad)


def read_run_fields(form: Mapping[str, Json]) -> RunFields:
    """The form's RUN_FIELDS, each as its widget gives it (a Number, a Radio, a File's path...)."""
    limit = form["limit"]
    return RunFields(set=_text(form, "set_file") if form["set_file"] else _text(form, "set_name"),
                     limit=_int(form, "limit") if limit else None,
                     batch_size=_int(form, "batch_size"), base_seed=_int(form, "base_seed"),
                     engine_name=_text(form, "engine_name"), asr_backend=_text(form, "asr_backend"),
                     asr_model=_text(form, "asr_model"), vad=bool(form["vad"]))


def _text(form: Mapping[str, Json], name: str) -> str:
    value = form[name]
    if not isinstance(value, str):  # an emptied Radio or Dropdown gives None
        raise ValueError(f"{name}: pick a value (got {value!r})")
    return value


def _int(form: Mapping[str, Json], name: str) -> int:
    value = form[name]
    if not isinstance(value, (int, float, str)):  # an emptied Number gives None: int() would fail on it too
        raise TypeError(f"{name}: a number, got {value!r}")
    return int(value)
