"""Gepard's audio units, the authors' expected length of a text, and how figures are written: each
defined here, once.

NanoCodec (22.05 kHz, 1024 samples a frame) fixes the first three; the checkpoint's config
repeats the rate (model/config.py checks it). The expected length is the authors' scorer's
(gepard-train conf/dpo/reward/default.yaml, `DPORewardConfig.expected_sec`): 0.7 s + 0.4 s a
word, words = the text split on whitespace, at least one. The force stop's "auto", the ZeroGPU
call's plan, eval's duration ratio, the reward and the charts all read it from here.

A figure written out (a trace, the probe, a report's timing) is rounded to 4 decimals, a tenth of
a millinat or of a millisecond, with NaN and infinities as null: JSON has no NaN. What is written
out is `Json`: a report, a stats row, a settings dict.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Union

SAMPLE_RATE = 22050
SAMPLES_PER_FRAME = 1024
# A frame is 46.4 ms of audio: 21.53 frames a second.
FRAME_RATE_HZ = SAMPLE_RATE / SAMPLES_PER_FRAME
FRAME_S = SAMPLES_PER_FRAME / SAMPLE_RATE

EXPECTED_BASE_S = 0.7
EXPECTED_PER_WORD_S = 0.4


def word_count(text: str) -> int:
    """The authors' words: the text split on whitespace."""
    return len(text.split())


def expected_speech_s(words: int) -> float:
    """The authors' expected duration of `words` words spoken: 0.7 s + 0.4 s a word, at least one word."""
    return EXPECTED_BASE_S + EXPECTED_PER_WORD_S * max(1, words)


DIGITS = 4

# A value as it is written out as JSON (and read back): a report, a take's stats, a settings dict.
Json = Union[None, bool, int, float, str, Sequence["Json"], Mapping[str, "Json"]]


def wire_float(x: float | None) -> float | None:
    """A figure as it is written out: 4 decimals; None for None, NaN and infinities."""
    return round(float(x), DIGITS) if x is not None and math.isfinite(x) else None


def wire_trace(values) -> list[float | None] | None:
    """A per-step trace as it is written out (wire_float each); None stays None."""
    return None if values is None else [wire_float(v) for v in values]
