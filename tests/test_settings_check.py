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

ROOT = Path(__file__).resolve().parent.parent

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
