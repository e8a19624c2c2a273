"""Stop, a closed tab and a hang-up on every surface, with requests that never end by themselves
(tests/support/hold_fixtures.py): the page's API (/stop, and the PCM listener leaving) while a Generate waits
for the scheduler, is in its prefill, runs, or waits on its codec; the speech server's streamed
(SSE, raw audio) and whole responses, running and queued; the page in front of a server; and
eval's server pool. Each must let go of the engine; the request never ends by itself, so any release
is the stop's (how soon: the hang-up benchmarks, tests/support/hold_fixtures.py says which)."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading

import pytest
from tests.support.app_fixtures import Listener, args, client, live_demo, new_id, serve_in_thread, tiny_codec  # noqa: F401
from tests.support.hold_fixtures import HANG_S, HELD_TEXT, HeldCodec, endless, held_prefill, wait_until, within  # noqa: F401

from gepard_demo.batching.codec_pool import CodecPool
from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.streaming.seams import SessionRequest
from gepard_demo.host_settings import BatchingSettings
from gepard_demo.model.request import FrameRequest

pytestmark = pytest.mark.slow


# -- the page's API ------------------------------------------------------------------------------


def _load(live_demo) -> dict:
    return live_demo.demo.host.scheduler.load()


def _stop(client, job_id: str, job) -> tuple:
    """/stop, then the Generate's result."""
    assert client.predict(job_id, api_name="/stop") in ("Stopping…", "Stopped: it had not started yet.")
    return job.result(timeout=HANG_S)


def test_page_stop_while_running(client, live_demo, endless):  # noqa: F811
    job_id = new_id()
    listener = Listener(live_demo.url, job_id)
    listener.start()
    job = client.submit(*args(job_id, seed=endless), api_name="/generate")
    wait_until(lambda: len(listener.data) > 20 * 1024 * 4, what="audio streaming")
    (status, wav, stats_md, _) = _stop(client, job_id, job)
    assert status.startswith("Stopped") and "stopped by the user" in stats_md
    within(lambda: _load(live_demo)["running"] == 0)
    listener.join(HANG_S)
    assert not listener.is_alive()  # its stream ended with the job


def test_page_listener_leaving_is_a_closed_tab(client, live_demo, endless):  # noqa: F811
    job_id = new_id()
    listener = Listener(live_demo.url, job_id, stop_after_bytes=10 * 1024 * 4)
    listener.start()
    job = client.submit(*args(job_id, seed=endless), api_name="/generate")
    listener.join(60)
    status = job.result(timeout=HANG_S)[0]
    assert status.startswith("Stopped")
    within(lambda: _load(live_demo)["running"] == 0)


def test_page_stop_while_waiting_for_a_place_in_the_batch(client, live_demo, endless):  # noqa: F811
    # Something else (the Eval tab, another caller) holds the batch's one place, forever.
    other = live_demo.demo.host.scheduler.stream_frames(FrameRequest("Someone else's endless request.", SamplingSettings(seed=endless)))
    try:
        next(other)
        job_id = new_id()
        job = client.submit(*args(job_id, max_frames=10), api_name="/generate")
        wait_until(lambda: any("Waiting for the engine" in (o[0] or "") for o in job.outputs() if o), what="the wait line")
        statuses = [o[0] for o in job.outputs() if o]
        assert any("Waiting for the engine (next in line): its one place is taken" in s for s in statuses), statuses
        assert live_demo.demo.controller.queue_status(job_id)["state"] == "queued"
        (status, wav, stats_md, _) = _stop(client, job_id, job)
        assert status.startswith("Stopped") and wav is None and "stopped by the user" in stats_md
        assert _load(live_demo)["waiting"] == 0
    finally:
        other.close()
    within(lambda: _load(live_demo)["running"] == 0)


def test_page_stop_during_the_prefill(client, live_demo, endless, held_prefill):  # noqa: F811
    job_id = new_id()
    job = client.submit(*args(job_id, text=f"{HELD_TEXT} until someone stops it.", seed=endless), api_name="/generate")
    held_prefill.entered.wait(60)
    (status, *_) = _stop(client, job_id, job)
    assert status.startswith("Stopped")
    held_prefill.release()  # the prefill ends; its row leaves before any step
    within(lambda: _load(live_demo) == {"running": 0, "waiting": 0, "rows": 0, "max_batch": 1, "look_ahead": 0, "preemptions": 0})


def test_page_stop_while_the_codec_is_busy(client, live_demo, tiny_codec, endless, monkeypatch):  # noqa: F811
    held = HeldCodec(tiny_codec, hold_from=1)
    monkeypatch.setattr(live_demo.demo.host, "codec_pool", CodecPool(held))
    try:
        job_id = new_id()
        job = client.submit(*args(job_id, seed=endless), api_name="/generate")
        held.gate.entered.wait(60)  # its second chunk's decode does not return; the talker runs on
        (status, _wav, stats_md, _) = _stop(client, job_id, job)
        assert status.startswith("Stopped") and "stopped by the user" in stats_md
        within(lambda: _load(live_demo)["running"] == 0)  # the talker let go while the push is still held
    finally:
        held.gate.release()


