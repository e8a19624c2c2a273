"""The page's controls as values, derived from the settings' declarations (declare.Control on each
field of SamplingSettings, StreamSettings and FeedSettings): their names in the order Generate takes them, the
values that show given settings, and `parse_controls`, which reads them back into validated
settings naming any bad control, and `read_controls`, which reads one Generate's values once, where it
enters, into `PageControls`: the session's request and the values a take keeps. The page, its API,
the takes' "use these settings" and the Eval tab's "Open in the demo" all go through here; fields.py
builds the widgets, endpoints.py the API's doors.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from gepard_demo.declare import PAGE_GROUPS, Control, declared, page_controls, show, values_of, whole_number
from gepard_demo.host_settings import TrafficSettings
from gepard_demo.settings import FeedSettings, SamplingSettings, SettingsError, StreamSettings
from gepard_demo.streaming.seams import SessionRequest, Speaker
from gepard_demo.units import Json

if TYPE_CHECKING:
    from gepard_demo.voice.reference_audio import PageAudio

SETTINGS = (SamplingSettings, StreamSettings, FeedSettings)
SEED_BOX = "42"  # what the seed box holds while the seed is random: a fixed seed to start from
REFERENCE = "ref_audio"  # the voice group's clip, before its settings (voice.py reads it, not a setting)
S = TypeVar("S", SamplingSettings, StreamSettings, FeedSettings)


def group_controls(group: str) -> dict[str, tuple[type, Control]]:
    """The declared controls of one page group, by name, in field order, with their settings class."""
    return {name: (cls, c) for cls in SETTINGS for name, c in page_controls(cls).items() if c.group == group}


def _control_names() -> tuple[str, ...]:
    names = ["text"]
    for group in PAGE_GROUPS:
        names += [REFERENCE] if group == "voice" else []
        for name, (_, c) in group_controls(group).items():
            names += [name, "random_seed"] if c.widget == "seed" else [name]
    return tuple(names)


# The control values, in the order the page passes them after the job id (the API's order).
CONTROL_NAMES = _control_names()


def control_values(sampling: SamplingSettings, stream: StreamSettings | None = None,
                   feed: FeedSettings | None = None) -> dict[str, Json]:
    """Settings -> the controls that show them (parse_controls read backwards). A random seed
    leaves the seed box out (it keeps what the visitor typed); no `stream` (`feed`), none of its controls."""
    out: dict[str, Json] = {}
    for settings in (sampling, stream, feed):
        if settings is None:
            continue
        text = declared(type(settings))
        shown = page_controls(type(settings))
        for (name, value), c in zip(values_of(settings, shown).items(), shown.values()):
            if c.widget == "seed":
                out["random_seed"] = value is None
                out.update({} if value is None else {name: value})
            elif c.widget == "text":
                out[name] = text[name].write(value)
            else:
                out[name] = c.unset if value is None else value
    return out


def default_values() -> dict[str, Json]:
    """Every control's value on a fresh page (what an API call that leaves some out gets)."""
    return {"text": "", REFERENCE: None, "seed": SEED_BOX, **control_values(SamplingSettings(), StreamSettings(), FeedSettings())}


def _number(name: str, value: object) -> float:
    if value is None or isinstance(value, bool) or isinstance(value, str) and not value.strip():
        raise SettingsError(f"{name} is empty", name)
    if not isinstance(value, (int, float, str)):
        raise SettingsError(f"{name} must be a number, got {value!r}", name)
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise SettingsError(f"{name} must be a number, got {value!r}", name) from None
    if not math.isfinite(x):
        raise SettingsError(f"{name} must be a finite number, got {value!r}", name)
    return x


