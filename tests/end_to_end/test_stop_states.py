"""Stop ends a request in every state it can be in, with requests that never end by themselves
(tests/support/hold_fixtures.py): waiting in the scheduler's queue, in its prefill, running, and while its
codec drains; through the scheduler, the pipeline and a pooled codec. The page, the server and
eval are tested the same way in tests/end_to_end/test_stop_surfaces.py."""

from __future__ import annotations

import threading

import pytest
from tests.support.app_fixtures import tiny_codec  # noqa: F401  (fixture)
from tests.support.hold_fixtures import HELD_TEXT, endless, held_codec, held_prefill, wait_until, within  # noqa: F401

from gepard_demo.batching.codec_pool import CodecPool
from gepard_demo.batching.scheduler import BatchScheduler
from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.host_settings import BatchingSettings
from gepard_demo.speed.pipeline import PipelinedEngine
from gepard_demo.streaming.session import SynthesisSession
from gepard_demo.streaming.seams import SessionRequest
from gepard_demo.model.request import FrameRequest
from tests.support.running_session import Running


TEXT = "A request that goes on and on."
STREAM = StreamSettings(first_chunk_frames=2, chunk_frames=4)


@pytest.fixture()
def scheduler(tiny_engine):
    s = BatchScheduler(tiny_engine, BatchingSettings(max_batch=1, admission="cap"))
    yield s
    s.close()


def _session(engine, codec, seed, text=TEXT):
    return SynthesisSession(engine, codec, SessionRequest(text, SamplingSettings(seed=seed), STREAM))


def test_stop_while_queued_behind_a_request_that_never_ends(scheduler, tiny_codec, endless):  # noqa: F811
    holder = Running(_session(scheduler, tiny_codec, endless))
    wait_until(lambda: holder.chunks > 0, what="the holder's first chunk")
    queued = Running(_session(scheduler, tiny_codec, 1))
    wait_until(lambda: scheduler.load()["waiting"] == 1, what="the second request queued")
    assert queued.session.wait_line().startswith("waiting for the engine (next in line)")
    queued.session.cancel()
    within(lambda: queued.ended() and scheduler.load()["waiting"] == 0)  # not when the holder ends: it never does
    assert queued.error is None and queued.session.stats.cancelled and queued.session.stats.frames == 0
    holder.session.cancel()
    within(lambda: holder.ended() and scheduler.load()["running"] == 0)
    assert holder.session.stats.cancelled and not holder.session.stats.runaway


def test_stop_during_its_prefill(scheduler, tiny_codec, endless, held_prefill):  # noqa: F811
    r = Running(_session(scheduler, tiny_codec, endless, f"{HELD_TEXT}, then on forever."))
    held_prefill.entered.wait(30)
    r.session.cancel()
    within(r.ended)  # the prefill is still held: the consumer stopped waiting for it
    assert scheduler.load()["running"] == 0 and r.session.stats.frames == 0
    held_prefill.release()  # the prefill ends; its row leaves before a step is taken
    within(lambda: scheduler.load() == {"running": 0, "waiting": 0, "rows": 0, "max_batch": 1, "look_ahead": 0, "preemptions": 0})


def test_stop_while_running(scheduler, tiny_codec, endless):  # noqa: F811
    r = Running(_session(scheduler, tiny_codec, endless))
    wait_until(lambda: r.chunks >= 3, what="three chunks")
    r.session.cancel()
    within(lambda: r.ended() and scheduler.load()["running"] == 0)
    assert r.session.stats.cancelled and r.error is None


def test_stop_while_the_codec_drains_frees_the_talker_at_once(scheduler, tiny_codec, endless):  # noqa: F811
    # The talker runs ahead while the codec is stuck in a push that does not return.
    with held_codec(tiny_codec, hold_from=1) as codec:
        r = Running(_session(scheduler, codec, endless))
        codec.gate.entered.wait(30)  # the second push waits; the talker goes on making frames
        assert scheduler.load()["running"] == 1
        r.session.cancel()
        within(lambda: scheduler.load()["running"] == 0)  # while the push is still held
        assert not r.ended()
    within(r.ended)  # the push returned: the session ends at once, cancelled
    assert r.session.stats.cancelled and r.error is None


def test_a_pooled_push_that_waits_for_the_pool_is_dropped(tiny_engine, tiny_codec, endless):  # noqa: F811
    scheduler = BatchScheduler(tiny_engine, BatchingSettings(max_batch=2, admission="cap"))
    with held_codec(tiny_codec) as codec:
        pool = CodecPool(codec)
        first = Running(_session(scheduler, pool, endless))
        codec.gate.entered.wait(30)  # the pool's thread is stuck decoding the first stream's chunk
        second = Running(_session(scheduler, pool, endless))
        wait_until(lambda: len(pool._pending) == 1, what="the second stream's push waiting for the pool")
        second.session.cancel()
        within(lambda: second.ended() and scheduler.load()["running"] == 1)
        assert second.error is None and second.session.stats.cancelled
        first.session.cancel()
        within(lambda: scheduler.load()["running"] == 0)
    within(first.ended)
    scheduler.close()


def test_a_pipelined_consumer_waiting_for_its_talker_stops_waiting(tiny_engine, endless, held_prefill):  # noqa: F811
    frames = PipelinedEngine(tiny_engine).stream_frames(FrameRequest(f"{HELD_TEXT}, piped.", SamplingSettings(seed=endless)))
    got = []
    consumer = threading.Thread(target=lambda: got.extend(frames), daemon=True)
    consumer.start()
    held_prefill.entered.wait(30)  # the talker thread is in its prefill; the consumer waits for a frame
    frames.cancel()
    within(lambda: not consumer.is_alive())
    assert got == []
    held_prefill.release()  # the talker ends after the step in flight: the engine is free
    frames.close()
    assert not frames._worker.is_alive()
