"""Job mailboxes between the Gradio generate event (producer) and the PCM route (listener).

The browser makes up the job id and opens the PCM stream at the moment of the click, in
parallel with submitting the Gradio event, so no round trip is spent telling the page which
stream to open. Whichever side arrives first creates the mailbox. The producer runs in a
Gradio worker thread; the listener is a coroutine on the server's event loop, woken through
`loop.call_soon_threadsafe` (no thread blocks per listener).
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

JOB_ID_RE = re.compile(r"^[A-Za-z0-9_-]{8,64}$")


class JobError(RuntimeError):
    """A job id that is malformed, or a registry that is full."""


@dataclass
class Job:
    job_id: str
    created: float = field(default_factory=time.monotonic)
    chunks: list[bytes] = field(default_factory=list)  # float32 little-endian PCM
    finished: bool = False
    finished_at: float | None = None
    cancelled: bool = False
    claimed: bool = False  # a producer has taken it
    error: str | None = None
    session: Any = None  # the running SynthesisSession, to cancel it on Stop
    _cond: threading.Lock = field(default_factory=threading.Lock)
    _waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = field(default_factory=list)

    # -- producer side (any thread) ---------------------------------------------------------

    def put(self, samples: np.ndarray) -> None:
        data = np.asarray(samples, dtype="<f4").tobytes()
        with self._cond:
            self.chunks.append(data)
        self._wake()

    def finish(self, error: str | None = None) -> None:
        with self._cond:
            self.finished = True
            self.finished_at = time.monotonic()
            self.error = error
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


class JobRegistry:
    """All live jobs; old ones are swept on each `open`.

    max_jobs bounds memory against clients opening streams for ids that never run.
    """

    def __init__(self, max_jobs: int = 64, finished_ttl_s: float = 60.0, unclaimed_ttl_s: float = 300.0):
        self.max_jobs = max_jobs
        self.finished_ttl_s = finished_ttl_s
        self.unclaimed_ttl_s = unclaimed_ttl_s
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()

    def open(self, job_id: str) -> Job:
        """The job with this id, created if new (by the route or the producer, whoever first)."""
        if not isinstance(job_id, str) or not JOB_ID_RE.match(job_id):
            raise JobError(f"bad job id {job_id!r}")
        with self._lock:
            self._sweep()
            job = self._jobs.get(job_id)
            if job is None:
                if len(self._jobs) >= self.max_jobs:
                    raise JobError("too many jobs in flight; try again in a moment")
                job = self._jobs[job_id] = Job(job_id)
            return job

    def claim(self, job_id: str) -> Job:
        """Open the job for its one producer; a second producer for the same id is refused."""
        job = self.open(job_id)
        with self._lock:
            if job.claimed:
                raise JobError(f"job {job_id} is already running or done; a new request needs a new id")
            job.claimed = True
        return job

    def discard_if_done(self, job_id: str) -> None:
        """Forget a job whose producer has finished (its listener has all the audio).

        An unclaimed job is kept even if cancelled: its request may still be waiting in the
        queue, and must find the cancellation when it starts."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is not None and job.claimed and job.finished:
                del self._jobs[job_id]

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def cancel(self, job_id: str) -> bool:
        job = self.get(job_id) if isinstance(job_id, str) else None
        if job is None:
            return False
        job.cancel()
        return True

    def __len__(self) -> int:
        with self._lock:
            return len(self._jobs)

    def _sweep(self) -> None:
        now = time.monotonic()
        for job_id, job in list(self._jobs.items()):
            if job.finished_at is not None and now - job.finished_at > self.finished_ttl_s:
                del self._jobs[job_id]
            elif not job.claimed and now - job.created > self.unclaimed_ttl_s:
                del self._jobs[job_id]
