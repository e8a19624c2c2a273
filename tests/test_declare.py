"""How a setting is declared (gepard_demo/declare.py): setting()'s arguments after the default are
keywords, each setting declares its kind and every surface asks the kind, never the annotation's
text; the checkpoint's operating point takes its values from the declarations."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from gepard_demo.declare import kind_of, may_be_unset, setting, switch, takes_a_word, whole_number
from gepard_demo.model.config import OPERATING_POINT, SIDECAR_SAMPLING_KEYS, GepardConfig
from gepard_demo.settings import FeedSettings, SamplingSettings, StreamSettings

CLASSES = (SamplingSettings, StreamSettings, FeedSettings)


def test_arguments_after_the_default_are_keywords():
    with pytest.raises(TypeError):
        setting(0, int, int)  # the old positional (default, read, write, ...)
    with pytest.raises(TypeError):
        setting(0, read=int)  # no kind
    assert setting(0, kind=int, read=int).default == 0


def test_a_default_outside_its_kind_or_a_kind_that_is_no_type_is_refused():
    with pytest.raises(ValueError, match="kind"):
        setting(None, kind=int)  # unset needs "int | None"
    with pytest.raises(ValueError, match="kind"):
        setting(0.5, kind=int)
    with pytest.raises(ValueError, match="kind"):
        setting(0, kind="int")  # an annotation's text is not a kind


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_setting_declares_its_kind_as_its_field_is_annotated(cls):
    # The kind is declared on the setting; the annotation says the same for type checkers. Held
    # together here, so neither drifts (e.g. a setting that becomes `int | None` in one place only).
    hints = typing.get_type_hints(cls)
    declared = [f for f in dataclasses.fields(cls) if "kind" in f.metadata]
    assert declared, cls
    for f in declared:
        assert kind_of(cls, f.name) == hints[f.name], f.name


def test_what_each_kind_answers():
    s = SamplingSettings
    assert switch(s, "greedy") and not whole_number(s, "greedy")
    assert whole_number(s, "top_k") and not may_be_unset(s, "top_k") and not takes_a_word(s, "top_k")
    assert not whole_number(s, "temperature") and not switch(s, "temperature")
    assert whole_number(s, "seed") and may_be_unset(s, "seed") and not takes_a_word(s, "seed")
    assert whole_number(s, "cfg_frames") and may_be_unset(s, "cfg_frames")
    assert whole_number(s, "force_stop_frames") and may_be_unset(s, "force_stop_frames")
    assert takes_a_word(s, "force_stop_frames")
    assert takes_a_word(StreamSettings, "decode_mode") and not whole_number(StreamSettings, "decode_mode")
    with pytest.raises(KeyError, match="text_repetition"):  # a plain field, no setting(...)
        kind_of(s, "text_repetition")


def test_the_operating_point_names_the_sidecar_keys_with_the_declared_defaults():
    default = SamplingSettings()
    assert tuple(OPERATING_POINT) == SIDECAR_SAMPLING_KEYS
    assert OPERATING_POINT == {k: getattr(default, k) for k in SIDECAR_SAMPLING_KEYS}
    # what the published gepard_config.json ships (docs/FACTS.md §1; vLLM-Omni's deploy budget)
    assert OPERATING_POINT == {"stop_threshold": 0.5, "temperature": 0.3, "max_frames": 1000}
    # a sidecar's own values, each read with its setting's type; the engine's default sampling is built from them
    own = dict(GepardConfig.__dataclass_fields__["operating_point"].default_factory())
    assert own == OPERATING_POINT and own is not OPERATING_POINT
    assert SamplingSettings(**own) == default
