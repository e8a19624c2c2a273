"""How much ZeroGPU time each call asks for, and how a Generate is cut into calls.

A ZeroGPU call asks for a duration up front (`@spaces.GPU(duration=...)`). ZeroGPU refuses a call
whose ask exceeds what the visitor has left of a day's quota (about 2 min without login, 3.5 min
on a free account, 25-40 min on PRO; facts §12), then bills the time really used. So a call that
asks for the whole frame budget (1000 frames: 44 s for one short sentence) is refused long before
a visitor's quota is spent. Here each call asks for what its own part is expected to take:

- a Generate is one call per text segment (text over 400 characters is split, streaming/
  text_input.py), and a segment's call is given `margin` x its expected frames: the authors'
  expected duration of speech, 0.7 + 0.4 s a word (their scorer; the page's player uses it too),
  at 21.5 frames a second, at least `min_call_frames`;
- a segment that outlasts its call (the stop head has not fired) goes on in the next call, which
  carries the talker's frames and the codec's state across (SessionCarry): the audio has no
  seam, and each call asks for the same block again, up to the frame budget;
- a call asks: start + frames x per-frame cost (+ the guidance row's share while guided), where
  start is the cold start measured on this Space (`StartTimes`: a fresh worker forking, /allow,
  CUDA init, the weights to the GPU), until one is measured `start_s`; and no call of a Generate
  asks more than `max_call_s`: a block that would is given fewer frames.

The per-frame figures are deliberately above what one H200 slice should need (eager PyTorch,
batch 1: about 10-20 ms a step; `benchmarks/gpu_smoke.py` measures them): a call that ends early
gives the rest back. docs/PERFORMANCE.md §7 has the asks of typical requests
(`benchmarks/zerogpu_asks.py`).
"""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass

from gepard_demo.model.guardrails import expected_speech_s, force_stop_for
from gepard_demo.settings import FRAME_RATE_HZ, SamplingSettings, SettingsError

__all__ = ["GpuBudget", "StartTimes", "expected_speech_s"]


@dataclass(frozen=True)
class GpuBudget:
    step_s: float = 0.030  # one decode step of one conditional row
    guided_step_extra: float = 0.3  # a step with its guidance row costs this much more
    codec_s_per_frame: float = 0.004  # exact streaming decode, per frame
    start_s: float = 10.0  # a cold start, until one is measured here (StartTimes)
    encoder_s_per_audio_s: float = 0.3  # a reference voice through the codec encoder + compressor
    margin: float = 1.5  # a segment's call covers this many times its expected frames
    min_call_frames: int = 43  # at least 2 s of speech a call
    max_call_s: float = 60.0  # the most one call of a Generate asks for
    max_s: float = 240.0  # the most any call (a reference voice, an eval batch) may ask for

    def frames_s(self, frames: int, guided_frames: int = 0) -> float:
        return frames * (self.step_s + self.codec_s_per_frame) + guided_frames * self.step_s * self.guided_step_extra

    # -- a Generate, call by call ------------------------------------------------------------

    def call_frames(self, segment: str, done: int, sampling: SamplingSettings, start_s: float | None = None) -> int:
        """The frames a call may make for `segment`, which already has `done`: margin x its
        expected frames (at least min_call_frames), no more than its budget (or its force stop)
        leaves, and no more than fit under max_call_s."""
        want = max(self.min_call_frames, math.ceil(self.margin * expected_speech_s(segment) * FRAME_RATE_HZ))
        # A force stop ends the segment there whatever the stop head says: no call asks past it.
        force = force_stop_for(sampling, segment)
        end = sampling.max_frames if force is None else min(force, sampling.max_frames)
        frames = min(want, end - done)
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
        rows_factor = 1.0 + math.log2(max(1, rows + guided_rows)) / 4
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
