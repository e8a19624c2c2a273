"""BatchScheduler: callers on their own threads share one running batch; each gets the frames of
its solo run, a closed stream leaves at once, the cap queues the rest (streams first), the
real-time rule makes a newcomer wait and says why, a failure ends only the requests it hit."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from tests.support.hold_fixtures import endless, wait_until  # noqa: F401  (fixture)

from gepard_demo.batching.admission import Costs, Newcomer, Running, refusal
from gepard_demo.batching.scheduler import BatchScheduler, SchedulerClosed
from gepard_demo.settings import SamplingSettings, SettingsError
from gepard_demo.host_settings import BatchingSettings
from gepard_demo.units import FRAME_RATE_HZ
from gepard_demo.model.request import FrameRequest

pytestmark = pytest.mark.numerics  # results depend on the CPU's kernels: make test-isa runs it under other ISAs

TEXTS = ["Hello world", "The weather is sunny today, with a light breeze.", "Hi", "One more sentence for the batch."]


def _greedy(frames, **kw):
    return SamplingSettings(**{"greedy": True, "max_frames": frames, "stop_threshold": 0.999, **kw})


@pytest.fixture
def scheduler(layout_engine):
    s = BatchScheduler(layout_engine, BatchingSettings(max_batch=4))
    yield s
    s.close()


def _collect(frames_iter, out, key, stop_after=None):
    got = []
    for step in frames_iter:
        if step.codes is not None:
            got.append(step.codes)
        if stop_after is not None and len(got) == stop_after:
            frames_iter.close()
            break
    out[key] = torch.stack(got)


def test_streams_on_their_own_threads_equal_their_solo_runs(scheduler, layout_engine):
    e = layout_engine
    k = e.config.num_speaker_prefix
    voice = None if k == 0 else 0.05 * torch.randn(k, e.config.hidden_size, generator=torch.Generator().manual_seed(1))
    plan = [(TEXTS[0], _greedy(40), None), (TEXTS[1], _greedy(25, cfg_scale=2.0, cfg_frames=5), None),
            (TEXTS[2], _greedy(30), voice), (TEXTS[3], _greedy(35), None)]
    out: dict = {}
    threads = []
    for i, (text, s, sp) in enumerate(plan):
        it = scheduler.stream_frames(FrameRequest(text, s, speaker=sp))
        th = threading.Thread(target=_collect, args=(it, out, i, 12 if i == 3 else None))
        th.start()
        threads.append(th)
        time.sleep(0.01)  # arrivals spread over the first steps
    for th in threads:
        th.join(60)
    for i, (text, s, sp) in enumerate(plan):
        solo = e.generate([text], s, speakers=[sp])[0].frames
        want = solo[:12] if i == 3 else solo  # the 4th stopped listening after 12 frames
        assert torch.equal(out[i], want), i
    deadline = time.time() + 5
    while scheduler.load()["running"] and time.time() < deadline:
        time.sleep(0.01)
    assert scheduler.load() == {"running": 0, "waiting": 0, "rows": 0, "max_batch": 4, "look_ahead": 0, "preemptions": 0}


def test_generate_each_returns_results_as_they_end(scheduler, layout_engine):
    settings = [_greedy(30), _greedy(8), _greedy(16)]
    order = [i for i, _ in scheduler.generate_each(TEXTS[:3], settings)]
    assert order == [1, 2, 0]
    batch = scheduler.generate(TEXTS[:3], settings)
    for text, s, r in zip(TEXTS, settings, batch):
        solo = layout_engine.generate([text], s)[0]
        assert torch.equal(r.frames, solo.frames) and r.runaway and r.gen_time_s > 0


def test_the_cap_queues_and_streams_go_before_batch_work(layout_engine, endless):
    s = BatchScheduler(layout_engine, BatchingSettings(max_batch=2))
    try:
        a, b = s.stream_frames(FrameRequest(TEXTS[0], _greedy(1, seed=endless))), s.stream_frames(FrameRequest(TEXTS[1], _greedy(1, seed=endless)))
        next(a), next(b)  # both places taken, by requests that never end by themselves
        batch_work = threading.Thread(target=s.generate, args=([TEXTS[2]], _greedy(5)))
        batch_work.start()
        wait_until(lambda: s.load()["waiting"] == 1, what="the batch work queued")
        c = s.stream_frames(FrameRequest(TEXTS[3], _greedy(5)))
        assert s.load()["running"] == 2 and s.load()["waiting"] == 2
        wait_until(lambda: "places are taken" in (c.wait_line() or ""), what="the scheduler's answer to c")
        line = c.wait_line()
        assert line.startswith("waiting for the engine (next in line)") and "all 2 places are taken" in line  # the stream jumped the batch work
        a.close()
        steps = list(c)  # a's place went to c
        assert len(steps) == 5 and steps[-1].done == "budget" and c.wait_line() is None
        b.close()
        batch_work.join(30)
        assert not batch_work.is_alive()
    finally:
        s.close()


def test_a_newcomer_waits_while_it_would_push_streams_below_real_time(layout_engine, endless):
    s = BatchScheduler(layout_engine, BatchingSettings(max_batch=4))
    try:
        s.costs.note_decode(seconds=0.03, frames=1)  # a codec that takes 30 ms a frame: two streams cannot keep up
        first = s.stream_frames(FrameRequest(TEXTS[0], _greedy(1, seed=endless)))
        next(first)
        second = s.stream_frames(FrameRequest(TEXTS[1], _greedy(5)))
        wait_until(lambda: second.wait_line() and "real time" in second.wait_line(), what="the admission rule's answer")
        line = second.wait_line()
        assert "would fall behind real time" in line and "46.4 ms is real time" in line
        batch: list = []
        work = threading.Thread(target=lambda: batch.extend(s.generate([TEXTS[2]], _greedy(4))))
        work.start()  # batch work waits in line too: nothing overtakes the waiting stream
        wait_until(lambda: s.load()["waiting"] == 2, what="the batch work queued")
        assert s.load()["running"] == 1
        first.close()
        assert len(list(second)) == 5  # alone, it runs; and the batch work after it
        work.join(30)
        assert batch[0].num_frames == 4
    finally:
        s.close()


def test_the_rule_in_numbers():
    c = Costs()
    c.note_step(1, 0.018)
    cfg = BatchingSettings(max_batch=4)
    one = Running(requests=1, rows=1, streams=1, min_lead_s=1.0)
    # unmeasured at 2 rows: scaled as if compute-bound, 36 ms, within 85% of 46.4 ms (39.5 ms)
    assert refusal(cfg, c, one, Newcomer(1, 20, True)) is None
    c.note_decode(0.004, 1)  # + 2 x 4 ms of codec: 44 ms > 39.5 ms
    assert "fall behind" in refusal(cfg, c, one, Newcomer(1, 20, True))
    assert refusal(BatchingSettings(admission="cap"), c, one, Newcomer(1, 20, True)) is None
    c.note_step(2, 0.019)  # measured: batching was nearly free (19 + 8 ms)
    assert refusal(cfg, c, one, Newcomer(1, 20, True)) is None
    c.note_prefill(0.5, 10)  # 50 ms a token: a 20-token prefill stalls 1 s
    assert "stall them 1000 ms" in refusal(cfg, c, Running(1, 1, 1, 0.2), Newcomer(1, 20, True))
    assert refusal(cfg, c, Running(4, 4, 4, 5.0), Newcomer(1, 1, True)).startswith("all 4 places are taken")
    assert refusal(cfg, c, Running(0, 0, 0, None), Newcomer(2, 99, True)) is None  # an idle engine always admits
    assert 1000 / FRAME_RATE_HZ == pytest.approx(46.44, abs=0.01)
    with pytest.raises(SettingsError, match="max_batch"):
        BatchingSettings(max_batch=0)


def test_a_failing_request_ends_alone_and_close_ends_the_rest(layout_engine, monkeypatch, endless):
    talker = layout_engine.talker
    width = len(layout_engine.prompt_ids(TEXTS[1]))
    real = talker.embed_prompt

    def embed_prompt(ids, speakers=None):
        if ids.shape[1] == width:  # this request's prefill breaks (a stand-in for any fault)
            raise RuntimeError("prefill broke")
        return real(ids, speakers)

    monkeypatch.setattr(talker, "embed_prompt", embed_prompt)
    s = BatchScheduler(layout_engine, BatchingSettings(max_batch=2, admission="cap"))
    ok = s.stream_frames(FrameRequest(TEXTS[0], _greedy(1, seed=endless)))  # never ends by itself: close() must end it
    next(ok)
    failing = s.stream_frames(FrameRequest(TEXTS[1], _greedy(5)))
    with pytest.raises(RuntimeError, match="prefill broke"):
        list(failing)
    assert next(ok).codes is not None  # the running stream carries on
    other = s.stream_frames(FrameRequest(TEXTS[3], _greedy(1, seed=endless)))  # the second place, taken for good
    next(other)
    waiting = s.stream_frames(FrameRequest(TEXTS[2], _greedy(5)))
    wait_until(lambda: s.load()["waiting"] == 1, what="the third request queued")
    s.close()
    for stream in (ok, other, waiting):
        with pytest.raises(SchedulerClosed):
            list(stream)
    with pytest.raises(SchedulerClosed):
        s.stream_frames(FrameRequest(TEXTS[3], _greedy(5)))
    with pytest.raises(SettingsError):
        BatchScheduler(layout_engine).stream_frames(FrameRequest("Hi", SamplingSettings(max_frames=0)))
