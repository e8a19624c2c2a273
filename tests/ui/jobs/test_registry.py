"""The job registry on a busy page (issue 36), without a server: only Generates running count
against the caps, finished jobs are kept under a memory bound and age and dropped oldest first,
one client cannot take every place, and a listener for an id that will never play is answered
at once."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from tests.support.async_clock import FakeClock, run_async

from gepard_demo.host_settings import TrafficSettings
from gepard_demo.ui.jobs.kept_jobs import KEPT_JOB_OVERHEAD
from gepard_demo.ui.jobs.registry import Busy, JobGone, JobRegistry

SAMPLES = 1000  # a job's audio in these tests: 1000 float32 samples, 4000 bytes
COST = SAMPLES * 4 + KEPT_JOB_OVERHEAD


def finished_job(reg: JobRegistry, job_id: str, client: str = "1.1.1.1"):
    job = reg.claim(job_id, client)
    job.put(np.ones(SAMPLES, np.float32))
    job.finish()
    return job


def test_finished_jobs_never_refuse_a_generate():
    """The issue's lock-out: one client, Generates one after another, each refused after the
    cap's worth within a minute. Only running ones count now, however many have finished."""
    reg = JobRegistry(TrafficSettings(per_client=1, max_running=1))
    for i in range(200):
        finished_job(reg, f"one-after-another-{i:04d}")
    assert reg.load()["running"] == 0 and reg.load()["kept"] > 0


def test_kept_audio_stays_under_its_bound_and_the_oldest_go_first():
    reg = JobRegistry(TrafficSettings(keep_audio_bytes=3 * COST))
    peak = 0
    for i in range(5):
        job = finished_job(reg, f"kept-job-{i:04d}")
        assert job.session is None  # a finished job holds its audio, not its session's state
        peak = max(peak, reg.load()["kept_bytes"])
    assert peak <= 3 * COST
    assert [reg.get(f"kept-job-{i:04d}") is not None for i in range(5)] == [False, False, True, True, True]
    assert reg.load()["dropped"] == {"memory": 2}
    assert "audio under 14.7 KB (the oldest go first)" in reg.gone("kept-job-0000")  # the bound, named


def test_a_late_listener_for_a_dropped_job_is_answered_at_once():
    clock = FakeClock()
    reg = JobRegistry(TrafficSettings(keep_audio_bytes=COST, keep_s=60.0), clock=clock)
    finished_job(reg, "dropped-for-memory")
    finished_job(reg, "dropped-for-age")  # pushes the first one out
    clock.now += 61
    with pytest.raises(JobGone, match="dropped-for-memory: its audio was dropped to keep"):
        reg.admit("dropped-for-memory", "1.1.1.1")
    with pytest.raises(JobGone, match="finished more than 60 s ago"):
        reg.admit("dropped-for-age", "1.1.1.1")

    async def listen_twice():  # a job whose one listener has taken it all: a second gets a reason
        job = reg.claim("listened-to-once")
        job.put(np.ones(3, np.float32))
        job.finish()
        first = b"".join([b async for b in reg.listen("listened-to-once", "1.1.1.1")])
        with pytest.raises(JobGone, match="already sent to a listener"):
            reg.admit("listened-to-once", "1.1.1.1")
        return first

    assert len(run_async(listen_twice)) == 12


def test_one_client_runs_at_most_per_client_and_others_keep_their_place():
    reg = JobRegistry(TrafficSettings(per_client=2, max_running=8))
    a1, a2 = reg.claim("client-a-0001", "10.0.0.2"), reg.claim("client-a-0002", "10.0.0.2")
    with pytest.raises(Busy, match="this address already has 2 Generates running, the most one address"):
        reg.claim("client-a-0003", "10.0.0.2")
    reg.claim("client-b-0001", "10.0.0.3")  # another client is not affected
    a1.cancel()  # stopped: winding down, it no longer holds its client's place
    reg.claim("client-a-0004", "10.0.0.2")
    a2.finish()
    reg.claim("client-a-0005", "10.0.0.2")
    assert reg.load()["running"] == 4  # a1 (winding down), a4, a5 and b1: a1 still counts in all


def test_a_refused_generate_ends_the_listener_waiting_for_it():
    """The page opens the stream at the click; when its Generate is refused at the handler the
    stream ends at once, and a listener coming later is told why."""
    reg = JobRegistry(TrafficSettings(per_client=1, max_running=8))
    reg.claim("already-running", "10.0.0.2")

    async def scenario():
        waiting = asyncio.ensure_future(reg.listen("refused-job-1", "10.0.0.2").__anext__())
        await asyncio.sleep(0.05)
        assert not waiting.done()  # waits for its Generate, as any page's stream does
        with pytest.raises(Busy):
            reg.claim("refused-job-1", "10.0.0.2")
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(waiting, 5.0)

    run_async(scenario)
    with pytest.raises(JobGone, match="its Generate was refused: this address already has 1"):
        reg.admit("refused-job-1", "10.0.0.2")


def test_a_finished_long_texts_progress_outlives_its_audio():
    """The player's line reads where each segment of a long text ends while it still plays, after
    the job finished and its audio was sent and let go: the queue route answers its last progress."""
    from types import SimpleNamespace

    from gepard_demo.ui.jobs.queue_line import queue_status

    reg = JobRegistry(TrafficSettings())
    progress = {"segments": 3, "ends_s": [1.0, 2.0, 3.0]}
    job = reg.claim("job-long")
    job.attach(SimpleNamespace(progress=lambda: progress, wait_line=lambda: None, cancel=lambda: None))
    assert queue_status(reg, "job-long", None) == {"state": "running", "long_text": progress}
    job.finish()
    assert queue_status(reg, "job-long", None) == {"state": "finished", "long_text": progress}
    reg.discard_if_done("job-long")  # its listener took all of its audio
    reg.discard_if_done("job-long")
    assert reg.get("job-long") is None
    assert queue_status(reg, "job-long", None) == {"state": "finished", "long_text": progress}
    short = reg.claim("job-short")  # one segment: nothing to keep
    short.attach(SimpleNamespace(progress=lambda: {"segments": 1}, wait_line=lambda: None, cancel=lambda: None))
    short.finish()
    assert queue_status(reg, "job-short", None) == {"state": "finished"}
