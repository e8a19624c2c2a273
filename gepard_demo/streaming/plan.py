"""What a session will say, fixed before it speaks: the text checked, its segments, the seed.

Every session that makes a text's audio here or behind ZeroGPU's calls plans it the same way, in
the process that takes the request, so a bad request is refused before anything is scheduled and
the seed a listener can replay is known at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from gepard_demo.model.guards.guardrails import force_stop_for
from gepard_demo.settings import SamplingSettings

from .breaks import BEFORE_WORDS, ENDS_WITH_BREAK, check_total, edge_breaks, split_breaks
from .text_feed import Writing, WrittenText, write
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
    text = clean_text(text, max_text_chars)
    if words_per_s is not None:
        segments, pauses, writing = _as_written(text, words_per_s)
        words = " ".join(segments)
    else:
        segments, pauses, writing = [], [], None
        parts = split_breaks(text)
        words = " ".join(p.text for p in parts)  # the breaks' tags left out (Plan.pauses keeps them)
        for part in parts:
            cut = split_text(part.text, segment_chars)
            segments += cut
            pauses += [0.0] * (len(cut) - 1) + [part.pause_s]
    # The seed is fixed here, not in the engine, so the stats can say which seed was used and a
    # listener can replay the exact utterance.
    sampling = sampling.with_concrete_seed()
    for segment in segments:  # "auto" must scale to every segment: refused now, naming the field
        force_stop_for(sampling, segment)
    return Plan(words, segments, sampling, writing, tuple(pauses))


def _as_written(text: str, words_per_s: float) -> tuple[list[str], list[float], Writing]:
    """Text written as it comes, its breaks' tags written too (a tag may come in several pieces):
    the WebSocket's units (text_feed.write), each cut at its inner breaks into segments; a break at
    a unit's edge is the silence between it and its neighbour. Each segment starts when its unit is
    let go, and counts its wait from its unit's last word."""
    written = write(text, words_per_s)
    segments: list[str] = []
    pauses: list[float] = []
    written_s, closed_s = [], []
    for unit, wrote, closed in zip(written.units, written.written_s, written.closed_s):
        lead, words, trail = edge_breaks(unit)
        if lead and not pauses:
            raise TextError(f"input: the break at {unit[:40]!r} {BEFORE_WORDS}")
        pauses[-1:] = [p + lead for p in pauses[-1:]]
        for part in split_breaks(words) if words else []:
            segments.append(part.text)
            pauses.append(part.pause_s)
            written_s.append(wrote)
            closed_s.append(closed)
        pauses[-1:] = [p + trail for p in pauses[-1:]]
    if pauses and pauses[-1]:
        raise TextError(ENDS_WITH_BREAK)
    check_total(sum(pauses))
    return segments, pauses, Writing(WrittenText(words_per_s, tuple(segments), tuple(written_s), tuple(closed_s)))
