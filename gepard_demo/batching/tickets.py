"""A request's life in the BatchScheduler (scheduler.py): its `Ticket`, and `TicketFrames`, the
iterator a streamed request's caller reads its FrameSteps from.

A look-ahead ticket is a long text's later segment, generated while an earlier one plays (issue
34): it waits behind every listened stream, and the scheduler may take its place in the batch for
one (`preempted`); it keeps the frames it made (`codes`), so it goes on from them later in one
prefill (BatchRequest.replay), drawing the same noise. `TicketFrames.promote()` makes it a plain
stream once its segment is the one playing.
"""

from __future__ import annotations

import queue
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Protocol

from gepard_demo.model.batch import BatchRequest
from gepard_demo.model.frames import FrameSource
from gepard_demo.model.generation import FrameStep
from gepard_demo.units import FRAME_RATE_HZ

# The pace a stream reports is measured over its last this many frames (half a second of audio): a
# long text's later segments join the batch after its first chunk, and the pace falls then.
PACE_FRAMES = 10
_CLOSED = object()  # what cancel() puts in a stream's handoff: a consumer waiting for a frame stops waiting


class SchedulerClosed(RuntimeError):
    """The scheduler was closed while this request waited or ran."""


@dataclass(eq=False)
class Ticket:
    """One request, from submission until its last step."""

    number: int
    stream: bool
    request: BatchRequest
    on_step: Callable[["Ticket", FrameStep | BaseException], None]
    submitted: float = field(default_factory=time.perf_counter)
    handle: int | None = None  # its place in the batch, once admitted
    first_frame_at: float | None = None
    frames: int = 0
    recent: deque = field(default_factory=lambda: deque(maxlen=PACE_FRAMES))  # its last frames' times
    reason: str | None = None  # why it waits (None: queued behind others, or running)
    ahead: int = 0  # requests in the queue before it
    cancelled: bool = False
    done: bool = False
    look_ahead: bool = False  # a later segment of a long text, made before its turn to play
    group: object = None  # the session it belongs to: its own streams do not hold its look-ahead back
    text: str = ""  # to make its sampler again when it goes on after a preemption
    codes: list | None = None  # a look-ahead ticket's frames so far (a preempted one resumes from them)
    preempted: int = 0  # how often a listened stream took its place

    @property
    def listened(self) -> bool:
        """Someone hears it now: a stream that is not a look-ahead segment."""
        return self.stream and not self.look_ahead

    @property
    def rows(self) -> int:
        return 2 if self.request.unconditional is not None else 1

    @property
    def prompt_tokens(self) -> int:
        return len(self.request.prompt) + len(self.request.unconditional or [])

    def lead_s(self, now: float) -> float:
        """How far this stream's audio is ahead of real time (frames made - time since the first)."""
        return 0.0 if self.first_frame_at is None else self.frames / FRAME_RATE_HZ - (now - self.first_frame_at)

    def wait_line(self) -> str | None:
        """Where a queued request stands, in words; None once it runs (or ended)."""
        if self.handle is not None or self.done:
            return None
        why = f": {self.reason}" if self.reason else ""
        place = "next in line" if self.ahead == 0 else f"{self.ahead} ahead in the queue"
        return f"waiting for the engine ({place}){why}"


class TicketDesk(Protocol):
    """What a ticket's frames ask of the scheduler that issued it (scheduler.BatchScheduler)."""

    def promote(self, ticket: Ticket) -> None: ...

    def cancel(self, ticket: Ticket) -> None: ...

    def stopped(self) -> bool: ...


class TicketFrames(FrameSource):
    """The iterator `stream_frames` returns: FrameSteps through the ticket's queue. `cancel()`
    (or close(), or losing the iterator) ends the request from any thread, and a consumer
    waiting for its next frame (queued, in prefill, or behind a slow step) stops waiting at once."""

    measures_pace = True

    def __init__(self, scheduler: TicketDesk, ticket: Ticket, handoff: queue.Queue):
        self._scheduler, self.ticket, self._handoff = scheduler, ticket, handoff
        self._ended = False

    def __iter__(self) -> "TicketFrames":
        return self

    def __next__(self) -> FrameStep:
        if self._ended or self.ticket.cancelled:
            raise StopIteration
        while True:
            try:
                item = self._handoff.get(timeout=1.0)
                break
            except queue.Empty:
                if self._scheduler.stopped():
                    self.cancel()
                    raise SchedulerClosed("the engine's scheduler stopped") from None
        if item is _CLOSED or self.ticket.cancelled:
            self._ended = True
            raise StopIteration
        if isinstance(item, BaseException):
            self.cancel()
            raise item
        if item.done:
            self._ended = True
        return item

    def wait_line(self) -> str | None:
        return self.ticket.wait_line()

    def promote(self) -> None:
        """Its segment now plays: from here on it is a listened stream (ahead of look-ahead work)."""
        self._scheduler.promote(self.ticket)

    @property
    def made(self) -> int:
        """Frames generated so far (read or not)."""
        return self.ticket.frames

    def pace(self) -> float | None:
        """Audio seconds it makes per wall second over its last PACE_FRAMES frames (until now), or
        None yet: the batch as it runs now, not as it ran at its start."""
        times = list(self.ticket.recent)
        if len(times) < 2:
            return None
        return (len(times) - 1) / FRAME_RATE_HZ / max(time.perf_counter() - times[0], 1e-3)

    @property
    def finished(self) -> bool:
        """Every frame of it is generated (it may not all be read yet)."""
        return self.ticket.done and not self.ticket.cancelled

    def cancel(self) -> None:
        """Any thread: the request ends (see BatchScheduler.cancel) and a waiting __next__ returns."""
        self._ended = True
        self._scheduler.cancel(self.ticket)
        self._handoff.put(_CLOSED)

    close = cancel

    def __del__(self) -> None:
        if not self.ticket.done:
            self._scheduler.cancel(self.ticket)
