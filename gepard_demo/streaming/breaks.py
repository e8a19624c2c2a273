"""Pauses written into the text: SSML's `<break time="500ms"/>` or `time="1.5s"` (as ElevenLabs
takes it inside plain text) becomes exact silence of that length between the parts around it.

`split_breaks` cuts a text at its breaks into parts, each with the pause after it; the plan
(plan.py) makes each part its own segments, and the session (session.py) sends the silence
between them, round(seconds x sample rate) zero samples, so the stream, the stats and the word
timestamps shift by it. Each break is at most MAX_BREAK_S and their sum at most MAX_BREAKS_S; a
malformed or over-long break, or one with no words on one side, is a TextError (the server's 400
naming `input`); so is a text that ends inside a break's tag. Any other tag is read as text.

Text that comes in pieces (written as it comes: plan.py; the speech WebSocket: serving/
speech_stream.py) is cut into units with its tags in them; `edge_breaks` takes a unit's breaks at
its start and end off as the silence between it and its neighbours, its inner ones stay for
split_breaks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .text_input import TextError

MAX_BREAK_S = 5.0
MAX_BREAKS_S = 30.0

BEFORE_WORDS = "comes before any words; a break stands between two parts of the text"
ENDS_WITH_BREAK = "input: the text ends with a break; a break stands between two parts of the text"

# A tag, or one the text ends inside (a stream cut off mid-tag): refused, never read aloud.
_TAG = r"<\s*break\b[^>]*(?:>|$)"
_ANY_BREAK = re.compile(_TAG, re.IGNORECASE)
_LEAD = re.compile(rf"\s*({_TAG})\s*", re.IGNORECASE)
_TRAIL = re.compile(rf"\s*({_TAG})\s*$", re.IGNORECASE)
_BREAK = re.compile(r"<break\s+time\s*=\s*(['\"])(\d+(?:\.\d+)?|\.\d+)\s*(ms|s)\1\s*/?>")


@dataclass(frozen=True)
class Part:
    """text: the words between two breaks; pause_s: the silence after them (0: the text's end)."""

    text: str
    pause_s: float = 0.0


def _seconds(tag: str) -> float:
    m = _BREAK.fullmatch(tag)
    if m is None:
        raise TextError(f'input: {tag!r} is not a break this reads: write <break time="500ms"/> or '
                        f'<break time="1.5s"/>')
    value = float(m.group(2)) / (1000.0 if m.group(3) == "ms" else 1.0)
    if not 0 < value <= MAX_BREAK_S:
        raise TextError(f"input: {tag!r} is {value:g} s; a break is more than 0 and at most {MAX_BREAK_S:g} s")
    return value


def split_breaks(text: str) -> list[Part]:
    """The text's parts, each with the pause after it; one part (pause 0) for a text with no break.
    Consecutive breaks add up."""
    parts: list[Part] = []
    at, total = 0, 0.0
    for m in _ANY_BREAK.finditer(text):
        seconds = _seconds(m.group(0))
        total += seconds
        words = text[at:m.start()].strip()
        if words:
            parts.append(Part(words, seconds))
        elif parts:
            parts[-1] = Part(parts[-1].text, parts[-1].pause_s + seconds)
        else:
            raise TextError(f"input: {m.group(0)!r} {BEFORE_WORDS}")
        at = m.end()
    check_total(total)
    rest = text[at:].strip()
    if parts and not rest:
        raise TextError(ENDS_WITH_BREAK)
    return [*parts, Part(rest)] if rest or not parts else parts


def edge_breaks(unit: str) -> tuple[float, str, float]:
    """A unit of text that came in pieces (the speech WebSocket's, text_feed's), its breaks' tags in
    it: the silence before its words, the words (a break between them kept, for split_breaks),
    the silence after them. A unit of breaks alone: (their silence, "", 0.0). TextError naming
    `input` for a malformed or over-long break at an edge."""
    lead = trail = 0.0
    while m := _LEAD.match(unit):
        lead, unit = lead + _seconds(m.group(1)), unit[m.end():]
    while unit and (m := _TRAIL.search(unit)):
        trail, unit = trail + _seconds(m.group(1)), unit[:m.start()]
    return lead, unit.strip(), trail


def break_seconds(text: str) -> float:
    """All the silence a text's breaks ask for (each checked as split_breaks checks it)."""
    return sum(_seconds(m.group(0)) for m in _ANY_BREAK.finditer(text))


def check_total(total_s: float) -> None:
    """The breaks of one text (or one utterance of a stream) together: at most MAX_BREAKS_S."""
    if total_s > MAX_BREAKS_S:
        raise TextError(f"input: the breaks add up to {total_s:g} s; at most {MAX_BREAKS_S:g} s in one text")


def pause_samples(pause_s: float, sample_rate: int) -> int:
    """A pause's exact length in samples."""
    return int(round(pause_s * sample_rate))
