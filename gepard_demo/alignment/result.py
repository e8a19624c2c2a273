"""What the aligner hands back, and the shapes it travels in (vLLM-Omni's header, JSON for the page).

A word is in one of three states:
- "aligned": it has a span and its confidence is at least the settings' low_confidence;
- "low": it has a span, but the aligner does not vouch for it (a low confidence, or a span longer
  than a word of its length takes at this speaker's pace: something else, a repeat, is in it);
- "unaligned": no span at all: the DTW path gave it no frame (the audio has no place for it, as
  for every word after a truncation) or there is no speech under it.
DESIGN ("When each word is spoken") defines the confidence.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

STATES = ("aligned", "low", "unaligned")
HEADER_LIMIT = 4096  # vLLM-Omni's: a longer X-Word-Timestamps is omitted (proxies 502 on big headers)


@dataclass(frozen=True)
class AlignedWord:
    word: str  # vLLM-Omni's unit (words.py)
    written: str  # the piece as written, punctuation kept
    start: float | None  # seconds from the audio's start; None when unaligned
    end: float | None
    confidence: float  # 0..1 (0 when unaligned)
    probability: float  # Whisper's, of the word given the audio and the words before it
    state: str  # one of STATES
    why: str = ""  # for "low" and "unaligned": in words

    @property
    def timed(self) -> bool:
        return self.start is not None

    @property
    def span(self) -> tuple[float, float] | None:
        """(start, end) in seconds; None when unaligned."""
        return None if self.start is None or self.end is None else (self.start, self.end)


@dataclass(frozen=True)
class Alignment:
    """words: every timeable word of the text, in order. note: why there are none or what to know
    (no speech, no alignable words, an error), else "". wall_s: seconds the alignment took."""

    words: tuple[AlignedWord, ...] = ()
    audio_s: float = 0.0
    wall_s: float = 0.0
    weights: str = ""
    note: str = ""

    @property
    def counts(self) -> dict[str, int]:
        return {s: sum(w.state == s for w in self.words) for s in STATES}

    def shifted(self, seconds: float) -> "Alignment":
        """The same words with every span moved by `seconds` (a segment placed in its utterance)."""
        def move(w: AlignedWord) -> AlignedWord:
            if (span := w.span) is None:
                return w
            return dataclasses.replace(w, start=span[0] + seconds, end=span[1] + seconds)

        return dataclasses.replace(self, words=tuple(move(w) for w in self.words))

    def as_dict(self) -> dict:
        return {**dataclasses.asdict(self), "words": [dataclasses.asdict(w) for w in self.words]}

    @classmethod
    def from_dict(cls, d: dict) -> "Alignment":
        return cls(**{**d, "words": tuple(AlignedWord(**w) for w in d.get("words") or ())})

    def summary(self) -> str:
        """One line: how many words are timed, at what cost (the page shows it)."""
        if self.note and not self.words:
            return self.note
        c = self.counts
        parts = [f"{c['aligned']} of {len(self.words)} words aligned"]
        if c["low"]:
            parts.append(f"{c['low']} low confidence")
        if c["unaligned"]:
            parts.append(f"{c['unaligned']} unaligned")
        cost = f" in {self.wall_s:.2f} s for {self.audio_s:.1f} s of audio ({self.weights})" if self.weights else ""
        return ", ".join(parts) + cost + (f"; {self.note}" if self.note else "")


def merge(parts: list[Alignment]) -> Alignment:
    """Segments' alignments (already shifted into the utterance) as one."""
    if not parts:
        return Alignment()
    notes = "; ".join(dict.fromkeys(p.note for p in parts if p.note))
    return Alignment(tuple(w for p in parts for w in p.words), sum(p.audio_s for p in parts),
                     sum(p.wall_s for p in parts), parts[0].weights, notes)


def wire_timestamps(alignment: Alignment) -> list[dict]:
    """vLLM-Omni's list: {word, start_ms, end_ms} for every word, monotonic, non-overlapping, start
    <= end. An unaligned word has no span, so it gets a zero-length one where the previous word
    ended: the count still matches the text's words (vLLM-Omni's clients pair them by position)."""
    out, last = [], 0
    for w in alignment.words:
        if (span := w.span) is not None:
            start = max(last, int(round(span[0] * 1000)))
            end = max(start, int(round(span[1] * 1000)))
        else:
            start = end = last
        out.append({"word": w.word, "start_ms": start, "end_ms": end})
        last = end
    return out


def wire_confidence(alignment: Alignment) -> list[float | None]:
    """Our companion list, word for word: the confidence (2 decimals), null when unaligned."""
    return [round(w.confidence, 2) if w.timed else None for w in alignment.words]


def timestamp_headers(alignment: Alignment) -> dict[str, str]:
    """A whole response's headers, as vLLM-Omni writes them: `X-Word-Timestamps` is the list as
    json.dumps writes it (default separators, ASCII-escaped, so the header stays latin-1), or, past
    4 KB, `X-Word-Timestamps-Omitted: oversize; bytes=N; limit=4096`. Ours beside it:
    `X-Gepard-Word-Confidence` (omitted with it) and `X-Gepard-Word-Timestamps-Note`."""
    headers: dict[str, str] = {}
    ts = json.dumps(wire_timestamps(alignment))
    if len(ts) <= HEADER_LIMIT:
        headers["X-Word-Timestamps"] = ts
        headers["X-Gepard-Word-Confidence"] = json.dumps(wire_confidence(alignment))
    else:
        headers["X-Word-Timestamps-Omitted"] = f"oversize; bytes={len(ts)}; limit={HEADER_LIMIT}"
    if alignment.note:
        headers["X-Gepard-Word-Timestamps-Note"] = alignment.note.encode("ascii", "replace").decode("ascii")
    return headers


def from_wire(timestamps: list[dict] | None, confidence: list | None, note: str | None,
              low_confidence: float) -> Alignment:
    """A server's words back into an Alignment (the page in front of our server): a null
    confidence is an unaligned word, one under low_confidence a low one. timestamps None: the
    server's alignment failed."""
    if timestamps is None:
        return Alignment(note=note or "the server's alignment failed")
    confidence = confidence or [1.0] * len(timestamps)
    words = []
    for t, c in zip(timestamps, confidence):
        if c is None:
            words.append(AlignedWord(t["word"], t["word"], None, None, 0.0, 0.0, "unaligned", "the server found no place for it"))
        else:
            state = "low" if c < low_confidence else "aligned"
            words.append(AlignedWord(t["word"], t["word"], t["start_ms"] / 1000, t["end_ms"] / 1000, float(c), 0.0, state,
                                     "the server's confidence is low" if state == "low" else ""))
    return Alignment(tuple(words), note=note or "", weights="server")
