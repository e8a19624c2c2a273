"""How much ZeroGPU time each call asks for, and how a Generate is cut into calls.

A ZeroGPU call asks for a duration up front (`@spaces.GPU(duration=...)`). ZeroGPU refuses a call
whose ask exceeds what the visitor has left of a day's quota (about 2 min without login, 3.5 min
on a free account, 25-40 min on PRO; facts §12), then bills the time really used. So a call that
asks for the whole frame budget (1000 frames: 44 s for one short sentence) is refused long before
a visitor's quota is spent. Here each call asks for what its own part is expected to take:

- each segment of a text (text over 400 characters is split, streaming/text_input.py) is given,
  in each call that makes its frames, `margin` x its expected frames: the authors' expected
  duration of speech, 0.7 + 0.4 s a word (their scorer; the page's player uses it too), at 21.5
  frames a second, at least `min_call_frames`, never past its frame budget or its force stop;
- one call makes the segment that plays and the next ones together, as rows of one batch
  (zerogpu/batched.py; `plan`): as many segments as fit under `max_call_s`, at most `max_rows`
  rows. Their steps run in parallel, so the call's time is about the longest row's frames times
  a step at that many rows (`step_at`: `rows_factor`, the batch model eval's calls use too), plus
  the codec for every frame the call may decode, plus the start. A one-segment call asks what a
  segment's call always asked: start + frames x per-frame cost (+ the guidance row's share);
- a segment that outlasts its call (the stop head has not fired) goes on in the next call, which
  carries the frames and the codec's state across (SessionCarry, with the later segments' frames
  made ahead): the audio has no seam, and each call gives it the same block again;
- start is the cold start measured on this Space (`StartTimes`: a fresh worker forking, /allow,
  CUDA init, the weights to the GPU), until one is measured `start_s`; and no call of a Generate
  asks more than `max_call_s`: a call that would takes fewer segments, and a lone segment's block
  that would is given fewer frames.

The per-frame figures are deliberately above what one H200 slice should need (eager PyTorch,
batch 1: about 10-20 ms a step; `benchmarks/gpu_smoke.py` measures them): a call that ends early
gives the rest back. docs/PERFORMANCE.md §7 has the asks of typical requests
(`benchmarks/zerogpu_asks.py`).
"""

from __future__ import annotations

import math
import threading
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass

from gepard_demo.model.guards.guardrails import force_stop_for
from gepard_demo.settings import SamplingSettings, SettingsError
from gepard_demo.units import FRAME_RATE_HZ, expected_speech_s, word_count

__all__ = ["CallPlan", "GpuBudget", "Made", "StartTimes"]


@dataclass(frozen=True)
class Made:
    """What a segment already has when a call is planned (from the last call's carry)."""

    frames: int = 0  # frames made so far
    ended: bool = False  # its last step ended it (stop, budget or force stop)
    decoded: int = 0  # of those frames, how many the session has already decoded (the segment it is on)


@dataclass(frozen=True)
class CallPlan:
    """One GPU call of a Generate: segments first, first + 1, ... and the frames it may make for
    each (0: the segment ended in an earlier call; this call only decodes its frames)."""

    first: int
    frames: tuple[int, ...]
    ask_s: int

    @property
    def segments(self) -> range:
        return range(self.first, self.first + len(self.frames))

    @property
    def rows(self) -> int:
        """Segments the call makes frames for: the batch's conditional rows."""
        return sum(1 for f in self.frames if f > 0)

    def allotted(self) -> dict[int, int]:
        return dict(zip(self.segments, self.frames))


