"""Text written word by word, as a language model writes it (the page's "as written" mode): the
units the speech WebSocket's splitter (text_splitter.py, vLLM-Omni's rules) closes as the words
arrive at `words_per_s`, with the moment each unit's last word is written and the moment the
splitter lets it go.

The whole text goes through the splitter piece by piece as a client of /v1/audio/speech/stream
sends it (each word with the whitespace before it, then the flush of `input.done`), so the units
are the WebSocket's: an ASCII full stop closes its unit only when the next word's space comes, so
a unit is let go one word after its last one, as on the server. What the model makes of a unit
does not depend on when it comes (each unit has its segment's seed: segments.segment_seed), so
the feed is computed once, up front, and the session (session.py) waits for each unit's moment
instead of a thread sending words.
"""

from __future__ import annotations

import bisect
import itertools
import re
import threading
import time
from dataclasses import dataclass

from .text_splitter import TextSplitter

SPLIT = "sentence"  # the page's units: the WebSocket's sentence granularity


@dataclass(frozen=True)
class WrittenText:
    """A text as it is written: its units in order, and for each the seconds after the first
    word's moment at which its last word was written (`written_s`) and at which the splitter let
    it go (`closed_s`, when a server would start it)."""

    words_per_s: float
    units: tuple[str, ...]
    written_s: tuple[float, ...]
    closed_s: tuple[float, ...]


def pieces(text: str) -> list[str]:
    """The text as a client sends it word by word: each word with the whitespace before it."""
    return re.findall(r"\s*\S+", text)


def write(text: str, words_per_s: float, split: str = SPLIT) -> WrittenText:
    """The text's units and their moments when its words come at words_per_s (word k, from 0, is
    written at k / words_per_s)."""
    if not words_per_s > 0:
        raise ValueError(f"words_per_s must be above 0, got {words_per_s}")
    sent = pieces(text)
    ends = list(itertools.accumulate(map(len, sent)))  # where each piece ends in the text
    splitter, units, closed = TextSplitter(split), [], []
    for k, piece in enumerate(sent):
        for unit in splitter.feed(piece):
            units.append(unit)
            closed.append(k / words_per_s)
    for unit in splitter.flush():  # input.done, right after the last word
        units.append(unit)
        closed.append(max(len(sent) - 1, 0) / words_per_s)
    written, at = [], 0
    for unit, shut in zip(units, closed):
        start = text.find(unit, at)
        if start < 0:  # not found as written (never with the splitter's stripped units): its closing moment
            written.append(shut)
            continue
        at = start + len(unit)
        written.append(min(shut, bisect.bisect_left(ends, at) / words_per_s))
    return WrittenText(words_per_s, tuple(units), tuple(written), tuple(closed))


class Writing:
    """A session's clock for its written text: when each unit may start (its `closed_s` after the
    session's start) and, as its audio goes out, each unit's wait from its last word to its first
    audio. The session tells it where each unit's frames begin (`opened`) and how far the audio
    sent reaches (`sent`)."""

    def __init__(self, written: WrittenText):
        self.written = written
        self.t0: float | None = None
        self._first_frame: dict[int, int] = {}  # unit -> the utterance's frame it begins at
        self._heard = 0  # units whose first audio went out (their waits are the session's stats)

    def start(self, t0: float) -> None:
        self.t0 = t0

    def ready(self, index: int) -> bool:
        """Whether unit `index` has been let go by the splitter."""
        return self.t0 is not None and time.perf_counter() >= self.t0 + self.written.closed_s[index]

    def wait(self, index: int, cancel: threading.Event) -> bool:
        """Block until unit `index` is let go; False when cancelled first."""
        while not self.ready(index):
            left = self.t0 + self.written.closed_s[index] - time.perf_counter() if self.t0 is not None else 0.05
            if cancel.wait(max(0.001, min(left, 0.5))):
                return False
        return not cancel.is_set()

    def opened(self, index: int, frame: int) -> None:
        self._first_frame[index] = frame

    def sent(self, frames_end: int) -> list[float]:
        """The audio sent now reaches frame `frames_end`: the waits of the units it starts."""
        now, out = time.perf_counter(), []
        while self.t0 is not None and self._first_frame.get(self._heard, frames_end) < frames_end:
            out.append(round(now - self.t0 - self.written.written_s[self._heard], 3))
            self._heard += 1
        return out