# -- the speech server ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def speech_server(tiny_engine, tiny_codec):  # noqa: F811
    from gepard_demo.serving.server import build_speech_app

    app = build_speech_app(tiny_engine, tiny_codec, tiny_engine.default_sampling(), StreamSettings(chunk_frames=10),
                           batching=BatchingSettings(max_batch=1, admission="cap"))
    with serve_in_thread(app, "speech-stop") as port:
        yield port, app.state.scheduler


MODES = {"sse": {"stream": True}, "raw": {"stream": True, "stream_format": "audio"}, "whole": {}}


def _open(port: int, seed: int, mode: str) -> socket.socket:
    body = json.dumps({"input": "A request that never ends.", "response_format": "pcm", "seed": seed,
                       **MODES[mode]}).encode()
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(body) + body)
    return sock


@pytest.mark.parametrize("mode", list(MODES))
def test_server_hang_up_while_running(speech_server, endless, mode):  # noqa: F811
    port, scheduler = speech_server
    sock = _open(port, endless, mode)
    wait_until(lambda: scheduler.load()["running"] == 1, what="the request running")
    if mode != "whole":
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")  # audio is flowing; the talker runs ahead
    sock.close()
    within(lambda: scheduler.load()["running"] == 0)


@pytest.mark.parametrize("mode", list(MODES))
def test_server_hang_up_while_queued_behind_a_stream(speech_server, endless, mode):  # noqa: F811
    port, scheduler = speech_server
    holder = _open(port, endless, "raw")  # connected and never read again: its talker runs on
    wait_until(lambda: scheduler.load()["running"] == 1, what="the holder running")
    queued = _open(port, 3, mode)
    wait_until(lambda: scheduler.load()["waiting"] == 1, what="the second request queued")
    queued.close()
    within(lambda: scheduler.load()["waiting"] == 0)
    assert scheduler.load()["running"] == 1  # the holder is untouched
    holder.close()
    within(lambda: scheduler.load()["running"] == 0)


# -- the page in front of a server, and eval's pool ---------------------------------------------


def test_served_page_stop_while_the_server_queues_it(speech_server, endless):  # noqa: F811
    from gepard_demo.serving.client import ServedFeatures, SpeechClient
    from gepard_demo.ui.hosts.served import ServedSession

    port, scheduler = speech_server
    holder = _open(port, endless, "raw")
    wait_until(lambda: scheduler.load()["running"] == 1, what="the holder running")
    request = SessionRequest("Waiting behind the holder.", SamplingSettings(seed=5), StreamSettings())
    session = ServedSession(SpeechClient(f"http://127.0.0.1:{port}"), request, features=ServedFeatures())
    done = threading.Event()
    threading.Thread(target=lambda: (session.run(), done.set()), daemon=True).start()
    wait_until(lambda: scheduler.load()["waiting"] == 1, what="the served session queued")
    session.cancel()  # the Stop button: no chunk will come to notice it at
    within(lambda: done.is_set() and scheduler.load()["waiting"] == 0)
    assert session.stats.cancelled
    holder.close()
    within(lambda: scheduler.load()["running"] == 0)


class Interrupted(Exception):
    """What the test raises in the main thread, as Ctrl-C raises KeyboardInterrupt there."""


def test_an_interrupted_eval_pool_hangs_up_its_requests(speech_server, endless):  # noqa: F811
    from eval.engines.request import SynthesisItem
    from eval.engines.served import GepardServer, ServerPool

    port, scheduler = speech_server
    pool = ServerPool([GepardServer(f"http://127.0.0.1:{port}")], concurrency=2)

    def interrupt_once_busy():
        wait_until(lambda: scheduler.load() == {"running": 1, "waiting": 1, "rows": 1, "max_batch": 1, "look_ahead": 0, "preemptions": 0},
                   what="one utterance running, one queued")
        os.kill(os.getpid(), signal.SIGUSR1)

    def raise_interrupted(*_):
        raise Interrupted

    previous = signal.signal(signal.SIGUSR1, raise_interrupted)
    try:
        threading.Thread(target=interrupt_once_busy, daemon=True).start()
        with pytest.raises(Interrupted):  # the run's loop, stopped while both requests are out
            items = [SynthesisItem("Never ends.", endless), SynthesisItem("Waits behind it.", 9)]
            for _ in pool.synthesize_each(items, SamplingSettings(), StreamSettings()):
                pass
    finally:
        signal.signal(signal.SIGUSR1, previous)
    within(lambda: scheduler.load()["running"] == 0 and scheduler.load()["waiting"] == 0)
