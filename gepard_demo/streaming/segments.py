"""A long text's segments as frame sources: each its own request with its own seed, later ones made
ahead of their turn where the engine allows it (issue 34).

Text above SEGMENT_CHARS is split into segments (text_input.py), and each segment is a request
of its own: its own prompt, and its own seed, derived from the request's seed and the segment's
index (`segment_seed`; segment 0 keeps the request's seed, so a one-segment text is unchanged).
A segment's frames therefore do not depend on when it was made: one after another, ahead of its
turn beside the one playing, alone or beside other visitors' rows (up to what batching may change
in the last bits of the logits; docs/DESIGN.md, "What is exact, on every CPU").

On an engine that takes look-ahead (the BatchScheduler: the app, our server, `synth` on long text)
`SegmentSources` keeps up to `look_ahead` of the segments after the playing one generating at
once, as look-ahead requests in the running batch, and opens the next as each finishes (`refill`,
at every step the session reads): counting the ones in flight, not a window behind the playing
one, keeps the batch full while the codec works through what is made (a window trickled rows in
one at a time as decoding passed each segment, measured in benchmarks/long_text.py). Their frames
wait in their iterator (TicketFrames keeps them: 64 bytes a frame of codes, a few MB an hour)
until their turn; a segment's request is promoted to a listened stream when its turn comes. On any other engine the segments run one after
another. `close()` ends every one of them at once (Stop, a closed tab, a hang-up).
"""

from __future__ import annotations

import hashlib
import threading
import time
from typing import TYPE_CHECKING, Callable, TypedDict

from gepard_demo.model.frames import FrameSource, frame_source
from gepard_demo.model.request import FrameRequest
from gepard_demo.settings import SamplingSettings
from gepard_demo.units import FRAME_RATE_HZ

if TYPE_CHECKING:
    import torch

    from gepard_demo.model.generation import FrameStep
    from gepard_demo.model.seams import FrameEngine

    from .chunks import SynthesisStats


class Progress(TypedDict, total=False):
    """A long text's progress as the page reads it (`SegmentSources.progress`; a session adds
    `ends_s` and, written as it came, `written_s`)."""

    segments: int  # how many
    segment: int  # the one playing
    generated: list[bool]  # each wholly generated
    ahead_s: float  # audio generated in order beyond what was read
    rate: float | None  # audio s per s it comes at in order (None: not yet measured)
    text_rate: float | None  # the rows' pace together
    ends_s: list[float]  # where each segment read so far ends in the audio
    written_s: list[float]  # when each segment's last word was written, after the request's start


