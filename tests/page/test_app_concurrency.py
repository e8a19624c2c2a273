"""Several visitors at once on a batching host (app.py's default): their Generates run at the
same time in one running batch, each hears exactly its own seeded utterance, and in Chromium two
pages generating together both play without a gap."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
from tests.support.app_fixtures import args, browser, live_batching_demo, new_id, set_number, tiny_codec  # noqa: F401  (fixtures)
from tests.support.hold_fixtures import admitted_together
from tests.page.test_app_browser import click_generate, wait_player

from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.streaming.session import SynthesisSession
from gepard_demo.streaming.seams import SessionRequest

pytestmark = pytest.mark.slow


def test_two_generates_decode_together_and_each_is_its_solo_run(live_batching_demo, tiny_engine, tiny_codec):  # noqa: F811
    from gradio_client import Client

    from app import DEMO_STREAM

    host = live_batching_demo.demo.host
    seeds, frames = [21, 22], 400
    clients = [Client(live_batching_demo.url, verbose=False) for _ in seeds]
    with admitted_together(host.scheduler, len(seeds)) as meeting:  # they meet in the batch however fast the first runs
        jobs = [c.submit(*args(new_id(), seed=s, max_frames=frames, stop_threshold=0.99, fade_ms=20, silence_ms=0,
                               chunk_frames=10, first_chunk_frames=10), api_name="/generate") for c, s in zip(clients, seeds)]
        results = [j.result(timeout=120) for j in jobs]
    assert meeting.peak == 2, (meeting.peak, meeting.refusals)  # together, not in turn (read inside the scheduler)
    for seed, (status, wav, _, _) in zip(seeds, results):
        assert status.startswith("Done"), status
        heard, _ = sf.read(wav, dtype="float32")
        sampling = SamplingSettings(temperature=0.3, stop_threshold=0.99, max_frames=frames, seed=seed)
        stream = StreamSettings(first_chunk_frames=10, chunk_frames=10, fade_ms=20, silence_ms=0,
                                decode_mode=DEMO_STREAM.decode_mode, lookback_frames=DEMO_STREAM.lookback_frames)
        alone = SynthesisSession(
            tiny_engine, tiny_codec, SessionRequest("Hello world, this is Gepard.", sampling, stream)
        ).run()
        assert heard.shape == alone.shape and np.abs(heard - alone).max() < 1e-5, seed  # codec calls shared: rounding


FRAMES = 200  # 9.3 s of audio: under the manual start buffer's 10 s


@pytest.mark.browser
def test_two_pages_generating_at_once_both_play(browser, live_batching_demo):  # noqa: F811
    pages = []
    for _ in range(2):
        context = browser.new_context(viewport={"width": 1280, "height": 1000})
        pg = context.new_page()
        pg.goto(live_batching_demo.url + "/", wait_until="load")  # not networkidle: the page keeps a heartbeat open (its gr.State)
        pg.wait_for_function("() => window.gepardPlayer && document.querySelector('#gepard-generate') && document.querySelector('#gepard-recut')", timeout=60_000)
        pg.fill("#gepard-text textarea", "Two visitors speak at the same time.")
        set_number(pg, "gepard-max-frames", FRAMES)
        set_number(pg, "gepard-stop-threshold", 0.99)
        # Random weights run to the budget, far past the text's expected length, so the automatic
        # start buffer cannot know how much to hold, and on a host that makes two streams slower
        # than real time (a loaded 2-vCPU one: 0.9x) no buffer short of the whole stream is
        # gapless. The manual buffer holds the whole stream, so a gap here is the page's, at any speed.
        pg.get_by_text("Streaming", exact=True).click()  # the accordion starts closed
        pg.uncheck("#gepard-prebuffer-auto input")
        set_number(pg, "gepard-prebuffer", 10_000)
        pages.append(pg)
    scheduler = live_batching_demo.demo.host.scheduler
    with admitted_together(scheduler, len(pages)) as meeting:
        jobs = [click_generate(pg) for pg in pages]
        stats = [wait_player(pg, job) for pg, job in zip(pages, jobs)]
    assert meeting.peak == 2, (meeting.peak, meeting.refusals)
    for s in stats:
        assert s["state"] == "ended", s
        assert s["samplesReceived"] == FRAMES * 1024 and s["samplesPlayed"] == s["samplesReceived"]
        assert s["underruns"] == 0 and s["outputPeak"] > 0.01, json.dumps(s)
    for pg in pages:
        pg.context.close()
