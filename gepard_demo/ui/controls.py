"""The page's controls as values: their names in the order Generate passes them, their ranges,
and `parse_controls`, which turns them into validated settings naming any bad control. The page,
its API and the takes' "use these settings" all go through here."""

from __future__ import annotations

import math
import re
from typing import Any

from gepard_demo.settings import (
    DECODE_MODES,
    GUARDRAIL_FIELDS,
    MAX_FRAMES_LIMIT,
    MAX_REPETITION_PENALTY,
    SamplingSettings,
    SettingsError,
    StreamSettings,
    parse_force_stop,
)

from .guardrails import control_values
from .voice import VOICE_CONTROL_NAMES, cfg_changes

# The control values, in the order the page passes them after the job id.
CONTROL_NAMES = (
    "text", "temperature", "top_k", "greedy", "stop_threshold", "seed", "random_seed",
    "max_frames", "first_chunk_frames", "chunk_frames", "decode_mode", "lookback_frames",
    "fade_ms", "silence_ms",
    *VOICE_CONTROL_NAMES,  # the "Voice and guidance" group (voice.py)
    *GUARDRAIL_FIELDS,  # the derailment guardrails (guardrails.py)
)


def _number(name: str, value: Any) -> float:
    if value is None or isinstance(value, bool) or isinstance(value, str) and not value.strip():
        raise SettingsError(f"{name} is empty", name)
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise SettingsError(f"{name} must be a number, got {value!r}", name) from None
    if not math.isfinite(x):
        raise SettingsError(f"{name} must be a finite number, got {value!r}", name)
    return x


def _integer(name: str, value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value  # exact, even above 2**53 (a float would round a 63-bit seed)
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        return int(value)  # the seed box's text: exact too
    x = _number(name, value)
    if not x.is_integer():
        raise SettingsError(f"{name} must be a whole number, got {value!r}", name)
    return int(x)


# The page's range for every numeric control: the sliders span exactly these, and a value
# outside (typed, or sent through the API) is refused with the control's name.
CONTROL_RANGES = {
    "temperature": (0.05, 5.0), "top_k": (0, 8), "stop_threshold": (0.01, 0.99), "seed": (0, 2**63 - 1),
    "max_frames": (1, MAX_FRAMES_LIMIT), "first_chunk_frames": (1, 100), "chunk_frames": (1, 200),
    "lookback_frames": (0, 64), "fade_ms": (0, 500), "silence_ms": (0, 2000),
    "repetition_penalty": (1.0, MAX_REPETITION_PENALTY), "repetition_window": (0, MAX_FRAMES_LIMIT),
}


def _show(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 2**64 else f"{x:g}"


def _in_range(name: str, x: float) -> float:
    lo, hi = CONTROL_RANGES[name]
    if not lo <= x <= hi:
        raise SettingsError(f"{name} must be between {_show(lo)} and {_show(hi)}, got {_show(x)}", name)
    return x


def parse_controls(values: dict[str, Any]) -> tuple[SamplingSettings, StreamSettings]:
    """Page values -> validated settings; raises SettingsError naming the bad control."""
    values = {**control_values(SamplingSettings()), **values}  # an API call may leave the guardrails out
    for name in CONTROL_RANGES:
        if name == "seed":
            if not values["random_seed"]:
                _in_range(name, _integer(name, values[name]))  # as an integer: 2**63 - 1 is no float
            continue
        _in_range(name, _number(name, values[name]))
    if str(values["decode_mode"]) not in DECODE_MODES:
        raise SettingsError(f"decode_mode must be one of {', '.join(DECODE_MODES)}, got {values['decode_mode']!r}",
                            "decode_mode")
    seed = None if values["random_seed"] else _integer("seed", values["seed"])
    sampling = SamplingSettings(
        temperature=_number("temperature", values["temperature"]),
        greedy=bool(values["greedy"]),
        top_k=_integer("top_k", values["top_k"]),
        stop_threshold=_number("stop_threshold", values["stop_threshold"]),
        max_frames=_integer("max_frames", values["max_frames"]),
        seed=seed,
        **cfg_changes(values.get("cfg_scale", 1.0), values.get("cfg_frames", 0)),
        repetition_penalty=_number("repetition_penalty", values["repetition_penalty"]),
        repetition_window=_integer("repetition_window", values["repetition_window"]),
        force_stop_frames=parse_force_stop(values["force_stop_frames"]),
    ).validate()
    stream = StreamSettings(
        first_chunk_frames=_integer("first_chunk_frames", values["first_chunk_frames"]),
        chunk_frames=_integer("chunk_frames", values["chunk_frames"]),
        decode_mode=str(values["decode_mode"]),
        lookback_frames=_integer("lookback_frames", values["lookback_frames"]),
        fade_ms=_number("fade_ms", values["fade_ms"]),
        silence_ms=_number("silence_ms", values["silence_ms"]),
    ).validate()
    return sampling, stream