def segment_seed(seed: int, index: int) -> int:
    """Segment `index`'s seed: the request's own for the first, a 63-bit hash of (seed, index) after."""
    if index == 0:
        return seed
    digest = hashlib.blake2b(f"gepard-segment|{seed}|{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def segment_sampling(sampling: SamplingSettings, index: int) -> SamplingSettings:
    """The settings segment `index` is generated with (the request's, with its segment seed)."""
    if sampling.seed is None:  # else every unseeded text's later segments would share seeds
        raise ValueError("segment seeds come from the request's seed: make it concrete first (with_concrete_seed)")
    return sampling.replace(seed=segment_seed(sampling.seed, index))


class SegmentSources:
    """The frame iterators of one session's segments, opened in order, some ahead."""

    def __init__(self, engine: FrameEngine, segments: list[str], sampling: SamplingSettings,
                 speaker: torch.Tensor | None, look_ahead: int, group: object,
                 ready: Callable[[int], bool] | None = None):
        """ready(j): whether segment j's text is there yet (a text being written: text_feed.py);
        None: every segment's is."""
        self.engine, self.segments, self.sampling, self.speaker = engine, segments, sampling, speaker
        self.ready = ready or (lambda j: True)
        self.look_ahead = look_ahead if engine.takes_look_ahead else 0
        self.group = group
        self._ahead: dict[int, FrameSource] = {}  # segment -> its look-ahead iterator, opened before its turn
        self.current: FrameSource | None = None
        self.index: int | None = None
        self.read = 0  # frames read from the current segment
        self.started = time.perf_counter()
        self.made_before = 0  # frames of the segments already played
        self.cancelled = False
        # Nothing runs ahead until the playing segment's first chunk is out (`release`): seven
        # prefills and an eight-row step before it took the first audio from 2.1 s to 6.8 s.
        self.released = False
        # cancel() comes from any thread: it must see (and end) every request open() made.
        self._lock = threading.Lock()

    def open(self, index: int, resume: torch.Tensor | None = None) -> FrameSource | None:
        """The segment's frame iterator, now the one playing; the next `look_ahead` open behind it.
        None once cancelled."""
        with self._lock:
            if self.cancelled:
                return None
            return self._open(index, resume)

    def _open(self, index: int, resume: torch.Tensor | None) -> FrameSource:
        if self.current is not None:
            self.made_before += self.read
        src = self._ahead.pop(index, None)
        if src is None:
            # With a look-ahead, the playing segment is of this text's group too: its own look-ahead
            # must not wait for it.
            src = frame_source(self.engine.stream_frames(FrameRequest(
                self.segments[index], segment_sampling(self.sampling, index), speaker=self.speaker, resume=resume,
                group=self.group if self.look_ahead else None)))
        else:
            src.promote()
        self.current, self.index, self.read = src, index, 0
        self._refill()
        return src

    def refill(self, released: bool = False) -> None:
        """Open the next segments while fewer than `look_ahead` ahead are still generating (once
        `released`: the first chunk is out)."""
        with self._lock:
            self.released = self.released or released
            if not self.cancelled:
                self._refill()

    def _refill(self) -> None:  # holds self._lock
        if not self.look_ahead or self.index is None or not self.released:
            return
        generating = sum(1 for src in self._ahead.values() if not src.finished)
        j = max([self.index, *self._ahead]) + 1
        while generating < self.look_ahead and j < len(self.segments) and self.ready(j):
            self._ahead[j] = frame_source(self.engine.stream_frames(FrameRequest(
                self.segments[j], segment_sampling(self.sampling, j), speaker=self.speaker, look_ahead=True,
                group=self.group)))
            generating, j = generating + 1, j + 1

    def all(self) -> list[FrameSource]:
        return [s for s in (self.current, *list(self._ahead.values())) if s is not None]

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            sources = self.all()
        for src in sources:
            src.cancel()

    def close_current(self) -> None:
        src, self.current = self.current, None
        if src is not None:
            self.made_before += self.read
            self.read = 0
            src.close()

    def close(self) -> None:
        """End every segment's request: the playing one and those ahead."""
        self.close_current()
        with self._lock:
            ahead, self._ahead = self._ahead, {}
        for src in ahead.values():
            src.close()

    def progress(self) -> Progress:
        """Where the text stands (the page's line and the player's start buffer): which segments
        are wholly generated, the audio generated in order beyond what was read (`ahead_s`), and
        `rate`, the pace audio comes at in order past that: the earliest unfinished segment's own
        frames per second (audio s per s) over its last frames (the batch as it runs now). The audio plays in order, so the rows' pace together
        (`text_rate`) would promise audio that comes only once the segment before it is whole:
        measured in benchmarks/long_text.py, a player sized from it started at 3 s where 12 s
        were needed, and heard 3 gaps."""
        n = len(self.segments)
        index = self.index if self.index is not None else 0
        generated = [i < index for i in range(n)]
        made = self.made_before + self.read
        ahead_frames = 0
        current, ahead = self.current, dict(self._ahead)
        if current is None and self.index is not None:
            generated[index] = True  # closed once read to its end (close_current; a Stop also closes it)
        if current is not None:
            cur_made = current.made
            generated[index] = current.finished
            ahead_frames = max(0, cur_made - self.read)
            made += ahead_frames
            contiguous = generated[index]
            for j in range(index + 1, n):
                src = ahead.get(j)
                if src is None:
                    break
                generated[j] = bool(src.finished)
                made += src.made
                if contiguous:
                    ahead_frames += src.made
                contiguous = contiguous and generated[j]
        wall = time.perf_counter() - self.started
        order = [current] + [ahead.get(j) for j in range(index + 1, n)]
        first_open = next((src for src in order if src is None or not src.finished), None)
        text_rate = made / FRAME_RATE_HZ / wall if wall > 0 else None
        rate = first_open.pace() if first_open is not None and first_open.measures_pace else text_rate
        return {"segments": n, "segment": index, "generated": generated,
                "ahead_s": round(ahead_frames / FRAME_RATE_HZ, 3),
                "rate": None if rate is None else round(rate, 3),
                "text_rate": None if text_rate is None else round(text_rate, 3)}


class SegmentReader:
    """A session's hold on its segments' sources: each engine step and each close under one lock (a
    generator in use cannot close), so a close from another thread waits at most for the step in
    flight and frees the engine even when nobody resumes the iteration; nothing opens or steps
    once the session is cancelled."""

    def __init__(self, sources: SegmentSources, cancelled: threading.Event, stats: SynthesisStats):
        self.sources, self._cancelled, self.stats = sources, cancelled, stats
        self._lock = threading.RLock()

    def open(self, index: int, resume: torch.Tensor | None) -> FrameSource | None:
        with self._lock:
            return None if self._cancelled.is_set() else self.sources.open(index, resume)

    def read(self, frames: FrameSource) -> FrameStep | None:
        """The segment's next step, its wait counted in stats.gen_time_s; None once cancelled or
        when the source ends."""
        with self._lock:
            if self._cancelled.is_set():
                return None
            t = time.perf_counter()
            step = next(frames, None)
            self.stats.gen_time_s += time.perf_counter() - t
            self.sources.read += step is not None and step.codes is not None
        return step

    def end_segment(self) -> None:
        with self._lock:
            self.sources.close_current()

    def close(self) -> None:
        """End every segment's request (waits for the step in flight)."""
        with self._lock:
            self.sources.close()
