"""The sweep grid: which points a sweep has, what each is called, and which one is the default.

- `SweepConfig`: a base RunConfig and the sampling settings swept, each with its values: the
  declared default axes (settings.py's `sweep=` values, declare.sweep_defaults) unless given
  otherwise, and any other sampling setting as an extra axis; `points()` in grid order, the
  settings that only cut a generation short (stop_rule.CUT_ONLY) varying fastest.
- `parse_axes`: `--axis NAME=V1,V2` into extra axes; `axis_words`: a default axis's plural, as
  its flag (--temperatures) and the Eval tab's box name it.
- `point_name` / `point_dir`: a point's folder, each default axis as its tag and value
  (T0.3_S0.5), then each extra axis as _{name}{value}.
- `default_point`: the grid point whose every axis equals SamplingSettings' default (each extra
  axis's too, e.g. a CFG scale of 1.0); where the grid lacks
  that value, the grid value nearest to it on that axis (ties: the lower one).
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from eval.runs.run import RunConfig, RunError
from gepard_demo.declare import declared, may_be_unset, sweep_defaults, tags, values_of
from gepard_demo.model.guards.stop_rule import CUT_ONLY
from gepard_demo.settings import SamplingSettings

# Every sweep's axes unless told otherwise, with their short folder-name tags.
DEFAULT_AXES = sweep_defaults(SamplingSettings)
FIXED_AXES = {name: tags(SamplingSettings)[name] for name in DEFAULT_AXES}


def axis_words(name: str) -> str:
    """A default axis's values in words: "temperatures", "stop thresholds" (a name already plural
    takes " values", so its flag stays apart from the setting's own)."""
    words = name.replace("_", " ")
    return words + (" values" if words.endswith("s") else "s")


@dataclass(frozen=True)
class SweepConfig:
    base: RunConfig = field(default_factory=RunConfig)
    # The settings swept, ((name, (value, ...)), ...): any sampling setting but the seed. A default
    # axis left out takes its declared values.
    swept: tuple[tuple[str, tuple], ...] = ()
    one_pass: bool = True

    def axes(self) -> list[tuple[str, tuple]]:
        """Every axis in grid order: the default axes that change the generation, the others given,
        then the default axes that only cut it short (they vary fastest)."""
        given = {n: tuple(v) for n, v in self.swept}
        default = [(n, given.get(n, v)) for n, v in DEFAULT_AXES.items()]
        extra = [(n, v) for n, v in given.items() if n not in DEFAULT_AXES]
        return [a for a in default if a[0] not in CUT_ONLY] + extra + [a for a in default if a[0] in CUT_ONLY]

    def __post_init__(self) -> None:
        self.validate()  # checked when made: no unchecked instance exists

    def validate(self) -> "SweepConfig":
        names = {f.name for f in dataclasses.fields(SamplingSettings)} - {"seed"}
        seen = set()
        left_out = [(n, v) for n, v in DEFAULT_AXES.items() if n not in dict(self.swept)]
        for name, values in [*self.swept, *left_out]:
            if name == "text_repetition":
                raise RunError("text_repetition is not a sweep axis: `python -m eval run --text-repetition off` makes the "
                               "no-repetition baseline (it checks that the set has texts it changes)")
            if name not in names:
                raise RunError(f"sweep axis {name!r} is not a sampling setting (one of {sorted(names)})")
            if name in seen:
                raise RunError(f"sweep axis {name!r} given twice")
            seen.add(name)
            if not values:
                raise RunError(f"sweep axis {name!r} has no values: a sweep needs at least one of each")
            if len(set(values)) != len(values):
                raise RunError(f"sweep axis {name!r} repeats a value: {list(values)}")
        for p in self.points():  # the whole grid, before minutes are spent on the first point
            self.base.sampling.replace(**p)  # made, so checked: a bad point is refused here
        return self

    def points(self) -> list[dict]:
        axes = self.axes()
        return [dict(zip([n for n, _ in axes], combo)) for combo in itertools.product(*[v for _, v in axes])]

    def to_json(self) -> dict:
        return {"base": self.base.to_json(), "axes": {n: list(v) for n, v in self.axes()}, "one_pass": self.one_pass}


def parse_axes(specs: list[str]) -> tuple:
    """--axis NAME=V1,V2,... for any other SamplingSettings field (e.g. cfg-scale=1,2,3)."""
    fields = {f.name for f in dataclasses.fields(SamplingSettings)} - {"seed"}
    out = []
    for spec in specs:
        name, _, values = spec.partition("=")
        name = name.strip().replace("-", "_")
        if name not in fields or not values.strip():
            raise RunError(f"--axis {spec!r}: use NAME=V1,V2 with NAME a sampling setting ({', '.join(sorted(fields))})")
        default = values_of(SamplingSettings())[name]
        try:
            out.append((name, tuple(_parse_value(v.strip(), default, name) for v in values.split(","))))
        except ValueError as e:
            raise RunError(f"--axis {spec!r}: {e}") from None
    return tuple(out)


def _parse_value(text: str, default, name: str = ""):
    read = declared(SamplingSettings).get(name)
    if read is not None:  # as its flag reads it (the force stop: frames, "auto" or "off")
        return read.read(text)  # a SettingsError is a ValueError
    if text.lower() == "none":
        return None
    if isinstance(default, bool):
        if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise ValueError(f"{text!r} is not true/false")
        return text.lower() in ("true", "1", "yes")
    if isinstance(default, int) or default is None:
        try:
            return int(text)
        except ValueError:
            if isinstance(default, int):
                raise
    return float(text)


def _fmt(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _unset(name: str) -> str:
    """How an unset value of this setting is spelled: as its flag writes it (the force stop's
    "off"), else "None"."""
    text = declared(SamplingSettings).get(name)
    word = text.write(None) if text is not None and may_be_unset(SamplingSettings, name) else None
    return word or "None"


def point_name(point: dict) -> str:
    head = "_".join(f"{tag}{_fmt(point[name])}" for name, tag in FIXED_AXES.items())
    return head + "".join(f"_{k}{_unset(k) if v is None else _fmt(v)}" for k, v in point.items() if k not in FIXED_AXES)


def canonical(value, name: str = ""):
    """One spelling of an axis value, whether it comes from sweep.json (None, 200, "auto") or back
    from sweep.csv (NaN, "200", 200.0): numbers as floats, unset as its flag writes it ("off") or
    "None", text as itself; so points, the default and the charts' cells match by value."""
    if value is None or (isinstance(value, float) and value != value):
        return _unset(name)
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            unset = _unset(name)
            return unset if unset != "None" and value.lower() in (unset.lower(), "none", "") else value
    return float(value)


def point_dir(out: Path, **point) -> Path:
    return Path(out) / point_name(point)


def default_point(axes: dict[str, list]) -> dict:
    d = values_of(SamplingSettings())
    out = {}
    for name, values in axes.items():
        want = d.get(name)
        same = [v for v in values if canonical(v, name) == canonical(want, name)]
        if same:
            out[name] = same[0]
            continue
        if want is None:  # no default to be near: the first grid value
            out[name] = values[0]
            continue
        try:
            out[name] = min(values, key=lambda v: (abs(float(v) - float(want)), float(v)))
        except (TypeError, ValueError):  # not numbers (None, text): the first grid value
            out[name] = values[0]
    return out
