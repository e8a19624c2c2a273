"""The page's wait line: where a request that has not started stands, and an honest estimate.

The estimate: what the running request still needs (from its own progress: at least the
typical time minus what it has run, at most its frame budget at its own rate), plus the typical
time of each request ahead (the median of recent ones).
"""

from __future__ import annotations

import time

from .jobs import JobRegistry


def queue_status(registry: JobRegistry, job_id: str, typical: float | None) -> dict:
    """typical: a recent Generate's wall time (the median), None before any."""
    job = registry.get(job_id)
    if job is not None:
        # Started, but the engine's scheduler keeps it waiting (its place and why).
        session = job.session  # None before the session is attached, and once the registry let it go
        line = session.wait_line() if session is not None and not job.finished else None
        if line:
            return {"state": "queued", "text": f"{line[0].upper()}{line[1:]}."}
        info = {"state": "finished" if job.finished else "running"}
        text = job.last_progress if job.finished else session.progress() if session is not None else None
        if text and text["segments"] > 1:  # a long text: the player's start buffer and its line read this
            info["long_text"] = text
        return info
    why = registry.gone(job_id)
    if why is not None:  # the page stops asking: this id will not start, or its audio was all sent
        done = registry.finished_progress(job_id)  # a long text's last progress: the line's last waits
        return {"state": "gone", "text": why} if done is None else {"state": "finished", "long_text": done}
    ahead = registry.waiting_ahead(job_id)
    if ahead is None:
        return {"state": "unknown"}
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
    return {"state": "queued", "position": position, "ahead": position - 1,
            "wait_s": round(low, 1), "wait_max_s": round(high, 1),
            "text": wait_words(position - 1, low, high, typical is not None)}


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
