"""What `stream_frames` returns on every engine: one request's FrameSteps as they are made.

The engine's own decode loop (EngineFrames, below), the batch scheduler's ticket
(batching/tickets.TicketFrames), a ZeroGPU call's segment (zerogpu/batched.SegmentIterator) and
the pipelined talker (speed/pipeline.PipedFrames) are all FrameSources, so a session reads,
stops and measures each the same way. A default here is a source's with nothing more to say.
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only a name here: the served paths import this module and must not load torch
    from .generation import FrameStep
    from .request import FrameRequest


class FrameSource:
    # It ended because the call making it has no more of it (a ZeroGPU call's budget), not because
    # the request ended: the session resumes it in a new call (streaming/session.py).
    paused = False
    # Its own pace is measured (`pace`): a row of a running batch, whose frames come at the batch's
    # rate. Elsewhere frames come as fast as they are read, and the text's overall rate stands in.
    measures_pace = False

    def __iter__(self) -> "FrameSource":
        return self

    def __next__(self) -> FrameStep:
        raise NotImplementedError

    def cancel(self) -> None:
        """From any thread: end the request; a consumer waiting for a frame stops waiting."""
        raise NotImplementedError

    def close(self) -> None:
        """From the reading thread: end the request and free what it holds."""
        self.cancel()

    def wait_line(self) -> str | None:
        """Why it makes no frames yet (its place in the engine's queue), or None."""
        return None

    def promote(self) -> None:
        """Its segment now plays: where it matters, it goes ahead of work made ahead."""

    @property
    def made(self) -> int:
        """Frames generated so far, read or not."""
        raise NotImplementedError

    @property
    def finished(self) -> bool:
        """Every frame of it is generated (not all may be read yet)."""
        raise NotImplementedError

    def pace(self) -> float | None:
        """Audio seconds it makes per wall second (None until measured, or where not measured)."""
        return None


class EngineFrames(FrameSource):
    """A decode loop's steps (a generator: GepardEngine's, or any iterator a test engine yields)
    as a FrameSource: frames are made as they are read, so `made` counts what was read."""

    def __init__(self, steps: Iterator[FrameStep]):
        self._steps = iter(steps)
        self._stop = threading.Event()
        self._made = 0
        self._finished = False

    def __next__(self) -> FrameStep:
        if self._stop.is_set():
            raise StopIteration
        step = next(self._steps)
        self._made += step.codes is not None
        self._finished = self._finished or step.done is not None
        return step

    def cancel(self) -> None:
        self._stop.set()  # the loop runs only while it is read: the next read ends it

    def close(self) -> None:
        self.cancel()
        if isinstance(self._steps, Generator):  # its finally frees the rows
            self._steps.close()

    @property
    def made(self) -> int:
        return self._made

    @property
    def finished(self) -> bool:
        return self._finished


class FrameMaker:
    """What makes FrameSources (`stream_frames`): GepardEngine, the BatchScheduler, a ZeroGPU
    call's CallBatch, the pipelined talker. A default is an engine's that runs on its own. Each
    also has `model_info` (seams.ModelInfo; the wrappers forward their engine's: seams.WrappedEngine).
    seams.FrameEngine is this surface as a Protocol."""

    # Later segments of a long text may be opened ahead of their turn, as rows of a running batch
    # (streaming/segments.py); on an engine of its own they run one after another.
    takes_look_ahead = False

    def stream_frames(self, request: FrameRequest) -> FrameSource:
        raise NotImplementedError

    def note_decode(self, seconds: float, frames: int) -> None:
        """Told each codec decode's cost, for a scheduler's admission rule; nothing to do here."""


def frame_source(frames: Iterator[FrameStep]) -> FrameSource:
    """An engine's stream as a FrameSource (a plain iterator, as a test's engine yields, wrapped)."""
    return frames if isinstance(frames, FrameSource) else EngineFrames(frames)
