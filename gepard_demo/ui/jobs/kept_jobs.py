"""Finished jobs kept for a listener that comes late, under a memory bound; and the ids let go.

A page opens its job's audio stream at the click, so its listener is there before the job ends,
and the registry forgets the job as soon as it has sent it all (jobs.py). A job nobody listened
to (an API client reads the WAV instead) stays here for a listener that comes late: at most
`keep_s` after it finished, and all of them together at most `keep_bytes` (their audio plus
KEPT_JOB_OVERHEAD each, so jobs without audio are bounded too). When a job finishes past the
bound, the oldest finished go first, the new one included if it alone is larger. Kept jobs never
count against the Generates running (jobs.py): a busy page keeps serving.

An id let go (its audio dropped, already sent, or its Generate refused) is remembered with the
reason and, for a long text, its last progress (a few floats a segment: the player's line still
reads where each segment ends while the audio plays), the newest `remember` of them: a listener for it is answered at once (HTTP 410 with that
line, audio_route.py) instead of waiting for a Generate that will never come.

Not thread-safe on its own: the registry calls it under its lock.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from typing import TYPE_CHECKING

from gepard_demo.bounded import Bounded

if TYPE_CHECKING:
    from gepard_demo.streaming.segments import Progress
    from gepard_demo.ui.jobs.mailbox import Job

KEPT_JOB_OVERHEAD = 1024  # bytes a kept job costs beside its audio: its fields and bookkeeping


def size_words(n: int) -> str:
    """Bytes as a person reads them: '64 MB', '15 KB', '900 bytes'."""
    if n >= 2**20:
        return f"{n / 2**20:.3g} MB"
    return f"{n / 1024:.3g} KB" if n >= 1024 else f"{n} bytes"


class KeptJobs:
    def __init__(self, keep_bytes: int, keep_s: float, remember: int = 4096):
        self.keep_bytes = keep_bytes
        self.keep_s = keep_s
        self._jobs: OrderedDict[str, tuple[Job, int, float]] = OrderedDict()  # id -> (job, cost, finished at)
        self._bytes = 0
        self._gone: Bounded[str, tuple[str, Progress | None]] = Bounded(remember)  # id -> (why it is not here, progress)
        self.dropped: Counter[str] = Counter()  # jobs let go unheard, by cause: "memory", "age"

    @property
    def bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._jobs)

    def get(self, job_id: str) -> Job | None:
        entry = self._jobs.get(job_id)
        return entry[0] if entry else None

    def gone(self, job_id: str) -> str | None:
        """Why this id's audio is not here (None: never seen, or kept)."""
        entry = self._gone.get(job_id)
        return entry[0] if entry else None

    def progress(self, job_id: str) -> Progress | None:
        """A long text's last progress, once its audio is let go (None: none, or not let go)."""
        entry = self._gone.get(job_id)
        return entry[1] if entry else None

    def add(self, job: Job, nbytes: int, now: float) -> None:
        """A job that just finished; drops the oldest ones (this one too) past the memory bound."""
        cost = nbytes + KEPT_JOB_OVERHEAD
        self._jobs[job.job_id] = (job, cost, now)
        self._bytes += cost
        self._gone.pop(job.job_id, None)
        while self._jobs and self._bytes > self.keep_bytes:
            oldest = next(iter(self._jobs))
            self._let_go(oldest, "memory", f"its audio was dropped to keep the finished jobs' audio under "
                                           f"{size_words(self.keep_bytes)} (the oldest go first)")

    def sweep(self, now: float) -> None:
        """Let go of every job that finished more than keep_s ago."""
        while self._jobs:
            job_id, (_job, _cost, finished) = next(iter(self._jobs.items()))
            if now - finished <= self.keep_s:
                return
            self._let_go(job_id, "age", f"its audio was dropped: it finished more than {self.keep_s:g} s ago "
                                        f"(a finished job's audio is kept {self.keep_s:g} s for a listener that comes late)")

    def sent(self, job_id: str) -> None:
        """Its listener has all of it: free it now."""
        if job_id in self._jobs:
            self._let_go(job_id, None, "its audio was already sent to a listener and freed")

    def forget(self, job_id: str, why: str, progress: Progress | None = None) -> None:
        """An id with no job here (its Generate was refused, or freed elsewhere): remember why."""
        self._gone[job_id] = (why, progress)

    def reuse(self, job_id: str) -> None:
        """A new Generate claims an id let go before: it is not gone any more."""
        self._gone.pop(job_id, None)

    def _let_go(self, job_id: str, cause: str | None, why: str) -> None:
        job, cost, _ = self._jobs.pop(job_id)
        self._bytes -= cost
        if cause:
            self.dropped[cause] += 1
        self._gone[job_id] = (why, job.last_progress)
