"""One job's mailbox: the PCM a Generate (the producer, any thread) puts, for its listeners.

A listener is a coroutine on the server's event loop, woken through `loop.call_soon_threadsafe`
(no thread blocks per listener). The registry (jobs.py) creates a job for its one Generate and
keeps it, running then finished, while a listener may still want it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


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
    session: Any = None  # the running SynthesisSession, to cancel it on Stop
    client: str = ""  # who asked for it (an address: audio_route.client_of)
    nbytes: int = 0  # PCM bytes put so far
    on_finish: Callable[["Job"], None] | None = None  # the registry's: it moves the job to the kept ones
    _cond: threading.Lock = field(default_factory=threading.Lock)
    _waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = field(default_factory=list)

    # -- producer side (any thread) ---------------------------------------------------------

    def put(self, samples: np.ndarray) -> None:
        data = np.asarray(samples, dtype="<f4").tobytes()
        with self._cond:
            if self.finished:  # a stopped session's last chunk, after its handler answered: nobody hears it
                return
            self.chunks.append(data)
            self.nbytes += len(data)
        self._wake()

    def finish(self, error: str | None = None) -> None:
        """The first call counts (the handler and the session's thread may both end it)."""
        with self._cond:
            if self.finished:
                return
            self.finished = True
            self.finished_at = time.monotonic()
            self.error = error
        if self.on_finish is not None:
            self.on_finish(self)
        self._wake()

    def attach(self, session: Any) -> None:
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
        sent = 0
        complete = False
        try:
            while True:
                event.clear()
                with self._cond:
                    new = self.chunks[sent:]
                    done = self.finished or self.cancelled
                sent += len(new)
                for data in new:
                    yield data
                if done and not new:
                    with self._cond:  # anything put between the snapshot and now
                        if len(self.chunks) == sent:
                            complete = True
                            return
                    continue
                if not new:
                    await event.wait()
        finally:
            with self._cond:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
            if not complete:
                # The listener left mid-stream (tab closed, or a new Generate replaced this
                # one): nobody will hear the rest, so stop spending the one engine on it.
                self.cancel()