def _integer(name: str, value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value  # exact, even above 2**53 (a float would round a 63-bit seed)
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        return int(value)  # the seed box's text: exact too
    x = _number(name, value)
    if not x.is_integer():
        raise SettingsError(f"{name} must be a whole number, got {value!r}", name)
    return int(x)


def _in_range(name: str, c: Control, x: float) -> float:
    """The setting's own range (declare.Range), checked before the settings are made so the
    message names the control's value as typed."""
    if c.range is not None and x not in c.range:
        raise SettingsError(f"{name} must be in {c.range}, got {show(x)}", name)
    return x


def _read(cls: type[S], name: str, c: Control, values: Mapping[str, object]) -> Json:
    """One control's value -> its setting, or a SettingsError naming it. The page's range is
    checked here (a typed or API value outside the slider); `validate` checks the rest."""
    value = values[name]
    if c.widget == "checkbox":
        return bool(value)
    if c.widget == "radio":
        choices = declared(cls)[name].choices or ()
        if str(value) not in choices:
            raise SettingsError(f"{name} must be one of {', '.join(choices)}, got {value!r}", name)
        return str(value)
    if c.widget == "text":
        try:
            # The box's text; a value from the API is read as it came (a TypeError below).
            return declared(cls)[name].read(cast(str, value))
        except SettingsError:
            raise
        except (TypeError, ValueError):
            raise SettingsError(f"{name} cannot be {value!r}", name) from None
    if c.widget == "seed":
        return None if values["random_seed"] else _in_range(name, c, _integer(name, value))
    number = _integer(name, value) if whole_number(cls, name) else _number(name, value)
    if c.unset is not None and number == c.unset:
        return None
    return _in_range(name, c, number)


def _parse(values: Mapping[str, object], cls: type[S]) -> S:
    values = {**default_values(), **values}  # an API call may leave later controls out
    changes: dict[str, Any] = {name: _read(cls, name, c, values) for group in PAGE_GROUPS  # each of its kind (_read)
               for name, (owner, c) in group_controls(group).items() if owner is cls}
    return cls(**changes)


def parse_controls(values: Mapping[str, object]) -> tuple[SamplingSettings, StreamSettings]:
    """Page values -> validated settings; raises SettingsError naming the bad control."""
    return _parse(values, SamplingSettings), _parse(values, StreamSettings)


def parse_feed(values: Mapping[str, object]) -> FeedSettings:
    """The page's text arrival controls -> validated FeedSettings (SettingsError names the bad one)."""
    return _parse(values, FeedSettings)


@dataclass(frozen=True)
class PageControls:
    """One Generate's controls, read once where it enters (read_controls): the checked request its
    session takes, and the widgets' values as they were sent (every control; a take keeps them for
    "use these settings", the reference clip scores the take's likeness)."""

    values: Mapping[str, Json]
    request: SessionRequest

    @property
    def sampling(self) -> SamplingSettings:
        return self.request.sampling

    @property
    def stream(self) -> StreamSettings:
        return self.request.stream

    @property
    def reference(self) -> PageAudio:
        """The voice group's clip as the page sent it (None: the default voice)."""
        return reference_of(self.values)


def reference_of(values: Mapping[str, object]) -> PageAudio:
    # Gradio's Audio value (a file path, or (rate, samples) through the API), read as such by
    # voice/reference_audio.page_audio, which refuses anything else with a reason.
    return cast("PageAudio", values.get(REFERENCE))


def read_controls(values: Mapping[str, Json], speaker: Callable[[PageAudio], Speaker], traffic: TrafficSettings,
                  request_start: float | None = None) -> PageControls:
    """A Generate's control values (the page's, or an API call's that may leave later ones out) ->
    PageControls. speaker: the host's `voices().speaker` (it turns the reference clip into what the
    host takes); traffic: the page's limits. Raises SettingsError naming a bad control, or the
    speaker's ReferenceAudioError."""
    values = MappingProxyType({**default_values(), **values})
    sampling, stream = parse_controls(values)
    feed = parse_feed(values)
    text = values["text"]
    if not isinstance(text, str):
        raise SettingsError(f"text must be a string, got {type(text).__name__}", "text")
    request = SessionRequest(text, sampling, stream, request_start=request_start,
                             speaker=speaker(reference_of(values)), max_text_chars=traffic.max_text_chars,
                             max_ahead_s=traffic.max_ahead_s, words_per_s=feed.rate)
    return PageControls(values, request)