@dataclass(frozen=True)
class GpuBudget:
    step_s: float = 0.030  # one decode step of one conditional row
    guided_step_extra: float = 0.3  # a step with its guidance row costs this much more
    codec_s_per_frame: float = 0.004  # exact streaming decode, per frame
    start_s: float = 10.0  # a cold start, until one is measured here (StartTimes)
    encoder_s_per_audio_s: float = 0.3  # a reference voice through the codec encoder + compressor
    margin: float = 1.5  # a call gives a segment this many times its expected frames
    max_rows: int = 3  # segments one call makes together (rows of its batch; docs/DESIGN.md says why 3)
    min_call_frames: int = 43  # at least 2 s of speech a call
    max_call_s: float = 60.0  # the most one call of a Generate asks for
    max_s: float = 240.0  # the most any call (a reference voice, an eval batch) may ask for

    def frames_s(self, frames: int, guided_frames: int = 0) -> float:
        return frames * (self.step_s + self.codec_s_per_frame) + guided_frames * self.step_s * self.guided_step_extra

    # -- a Generate, call by call ------------------------------------------------------------

    def wanted(self, segment: str, done: int, sampling: SamplingSettings) -> int:
        """The frames a call gives `segment`, which already has `done`: margin x its expected
        frames (at least min_call_frames), no more than its budget (or its force stop) leaves."""
        want = max(self.min_call_frames, math.ceil(self.margin * expected_speech_s(word_count(segment)) * FRAME_RATE_HZ))
        # A force stop ends the segment there whatever the stop head says: no call asks past it.
        force = force_stop_for(sampling, segment)
        end = sampling.max_frames if force is None else min(force, sampling.max_frames)
        return max(1, min(want, end - done))

    def call_frames(self, segment: str, done: int, sampling: SamplingSettings, start_s: float | None = None) -> int:
        """The frames a call of `segment` alone may make: `wanted`, no more than fit under max_call_s."""
        frames = self.wanted(segment, done, sampling)
        while frames > 1 and self.call_s(frames, self._guided(sampling, done, frames), start_s) > self.max_call_s:
            frames = math.floor(frames * 0.9)
        return max(1, frames)

    def call_s(self, frames: int, guided_frames: int = 0, start_s: float | None = None) -> int:
        """What a call of `frames` frames asks for, in whole seconds (a cold start included)."""
        return math.ceil((self.start_s if start_s is None else start_s) + self.frames_s(frames, guided_frames))

    def ask_s(self, frames: int, sampling: SamplingSettings, done: int, start_s: float | None = None) -> int:
        """The ask of a call making `frames` frames of a segment that already has `done`."""
        return self.call_s(frames, self._guided(sampling, done, frames), start_s)

    @staticmethod
    def _guided(sampling: SamplingSettings, done: int, frames: int) -> int:
        if not sampling.guided:
            return 0
        left = frames if sampling.cfg_frames is None else max(0, sampling.cfg_frames - done)
        return min(frames, left)

    # -- a call of several segments, as rows of one batch ----------------------------------------

    @staticmethod
    def rows_factor(rows: int) -> float:
        """A step of `rows` backbone rows over a step of one: an H200 runs a batch of 16 in about
        twice a solo step (memory-bound below that)."""
        return 1.0 + math.log2(max(1, rows)) / 4

    def step_at(self, rows: int, guided_rows: int = 0) -> float:
        """One decode step of `rows` segments, `guided_rows` of them with their guidance row: the
        batch's factor, each guidance row adding `guided_step_extra` of its segment's share (one
        guided row alone: 1.3 steps, as a segment's call counts it)."""
        return self.step_s * self.rows_factor(rows) * (1.0 + self.guided_step_extra * guided_rows / rows)

    def parts_s(self, parts: list[tuple[int, int, int]], sampling: SamplingSettings,
                start_s: float | None = None) -> int:
        """What a call asks, in whole seconds, for `parts`: per segment (frames it has, frames the
        call may make for it, frames it has that are not decoded yet). Its rows step together,
        each until its own frames are made, its guidance row until cfg_frames; the codec decodes
        every frame the call may make and every carried one not yet decoded; the start on top."""
        rows = [(done, frames) for done, frames, _ in parts if frames > 0]
        undecoded = sum(u for _, _, u in parts)
        steps: Counter = Counter()  # (rows, guided rows) -> steps made at that many
        for t in range(max((f for _, f in rows), default=0)):
            live = [done + t for done, frames in rows if t < frames]
            guided = sum(1 for k in live if sampling.guided and (sampling.cfg_frames is None or k < sampling.cfg_frames))
            steps[(len(live), guided)] += 1
        gen = sum(n * self.step_at(r, g) for (r, g), n in steps.items())
        codec = self.codec_s_per_frame * (sum(f for _, f in rows) + undecoded)
        return math.ceil((self.start_s if start_s is None else start_s) + gen + codec)

    def plan(self, segments: list[str], sampling: SamplingSettings, first: int = 0,
             made: Mapping[int, Made] | None = None, start_s: float | None = None) -> CallPlan:
        """The next call of a Generate whose session is on segment `first`: that segment and the
        ones after it, in order, each given `wanted` frames (none if it already ended: then the
        call only decodes it), for as long as the call stays within `max_rows` rows and its ask
        within `max_call_s`. A call's first segment that alone would ask more gets fewer frames."""
        made = made or {}
        parts: list[list[int]] = []  # [segment, frames it has, frames this call may make, not decoded]
        for j in range(first, len(segments)):
            m = made.get(j, Made())
            frames = 0 if m.ended else self.wanted(segments[j], m.frames, sampling)
            part = [j, m.frames, frames, m.frames - m.decoded]
            if sum(1 for p in parts if p[2]) + (frames > 0) > self.max_rows:
                break
            if self.parts_s(_costed(parts + [part]), sampling, start_s) > self.max_call_s:
                if parts and (any(p[2] for p in parts) or not frames):
                    break  # the segments so far fill this call; the next one goes on from here
                while part[2] > 1 and self.parts_s(_costed(parts + [part]), sampling, start_s) > self.max_call_s:
                    part[2] = math.floor(part[2] * 0.9)
                parts.append(part)
                break
            parts.append(part)
        return CallPlan(first, tuple(p[2] for p in parts), self.parts_s(_costed(parts), sampling, start_s))

    # -- other calls ---------------------------------------------------------------------------

    def decode_s(self, frames: int, start_s: float | None = None) -> int:
        """A call that only decodes `frames` frames (the page's re-cut of a take)."""
        return math.ceil((self.start_s if start_s is None else start_s) + frames * self.codec_s_per_frame)

    def prefix_s(self, seconds: float, start_s: float | None = None) -> float:
        return self._checked((self.start_s if start_s is None else start_s) + self.encoder_s_per_audio_s * seconds,
                             f"{seconds:.0f} s of reference", "the reference")

    def batch_s(self, rows: int, max_frames: int, guided_rows: int = 0, start_s: float | None = None) -> float:
        """An eval batch: rows decode together, so a step costs more than one row's; an H200
        runs a batch of 16 in about twice a solo step (memory-bound below that)."""
        rows_factor = self.rows_factor(rows + guided_rows)
        start = self.start_s if start_s is None else start_s
        return self._checked(start + max_frames * (self.step_s * rows_factor + self.codec_s_per_frame * rows),
                             f"{rows} rows x {max_frames} frames", "batch size or max_frames")

    def _checked(self, seconds: float, what: str, lower: str) -> float:
        if seconds > self.max_s:
            raise SettingsError(f"{what} would hold the GPU for up to {seconds:.0f} s, above the {self.max_s:.0f} s "
                                f"one ZeroGPU call may ask for: lower {lower}")
        return math.ceil(seconds)


class StartTimes:
    """Cold starts measured on this Space: each fresh worker says how long it took from its fork to
    the task (tasks.CallStart). The ask uses the longest of the last few, so a slow start that
    happened once is budgeted for again; until one is measured, the budget's default."""

    def __init__(self, keep: int = 8):
        self._seen: deque[float] = deque(maxlen=keep)
        self._lock = threading.Lock()

    def note(self, seconds: float) -> None:
        with self._lock:
            self._seen.append(float(seconds))

    def estimate(self) -> float | None:
        with self._lock:
            return max(self._seen) if self._seen else None


def _costed(parts: list[list[int]]) -> list[tuple[int, int, int]]:
    return [(done, frames, undecoded) for _, done, frames, undecoded in parts]
