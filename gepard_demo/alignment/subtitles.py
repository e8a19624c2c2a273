"""An alignment as subtitles: SubRip (.srt) and WebVTT (.vtt), the words as written.

Cues hold consecutive words, closed after a sentence's end (. ! ?), before a pause of PAUSE_S or
more, or at MAX_WORDS words. A cue runs from its first timed word's start to its last timed
word's end; an unaligned word stays in its cue's text (it was asked for) but gives it no time, and
a cue with no timed word at all (the words a truncation lost) is left out: the WebVTT file names
them in a NOTE, SubRip has no place for one.
"""

from __future__ import annotations

from .result import Alignment, AlignedWord

MAX_WORDS = 7
PAUSE_S = 0.8


def cues(alignment: Alignment) -> tuple[list[tuple[float, float, str]], list[str]]:
    """([(start, end, text)], the words left out because no cue could time them)."""
    groups: list[list[AlignedWord]] = [[]]
    last_end: float | None = None
    for w in alignment.words:
        cur, span = groups[-1], w.span
        if cur and span is not None and last_end is not None and span[0] - last_end >= PAUSE_S:
            groups.append([])
        groups[-1].append(w)
        if span is not None:
            last_end = span[1]
        if len(groups[-1]) >= MAX_WORDS or w.written.rstrip("\"')]”’").endswith((".", "!", "?")):
            groups.append([])
    out: list[tuple[float, float, str]] = []
    lost: list[str] = []
    for g in groups:
        spans = [s for s in (w.span for w in g) if s is not None]
        if spans:
            out.append((spans[0][0], max(spans[-1][1], spans[0][0] + 0.001), " ".join(w.written for w in g)))
        else:
            lost += [w.written for w in g]
    return out, lost


def _clock(seconds: float, sep: str) -> str:
    ms = int(round(max(0.0, seconds) * 1000))
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


def to_srt(alignment: Alignment) -> str:
    blocks = [f"{i}\n{_clock(a, ',')} --> {_clock(b, ',')}\n{text}\n" for i, (a, b, text) in enumerate(cues(alignment)[0], 1)]
    return "\n".join(blocks)


def to_vtt(alignment: Alignment) -> str:
    found, lost = cues(alignment)
    parts = ["WEBVTT\n"]
    if alignment.note and not alignment.words:
        parts.append(f"NOTE {alignment.note}\n")
    if lost:
        parts.append("NOTE not in the audio (unaligned): " + " ".join(lost).replace("-->", "->") + "\n")
    parts += [f"{_clock(a, '.')} --> {_clock(b, '.')}\n{text.replace('-->', '->')}\n" for a, b, text in found]
    return "\n".join(parts)
