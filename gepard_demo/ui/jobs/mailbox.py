"""One job's mailbox: the PCM a Generate (the producer, any thread) puts, for its listeners.

A listener is a coroutine on the server's event loop, woken through `loop.call_soon_threadsafe`
(no thread blocks per listener). The registry (jobs.py) creates a job for its one Generate and
keeps it, running then finished, while a listener may still want it.

A running job keeps at most `keep_sent_bytes` of its audio that every open listener already has
(TrafficSettings.keep_running_bytes): older chunks are let go, oldest first, so a chapter streaming
for an hour holds minutes of audio, not the hour. A listener that comes after its start was let go
is refused (410, `start_dropped`), as one for a job dropped after it finished.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import numpy as np

if TYPE_CHECKING:
    from gepard_demo.streaming.seams import Session
    from gepard_demo.streaming.segments import Progress


@dataclass
class Job:
    job_id: str
    created: float = field(default_factory=time.monotonic)  # when its page first asked for it
    started: float = field(default_factory=time.monotonic)  # when a Generate claimed it
    chunks: list[bytes] = field(default_factory=list)  # float32 little-endian PCM
    finished: bool = False
    finished_at: float | None = None
    cancelled: bool = False
    claimed: bool = False  # a producer has taken it
    error: str | None = None
    session: Session | None = None  # the running session, to cancel it on Stop
    last_progress: Progress | None = None  # a long text's progress when it finished (its session is let go)
    client: str = ""  # who asked for it (an address: audio_route.client_of)
    nbytes: int = 0  # PCM bytes put so far
    on_finish: Callable[["Job"], None] | None = None  # the registry's: it moves the job to the kept ones
    keep_sent_bytes: int | None = None  # None: keep it all (see the module docstring)
    base: int = 0  # chunks let go from the front (chunks[0] is chunk number `base`)
    kept_bytes: int = 0  # PCM bytes in `chunks`
    _cond: threading.Lock = field(default_factory=threading.Lock)
    _waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = field(default_factory=list)
    _read: dict = field(default_factory=dict)  # listener -> chunk number it reads next

    @property
    def start_dropped(self) -> bool:
        """Its first chunks were let go: a new listener could not hear it from the start."""
        return self.base > 0

    # -- producer side (any thread) ---------------------------------------------------------

    def put(self, samples: np.ndarray) -> None:
        data = np.asarray(samples, dtype="<f4").tobytes()
        with self._cond:
            if self.finished:  # a stopped session's last chunk, after its handler answered: nobody hears it
                return
            self.chunks.append(data)
            self.nbytes += len(data)
            self.kept_bytes += len(data)
            self._let_go()
        self._wake()

    def _let_go(self) -> None:  # holds self._cond
        """Past keep_sent_bytes, the oldest chunks every open listener has already sent go."""
        if self.keep_sent_bytes is None:
            return
        heard = min(self._read.values(), default=self.base + len(self.chunks))
        while self.kept_bytes > self.keep_sent_bytes and self.chunks and self.base < heard:
            self.kept_bytes -= len(self.chunks.pop(0))
            self.base += 1

    def finish(self, error: str | None = None) -> None:
        """The first call counts (the handler and the session's thread may both end it)."""
        try:  # a long text's last progress; nothing may keep a job from finishing
            progress = self.session.progress() if self.session is not None else None
        except Exception:  # noqa: BLE001
            progress = None
        with self._cond:
            if self.finished:
                return
            self.last_progress = progress if progress and progress.get("segments", 1) > 1 else None
            self.finished = True
            self.finished_at = time.monotonic()
            self.error = error
        if self.on_finish is not None:
            self.on_finish(self)
        self._wake()

    def attach(self, session: Session) -> None:
        """Make `session` the one Stop cancels; cancels it at once if Stop came first."""
        with self._cond:
            self.session = session
            cancelled = self.cancelled
        if cancelled:
            session.cancel()

    def cancel(self) -> None:
        with self._cond:
            self.cancelled = True
            session = self.session
        if session is not None:
            session.cancel()
        self._wake()

    def _wake(self) -> None:
        with self._cond:
            waiters = list(self._waiters)
        for loop, event in waiters:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # that loop is closed: its listener is gone
                pass

    # -- listener side (event loop) ---------------------------------------------------------

    async def iter_bytes(self):
        """Yield the PCM bytes as they come; ends when the producer finishes or cancels."""
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        waiter = (loop, event)
        with self._cond:
            self._waiters.append(waiter)
            if self.base > 0:  # admitted before its start went: it cannot be heard whole any more
                self._waiters.remove(waiter)
                return
            self._read[waiter] = 0
        sent = 0  # chunk number of the next one to send
        complete = False
        try:
            while True:
                event.clear()
                with self._cond:
                    self._read[waiter] = sent
                    new = self.chunks[sent - self.base:]
                    done = self.finished or self.cancelled
                sent += len(new)
                for data in new:
                    yield data
                if done and not new:
                    with self._cond:  # anything put between the snapshot and now
                        if self.base + len(self.chunks) == sent:
                            complete = True
                            return
                    continue
                if not new:
                    await event.wait()
        finally:
            with self._cond:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                self._read.pop(waiter, None)
            if not complete:
                # The listener left mid-stream (tab closed, or a new Generate replaced this
                # one): nobody will hear the rest, so stop spending the one engine on it.
                self.cancel()
