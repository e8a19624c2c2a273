"""Settings check themselves when made (`__post_init__`): no unchecked instance exists, so no
caller validates one again, and `validate(` is called nowhere outside the settings' own modules."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from eval.load.runner import LoadConfig
from eval.runs.run import RunConfig
from eval.scoring.asr import ASRSettings
from eval.scoring.derail import DerailRule
from eval.sweeps.grid import SweepConfig
from gepard_demo.alignment.settings import AlignmentSettings
from gepard_demo.host_settings import BatchingSettings, TrafficSettings
from gepard_demo.settings import FeedSettings, SamplingSettings, SettingsError, StreamSettings
from gepard_demo.speed.settings import SpeedSettings

ROOT = Path(__file__).resolve().parents[2]

# One value each class refuses, and the field its error names (where it names one).
BAD = [
    (SamplingSettings, {"temperature": 0.0}, "temperature"),
    (SamplingSettings, {"max_frames": 10**6}, "max_frames"),
    (StreamSettings, {"chunk_frames": 0}, "chunk_frames"),
    (FeedSettings, {"words_per_s": 0.0}, "words_per_s"),
    (BatchingSettings, {"max_batch": 0}, "max_batch"),
    (TrafficSettings, {"max_text_chars": 0}, "max_text_chars"),
]


@pytest.mark.parametrize("cls,change,field", BAD, ids=lambda v: getattr(v, "__name__", None) or str(v))
def test_a_bad_value_is_refused_when_the_settings_are_made_naming_its_field(cls, change, field):
    with pytest.raises(SettingsError) as err:
        cls(**change)
    assert err.value.field == field
    with pytest.raises(SettingsError):  # and when a good one is changed into it
        dataclasses.replace(cls(), **change)


@pytest.mark.parametrize("make", [
    lambda: SweepConfig(swept=(("stop_threshold", (1.5,)),)),
    lambda: DerailRule(fraction=0),
    lambda: SpeedSettings(precision="int4"),
    lambda: ASRSettings(backend="nonsense"),
    lambda: AlignmentSettings(weights=""),
    lambda: LoadConfig(urls=(), texts=("Hello.",)),
    lambda: RunConfig(seeds=0),
], ids=["sweep", "derail", "speed", "asr", "alignment", "load", "run"])
def test_every_other_settings_class_checks_itself_too(make):
    with pytest.raises(Exception) as err:
        make()
    assert not isinstance(err.value, (TypeError, AttributeError)), err.value  # a check's refusal, not a typo


def test_validate_is_called_only_inside_the_settings_own_modules():
    """Made means checked: a call outside would re-check what cannot be wrong, or hide a path
    where an unchecked instance is made."""
    calls = []
    for path in [*ROOT.glob("gepard_demo/**/*.py"), *ROOT.glob("eval/**/*.py"), ROOT / "app.py"]:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\.validate\(\)", line) and "self.validate()" not in line:
                calls.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not calls, "\n".join(calls)


def _ranged(cls):
    return [(f.name, f.metadata["range"]) for f in dataclasses.fields(cls) if "range" in f.metadata]


@pytest.mark.parametrize("cls", [SamplingSettings, StreamSettings, FeedSettings], ids=lambda c: c.__name__)
def test_each_setting_has_one_range_that_the_dataclass_and_the_page_both_hold(cls):
    """The range is declared once (setting(range=...)): the dataclass refuses past it, and the
    page's slider spans exactly it (one step inside an open end), so no surface has its own."""
    from gepard_demo.declare import page_controls

    controls = page_controls(cls)
    for name, r in _ranged(cls):
        step = controls[name].step if name in controls else 1
        for end, is_open, outward in ((r.lo, r.lo_open, -1), (r.hi, r.hi_open, +1)):
            inside = end - outward * step if is_open else end
            cls(**{name: type(cls().__getattribute__(name) or 0)(inside)})  # a closed end is a value
            beyond = end if is_open else end + outward * step
            with pytest.raises(SettingsError) as err:
                cls(**{name: type(cls().__getattribute__(name) or 0)(beyond)})
            assert err.value.field == name and str(r) in str(err.value)
        if name in controls and controls[name].widget == "slider":
            c = controls[name]
            assert c.range is r
            lo = r.lo + c.step if r.lo_open else r.lo
            assert (c.lo, c.hi) == (lo if c.unset is None else min(lo, c.unset), r.hi - c.step if r.hi_open else r.hi)


def test_a_control_cannot_declare_a_range_of_its_own():
    from gepard_demo.declare import Control, Range, setting

    with pytest.raises(ValueError, match="setting's"):
        setting(1, kind=int, read=int, range=Range(0, 2), page=Control("stream", "X", "x", range=Range(0, 9)))
    with pytest.raises(ValueError, match="needs the setting's range"):
        setting(1, kind=int, read=int, page=Control("stream", "X", "x"))
