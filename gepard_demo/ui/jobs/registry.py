"""The job registry between the Gradio generate event (producer) and the PCM route (listener).

The browser makes up the job id and opens the PCM stream at the moment of the click, in
parallel with submitting the Gradio event, so no round trip is spent telling the page which
stream to open. Only the Generate (the producer) creates the job (its mailbox: mailbox.py); a
listener that comes first waits for it, holding nothing but its own connection (see JobRegistry).

What counts against the registry's caps is real work only: the Generates running (or waiting for
the engine inside their handler), per client and in all (TrafficSettings). A finished job moves to
KeptJobs (kept_jobs.py), bounded by memory and age, and never refuses a new Generate.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from typing import TYPE_CHECKING, Callable

from gepard_demo.bounded import Bounded
from gepard_demo.host_settings import TrafficSettings
from gepard_demo.ui.jobs.kept_jobs import KeptJobs
from gepard_demo.ui.jobs.listeners import Listeners, Waiter, wake_all
from gepard_demo.ui.jobs.mailbox import Job

if TYPE_CHECKING:
    from gepard_demo.streaming.segments import Progress

__all__ = ["JOB_ID_RE", "JOB_ID_RULE", "Busy", "Job", "JobError", "JobGone", "JobRegistry", "TooManyListeners"]

JOB_ID_RE = re.compile(r"^[A-Za-z0-9_-]{8,64}$")
JOB_ID_RULE = "8 to 64 characters, each a letter, a digit, '-' or '_'"  # JOB_ID_RE in words, for its refusals
START_GONE = ("its start was already streamed and let go to keep memory bounded (a long text keeps only the "
              "last minutes of what its listener has heard); the finished WAV has it all")


class JobError(RuntimeError):
    """A job id that is malformed or already taken, or a refusal below."""


class TooManyListeners(JobError):
    """A client (or everyone together) has too many audio streams open."""


class Busy(JobError):
    """A Generate refused for traffic: its client (or everyone together) has too many running."""


class JobGone(JobError):
    """A listener for a job whose audio is no longer here (dropped, already sent, or refused)."""


def check_id(job_id: object) -> str:
    """The id, if it is one a browser makes up (JOB_ID_RE); JobError otherwise."""
    if not isinstance(job_id, str) or not JOB_ID_RE.fullmatch(job_id):  # fullmatch: "$" lets a newline end it
        raise JobError(f"bad job id {job_id!r}: a job id is {JOB_ID_RULE} (or leave it empty for a fresh one)")
    return job_id


def traffic_refusal(traffic: TrafficSettings, running: list[Job], client: str) -> str | None:
    """Why one more Generate from `client` is refused with these running (None: it may run)."""
    if len(running) >= traffic.max_running:
        return (f"too many Generates running on this server ({traffic.max_running} at once from everyone "
                f"together); try again in a moment")
    mine = sum(1 for j in running if j.client == client and not j.cancelled)
    if mine >= traffic.per_client:
        return (f"this address already has {mine} Generates running, the most one address may run at once "
                f"(so that other visitors keep a place); wait for one to finish")
    return None


class JobRegistry:
    """The jobs Generate has claimed, the finished ones kept a while, and the listeners waiting.

    Only a Generate creates a job, so anonymous requests can never fill what a Generate needs.
    Against the caps (TrafficSettings) count only the Generates running: `per_client` of one
    client's (a cancelled one, winding down, no longer counts against its client) and
    `max_running` in all. A finished job is kept for a late listener under a memory bound
    (kept_jobs.py) and counts against nothing. A listener for an id no Generate has claimed yet
    waits connected, holding only its own slot (listeners.py); when it leaves before any Generate
    claimed the id, a cancellation mark (the newest `remember` kept) is all that stays: the
    request it was opened for, still queued, then stops at once.
    """

    def __init__(self, traffic: TrafficSettings | None = None, listeners_per_client: int = 8,
                 max_waiting: int = 256, remember: int = 4096, clock: Callable[[], float] = time.monotonic):
        self.traffic = (traffic or TrafficSettings())
        self._clock = clock
        self._running: dict[str, Job] = {}  # claimed, not finished
        self._kept = KeptJobs(self.traffic.keep_audio_bytes, self.traffic.keep_s, remember)  # finished, and let go
        self._listeners = Listeners(listeners_per_client, max_waiting)
        self._cancelled: Bounded[str, None] = Bounded(remember)  # ids stopped before any Generate claimed them
        self._lock = threading.Lock()

    # -- producer side ----------------------------------------------------------------------

    def claim(self, job_id: str, client: str = "local") -> Job:
        """Create the job for its one producer (a Generate from `client`); a second claim of an
        id is refused (JobError), and so is one past the caps (Busy, naming which)."""
        check_id(job_id)
        with self._lock:
            self._kept.sweep(self._clock())
            if job_id in self._running or self._kept.get(job_id) is not None:
                raise JobError(f"job {job_id} is already running or done; a new request needs a new id")
            refusal = traffic_refusal(self.traffic, list(self._running.values()), client)
            waiters = self._listeners.waiters(job_id)
            if refusal is not None:  # a listener waiting for it ends now: this id will not come
                self._kept.forget(job_id, f"its Generate was refused: {refusal}")
            else:
                self._kept.reuse(job_id)
                waited = self._listeners.waiting.get(job_id)
                job = self._running[job_id] = Job(job_id, claimed=True, client=client, on_finish=self._finished,
                                                  keep_sent_bytes=self.traffic.keep_running_bytes)
                if waited is not None:
                    job.created = waited.since
                if job_id in self._cancelled:  # stopped (or its page left) while it waited in the queue
                    del self._cancelled[job_id]
                    job.cancelled = True
        wake_all(waiters)
        if refusal is not None:
            raise Busy(refusal)
        return job

    def _finished(self, job: Job) -> None:
        """Job.finish's hook: from the running to the kept (or gone, past the memory bound)."""
        with self._lock:
            if self._running.get(job.job_id) is not job:
                return  # its listener took it all already (discard_if_done)
            del self._running[job.job_id]
            job.session = None  # a finished job holds its audio only, not the session's state
            if job.start_dropped:  # no late listener could hear it whole: nothing worth keeping
                self._kept.forget(job.job_id, START_GONE, job.last_progress)
                return
            self._kept.add(job, job.kept_bytes, self._clock())
            self._kept.sweep(self._clock())

    # -- listener side ----------------------------------------------------------------------

    def admit(self, job_id: str, client: str) -> None:
        """Refuse a listener at once: a bad id, an id whose audio is gone (JobGone, saying why),
        or too many listeners open from this client / in all."""
        check_id(job_id)
        with self._lock:
            self._kept.sweep(self._clock())
            running = self._running.get(job_id)
            known = running is not None or self._kept.get(job_id) is not None
            why = START_GONE if running is not None and running.start_dropped else \
                None if known else self._kept.gone(job_id)
            if why is not None:
                raise JobGone(f"job {job_id}: {why}")
            why = self._listeners.refusal(client, known)
            if why is not None:
                raise TooManyListeners(why)

    async def listen(self, job_id: str, client: str):
        """The job's PCM bytes, waiting (connected, holding nothing a Generate needs) until a
        Generate claims the id. Ends at once if the id is cancelled or refused first."""
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        waiter = (loop, event)
        with self._lock:
            self._listeners.opened(client)
            job = self._lookup(job_id)
            if job is None:
                self._listeners.wait(job_id, waiter, time.monotonic())
        try:
            while job is None:
                with self._lock:
                    job = self._lookup(job_id)
                    if job is None and (job_id in self._cancelled or self._kept.gone(job_id)):
                        return
                if job is None:
                    await event.wait()
                    event.clear()
            self._unwait(job_id, waiter)
            async for data in job.iter_bytes():
                yield data
            # The whole stream was sent: free the job's audio now rather than at the next sweep.
            self.discard_if_done(job_id)
        finally:
            self._unwait(job_id, waiter)
            with self._lock:
                self._listeners.closed(client)
                if job is None:  # left before any Generate claimed it: that request must not run
                    self._mark_cancelled(job_id)

    def _lookup(self, job_id: str) -> Job | None:  # holds self._lock
        return self._running.get(job_id) or self._kept.get(job_id)

    def _unwait(self, job_id: str, waiter: Waiter) -> None:
        with self._lock:
            self._listeners.unwait(job_id, waiter)

    def waiting_ahead(self, job_id: str) -> int | None:
        """How many listened-for requests that have not started came before this one
        (None when this id is not waiting)."""
        with self._lock:
            return self._listeners.ahead(job_id)

    def open_listeners(self) -> int:
        with self._lock:
            return sum(self._listeners.clients.values())

    def running(self) -> Job | None:
        with self._lock:
            live = list(self._running.values())
        return live[-1] if live else None

    def load(self) -> dict:
        """What the registry holds now: Generates running, finished jobs kept and their bytes
        (the memory bound's), and how many finished jobs were dropped unheard, by cause."""
        with self._lock:
            self._kept.sweep(self._clock())
            return {"running": len(self._running), "kept": len(self._kept), "kept_bytes": self._kept.bytes,
                    "keep_bytes": self._kept.keep_bytes, "dropped": dict(self._kept.dropped)}

    # -- both -------------------------------------------------------------------------------

    def discard_if_done(self, job_id: str) -> None:
        """Forget a job whose producer has finished (its listener has all the audio)."""
        with self._lock:
            job = self._running.get(job_id)
            if job is not None and job.finished:  # finished, and its hook has not moved it yet
                del self._running[job_id]
                self._kept.forget(job_id, "its audio was already sent to a listener and freed", job.last_progress)
            else:
                self._kept.sent(job_id)

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._lookup(job_id)

    def finished_progress(self, job_id: str) -> Progress | None:
        """A finished long text's last progress, kept after its job is let go (None: none)."""
        with self._lock:
            return self._kept.progress(job_id)

    def gone(self, job_id: str) -> str | None:
        """Why this id's audio is not here any more (None: running, kept, or never seen)."""
        with self._lock:
            return None if self._lookup(job_id) is not None else self._kept.gone(job_id)

    def cancel(self, job_id: str) -> str | None:
        """Stop a job: "running" (its session is told), "queued" (not claimed yet: the request
        stops as soon as it starts, and any listener ends now), or None for a bad id."""
        try:
            check_id(job_id)
        except JobError:
            return None
        with self._lock:
            job = self._lookup(job_id)
            if job is None:
                self._mark_cancelled(job_id)
                waiters = self._listeners.waiters(job_id)
        if job is not None:
            job.cancel()
            return "running"
        wake_all(waiters)
        return "queued"

    def _mark_cancelled(self, job_id: str) -> None:  # holds self._lock
        if self._lookup(job_id) is not None:
            return
        self._cancelled[job_id] = None

    def __len__(self) -> int:
        """Jobs held: running and kept."""
        with self._lock:
            return len(self._running) + len(self._kept)

