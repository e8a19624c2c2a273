"""Job mailboxes between the Gradio generate event (producer) and the PCM route (listener).

The browser makes up the job id and opens the PCM stream at the moment of the click, in
parallel with submitting the Gradio event, so no round trip is spent telling the page which
stream to open. Only the Generate (the producer) creates the mailbox; a listener that comes
first waits for it, holding nothing but its own connection (see JobRegistry). The producer runs in a
Gradio worker thread; the listener is a coroutine on the server's event loop, woken through
`loop.call_soon_threadsafe` (no thread blocks per listener).
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

JOB_ID_RE = re.compile(r"^[A-Za-z0-9_-]{8,64}$")


class JobError(RuntimeError):
    """A job id that is malformed, or a registry that is full."""


class TooManyListeners(JobError):
    """A client (or everyone together) has too many audio streams open."""


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
    """The jobs Generate has claimed, and the listeners waiting for one.

    Only a Generate (one at a time, through Gradio's queue) creates a job, so anonymous
    requests can never fill what a Generate needs. A listener for an id no Generate has
    claimed yet waits connected, holding only its own slot: at most `listeners_per_client`
    per client address and `max_waiting` in all. When it leaves before any Generate claimed
    the id, a cancellation mark (a short string, the newest `remember_cancelled` kept) is all
    that stays: the request it was opened for, still queued, then stops at once.
    """

    def __init__(self, max_jobs: int = 64, finished_ttl_s: float = 60.0, listeners_per_client: int = 8,
                 max_waiting: int = 256, remember_cancelled: int = 4096):
        self.max_jobs = max_jobs
        self.finished_ttl_s = finished_ttl_s
        self.listeners_per_client = listeners_per_client
        self.max_waiting = max_waiting
        self.remember_cancelled = remember_cancelled
        self._jobs: dict[str, Job] = {}
        self._waiters: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}
        self._waiting_since: dict[str, float] = {}  # job id -> when its first listener came
        self._cancelled: OrderedDict[str, None] = OrderedDict()
        self._clients: Counter[str] = Counter()  # open listeners per client address
        self._lock = threading.Lock()

    @staticmethod
    def check_id(job_id: Any) -> str:
        if not isinstance(job_id, str) or not JOB_ID_RE.match(job_id):
            raise JobError(f"bad job id {job_id!r}")
        return job_id

    # -- producer side ----------------------------------------------------------------------

    def claim(self, job_id: str) -> Job:
        """Create the job for its one producer (a Generate); a second claim of an id is refused."""
        self.check_id(job_id)
        with self._lock:
            self._sweep()
            if job_id in self._jobs:
                raise JobError(f"job {job_id} is already running or done; a new request needs a new id")
            if len(self._jobs) >= self.max_jobs:
                raise JobError("too many jobs in flight; try again in a moment")
            since = self._waiting_since.pop(job_id, None)
            job = self._jobs[job_id] = Job(job_id, claimed=True)
            if since is not None:
                job.created = since
            if job_id in self._cancelled:  # stopped (or its page left) while it waited in the queue
                del self._cancelled[job_id]
                job.cancelled = True
            waiters = list(self._waiters.get(job_id, []))
        _wake_all(waiters)
        return job

    def open(self, job_id: str) -> Job:
        """Producer-side alias kept for callers that do not care about one-claim semantics."""
        job = self.get(job_id)
        return job if job is not None else self.claim(job_id)

    # -- listener side ----------------------------------------------------------------------

    def admit(self, job_id: str, client: str) -> None:
        """Refuse a listener at once (bad id, or too many open from this client / in all)."""
        self.check_id(job_id)
        with self._lock:
            if self._clients[client] >= self.listeners_per_client:
                raise TooManyListeners(f"too many audio streams open from {client} "
                                       f"({self.listeners_per_client} at most); close other tabs")
            if job_id not in self._jobs and sum(len(w) for w in self._waiters.values()) >= self.max_waiting:
                raise TooManyListeners("too many listeners waiting for requests that have not started; try again")

    async def listen(self, job_id: str, client: str):
        """The job's PCM bytes, waiting (connected, holding nothing a Generate needs) until a
        Generate claims the id. Ends at once if the id is cancelled first."""
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        waiter = (loop, event)
        with self._lock:
            self._clients[client] += 1
            job = self._jobs.get(job_id)
            if job is None:
                self._waiters.setdefault(job_id, []).append(waiter)
                self._waiting_since.setdefault(job_id, time.monotonic())
        try:
            while job is None:
                await event.wait()
                event.clear()
                with self._lock:
                    job = self._jobs.get(job_id)
                    if job is None and job_id in self._cancelled:
                        return
            self._unwait(job_id, waiter)
            async for data in job.iter_bytes():
                yield data
            # The whole stream was sent: free the job's audio now rather than at the next sweep.
            self.discard_if_done(job_id)
        finally:
            self._unwait(job_id, waiter)
            with self._lock:
                self._clients[client] -= 1
                if self._clients[client] <= 0:
                    del self._clients[client]
                if job is None:  # left before any Generate claimed it: that request must not run
                    self._mark_cancelled(job_id)

    def _unwait(self, job_id: str, waiter) -> None:
        with self._lock:
            waiters = self._waiters.get(job_id)
            if waiters and waiter in waiters:
                waiters.remove(waiter)
                if not waiters:
                    del self._waiters[job_id]
                    self._waiting_since.pop(job_id, None)

    def waiting_ahead(self, job_id: str) -> int | None:
        """How many listened-for requests that have not started came before this one
        (None when this id is not waiting)."""
        with self._lock:
            mine = self._waiting_since.get(job_id)
            if mine is None:
                return None
            return sum(1 for t in self._waiting_since.values() if t < mine)

    def open_listeners(self) -> int:
        with self._lock:
            return sum(self._clients.values())

    def running(self) -> Job | None:
        with self._lock:
            live = [j for j in self._jobs.values() if not j.finished]
        return live[-1] if live else None

    # -- both -------------------------------------------------------------------------------

    def discard_if_done(self, job_id: str) -> None:
        """Forget a job whose producer has finished (its listener has all the audio)."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is not None and job.finished:
                del self._jobs[job_id]

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def cancel(self, job_id: str) -> str | None:
        """Stop a job: "running" (its session is told), "queued" (not claimed yet: the request
        stops as soon as it starts, and any listener ends now), or None for a bad id."""
        try:
            self.check_id(job_id)
        except JobError:
            return None
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                self._mark_cancelled(job_id)
                waiters = list(self._waiters.get(job_id, []))
        if job is not None:
            job.cancel()
            return "running"
        _wake_all(waiters)
        return "queued"

    def _mark_cancelled(self, job_id: str) -> None:  # holds self._lock
        if job_id in self._jobs:
            return
        self._cancelled[job_id] = None
        self._cancelled.move_to_end(job_id)
        while len(self._cancelled) > self.remember_cancelled:
            self._cancelled.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._jobs)

    def _sweep(self) -> None:  # holds self._lock
        now = time.monotonic()
        for job_id, job in list(self._jobs.items()):
            if job.finished_at is not None and now - job.finished_at > self.finished_ttl_s:
                del self._jobs[job_id]


def _wake_all(waiters) -> None:
    for loop, event in waiters:
        try:
            loop.call_soon_threadsafe(event.set)
        except RuntimeError:  # that loop is closed
            pass
