"""The page's wait line: where a request that has not started stands, and an honest estimate.

The estimate: what the running request still needs (from its own progress: at least the
typical time minus what it has run, at most its frame budget at its own rate), plus the typical
time of each request ahead (the median of recent ones).
"""

from __future__ import annotations

import time
from typing import Literal, get_args

from gepard_demo.ui.jobs.registry import JobRegistry

QueueState = Literal["queued", "running", "finished", "gone", "unknown"]
"""Where a job stands, as GET /gepard/queue/{job} answers it (the answer's "state"):
- queued: not started, waiting for a place (its position and wait), or started and kept waiting by
  the engine's scheduler (a long text's later segment, too);
- running: its session runs (with a long text's progress, `long_text`);
- finished: it ended (with a long text's last progress, kept after its audio was sent and let go);
- gone: it will not start, or its audio was let go with no progress kept (`text`: why);
- unknown: neither claimed, kept nor waiting (yet, or no more).
Declared here alone: the page hands the names to the player in its config (layout.page_head,
`queueStates`), and player_fetch.js reads them from there."""
QUEUE_STATES: tuple[QueueState, ...] = get_args(QueueState)


def _answer(state: QueueState, **fields) -> dict:
    return {"state": state, **fields}


def queue_status(registry: JobRegistry, job_id: str, typical: float | None) -> dict:
    """typical: a recent Generate's wall time (the median), None before any."""
    job = registry.get(job_id)
    if job is not None:
        # Started, but the engine's scheduler keeps it waiting (its place and why).
        session = job.session  # None before the session is attached, and once the registry let it go
        line = session.wait_line() if session is not None and not job.finished else None
        if line:
            return _answer("queued", text=f"{line[0].upper()}{line[1:]}.")
        info = _answer("finished" if job.finished else "running")
        text = job.last_progress if job.finished else session.progress() if session is not None else None
        if text and text["segments"] > 1:  # a long text: the player's start buffer and its line read this
            info["long_text"] = text
        return info
    why = registry.gone(job_id)
    if why is not None:  # the page stops asking: this id will not start, or its audio was all sent
        done = registry.finished_progress(job_id)  # a long text's last progress: the line's last waits
        return _answer("gone", text=why) if done is None else _answer("finished", long_text=done)
    ahead = registry.waiting_ahead(job_id)
    if ahead is None:
        return _answer("unknown")
    running = registry.running()
    low = high = 0.0
    if running is not None and running.session is not None:
        st = running.session.stats
        ran = time.monotonic() - running.started
        rate = st.frames / ran if st.frames and ran > 0 else None
        budget = running.session.sampling.max_frames
        budget_left = (budget - st.frames) / rate if rate and budget else None
        guess = max((typical or 0.0) - ran, 1.0)
        high = budget_left if budget_left is not None else guess
        low = min(guess, high)
    low += ahead * (typical or 0.0)
    high += ahead * (typical or 0.0)
    position = ahead + (1 if running is not None else 0) + 1
    return _answer("queued", position=position, ahead=position - 1, wait_s=round(low, 1), wait_max_s=round(high, 1),
                   text=wait_words(position - 1, low, high, typical is not None))


def _secs(x: float) -> str:
    return f"{x:.0f} s" if x < 90 else f"{x / 60:.0f} min"


def wait_words(ahead: int, low: float, high: float, known: bool) -> str:
    """'Waiting: 2 requests ahead of you, about 10 s (at most 40 s).'"""
    if ahead <= 0:
        return "Starting…"
    who = "1 request" if ahead == 1 else f"{ahead} requests"
    if not known and high <= 0:
        return f"Waiting: {who} ahead of you (no timing yet to estimate the wait)."
    est = f"about {_secs(max(low, 1.0))}"
    if high > low + 1:
        est += f" (at most {_secs(high)})"
    return f"Waiting: {who} ahead of you, {est}."
