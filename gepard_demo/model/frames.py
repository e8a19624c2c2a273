"""What `stream_frames` returns on every engine: one request's FrameSteps as they are made.

The engine's own decode loop (EngineFrames, below), the batch scheduler's ticket
(batching/tickets.TicketFrames), a ZeroGPU call's segment (zerogpu/batched.SegmentIterator) and
the pipelined talker (speed/pipeline.PipedFrames) are all FrameSources, so a session reads,
stops and measures each the same way. A default here is a source's with nothing more to say.
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterator

from .generation import FrameStep


class FrameSource:
    # It ended because the call making it has no more of it (a ZeroGPU call's budget), not because
    # the request ended: the session resumes it in a new call (streaming/session.py).
    paused = False

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
        """Audio seconds it makes per wall second, where it is measured; None otherwise."""
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


def frame_source(frames: Iterator[FrameStep]) -> FrameSource:
    """An engine's stream as a FrameSource (a plain iterator, as a test's engine yields, wrapped)."""
    return frames if isinstance(frames, FrameSource) else EngineFrames(frames)
