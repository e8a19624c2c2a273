"""What a session will say, fixed before it speaks: the text checked, its segments, the seed.

Every session that makes a text's audio here or behind ZeroGPU's calls plans it the same way, in
the process that takes the request, so a bad request is refused before anything is scheduled and
the seed a listener can replay is known at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from gepard_demo.model.guards.guardrails import force_stop_for
from gepard_demo.settings import SamplingSettings

from .text_feed import Writing, write
from .breaks import split_breaks
from .text_input import MAX_TEXT_CHARS, SEGMENT_CHARS, TextError, clean_text, split_text


@dataclass(frozen=True)
class Plan:
    """text: as cleaned; segments: a long text's parts (text written as it comes: its sentences,
    `writing` paces them); sampling: the request's, its seed drawn if it had none."""

    text: str
    segments: list[str]
    sampling: SamplingSettings
    writing: Writing | None = None
    pauses: tuple[float, ...] = ()  # per segment, the silence after it in seconds (a <break>: breaks.py)


def plan(text: str, sampling: SamplingSettings, *, max_text_chars: int = MAX_TEXT_CHARS,
         segment_chars: int = SEGMENT_CHARS, words_per_s: float | None = None) -> Plan:
    """TextError or SettingsError (naming the field) for a request that cannot be made."""
    parts = split_breaks(clean_text(text, max_text_chars))
    if words_per_s is not None and len(parts) > 1:
        raise TextError("input: a <break> needs the whole text at once; it is not read in text written as it comes")
    text = " ".join(p.text for p in parts)  # the words, the breaks' tags left out (Plan.pauses keeps them)
    writing = None if words_per_s is None else Writing(write(text, words_per_s))
    segments, pauses = [], []
    for part in parts:
        cut = list(writing.written.units) if writing else split_text(part.text, segment_chars)
        segments += cut
        pauses += [0.0] * (len(cut) - 1) + [part.pause_s]
    # The seed is fixed here, not in the engine, so the stats can say which seed was used and a
    # listener can replay the exact utterance.
    sampling = sampling.with_concrete_seed()
    for segment in segments:  # "auto" must scale to every segment: refused now, naming the field
        force_stop_for(sampling, segment)
    return Plan(text, segments, sampling, writing, tuple(pauses))
