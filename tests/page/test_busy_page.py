"""A busy page keeps serving (issue 36), on the real app (tiny, 4 places) through gradio_client
and a headless Chromium: many visitors' Generates one after another are all answered, finished
jobs' audio stays under its memory bound, a listener for a dropped job is answered at once, one
visitor cannot take every place, and the page and the API refuse with the same line.

Visitors are told apart by address: each client here is named by the X-Forwarded-For it sends
through 127.0.0.1, a trusted proxy (app_fixtures.client_at); a page in Chromium and a plain Client
are both 127.0.0.1 itself."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from tests.support.app_fixtures import (  # noqa: F401  (fixtures)
    VISITOR_ADDRESSES, LiveDemo, args, browser, client_at, new_id, serve_in_thread, set_number, tiny_codec,
)
from tests.support.hold_fixtures import endless, wait_until, within  # noqa: F401  (fixture)

from gepard_demo.host_settings import BatchingSettings, TrafficSettings

pytestmark = pytest.mark.slow

KEEP_BYTES = 2**20  # finished jobs' audio kept, small here so that 200 short Generates overflow it
PER_CLIENT = "this address already has 2 Generates running, the most one address may run at once"


@pytest.fixture(scope="module")
def busy_demo(tiny_engine, tiny_codec, tmp_path_factory):  # noqa: F811
    from app import DEMO_STREAM
    from gepard_demo.ui.hosts.model_host import ModelHost
    from gepard_demo.ui.server import build_app

    host = ModelHost(tiny_engine, tiny_codec, requested="tiny").batch(BatchingSettings(max_batch=4, admission="cap"))
    demo = build_app(host, stream=DEMO_STREAM, wav_dir=tmp_path_factory.mktemp("wavs-busy"),
                     traffic=TrafficSettings.for_batch(4, keep_audio_bytes=KEEP_BYTES))
    with serve_in_thread(demo.app, "busy-demo") as port:
        yield LiveDemo(f"http://127.0.0.1:{port}", port, demo)
    host.scheduler.close()


class Sampler(threading.Thread):
    """Polls the registry: the most audio bytes it kept for finished jobs."""

    def __init__(self, registry):
        super().__init__(daemon=True)
        self.registry, self.peak_bytes, self.stop = registry, 0, threading.Event()

    def run(self):
        while not self.stop.is_set():
            self.peak_bytes = max(self.peak_bytes, self.registry.load()["kept_bytes"])
            time.sleep(0.005)


def test_ten_visitors_200_generates_all_answered_and_memory_bounded(busy_demo):
    """The issue's lock-out: any 64 Generates within a minute refused every further one. Ten
    visitors, each making 20 Generates one after another, are all answered now, and the finished
    jobs' audio the registry keeps never passes its bound (it overflows it many times over)."""
    from gradio_client.exceptions import AppError

    registry = busy_demo.demo.registry
    sampler = Sampler(registry)
    sampler.start()
    answers: dict[str, list[str]] = {a: [] for a in VISITOR_ADDRESSES}

    def visitor(address: str) -> None:
        client = client_at(busy_demo.url, address)
        try:
            for i in range(20):
                try:
                    status = client.predict(*args(new_id(), max_frames=10, seed=i), api_name="/generate")[0]
                except AppError as exc:
                    status = f"refused: {exc.message}"
                answers[address].append(status)
        finally:
            client.close()

    t0 = time.monotonic()
    threads = [threading.Thread(target=visitor, args=(a,)) for a in VISITOR_ADDRESSES]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    wall = time.monotonic() - t0
    sampler.stop.set()
    sampler.join()
    statuses = [s for a in VISITOR_ADDRESSES for s in answers[a]]
    assert len(statuses) == 200
    # One after another, no visitor ever runs two at once: the fairness rule never applies either.
    assert all(s.startswith("Done") for s in statuses), sorted(set(s[:160] for s in statuses))
    load = registry.load()
    assert sampler.peak_bytes <= KEEP_BYTES and load["kept_bytes"] <= KEEP_BYTES
    assert load["dropped"].get("memory", 0) > 100, load  # the bound was reached, and held
    assert load["running"] == 0
    assert httpx.get(f"{busy_demo.url}/gepard/load", timeout=30).json() == registry.load()  # what a benchmark reads
    print(f"200 Generates from 10 visitors in {wall:.0f} s; kept at most {sampler.peak_bytes} bytes; {load}")


def test_a_late_listener_for_a_dropped_job_is_answered_at_once(busy_demo):
    """No listener came for the first job (an API client reads the WAV instead); a second,
    longer one pushes it out of the memory bound. A listener that comes now is told so at once
    (before, it waited for a Generate that would never come)."""
    from gradio_client import Client

    client = Client(busy_demo.url, verbose=False)
    first = new_id()
    assert client.predict(*args(first, max_frames=10), api_name="/generate")[0].startswith("Done")
    assert busy_demo.demo.registry.get(first) is not None  # kept for a late listener
    big = 2 * KEEP_BYTES // (4 * 1024)  # frames whose audio alone is twice the bound
    assert client.predict(*args(new_id(), max_frames=big, stop_threshold=0.99), api_name="/generate")[0].startswith("Done")
    client.close()
    r = httpx.get(f"{busy_demo.url}/gepard/pcm/{first}", timeout=60)  # a hang would end here, failing
    assert r.status_code == 410, r.text
    assert "its audio was dropped to keep the finished jobs' audio under 1 MB" in r.json()["detail"]
    assert httpx.get(f"{busy_demo.url}/gepard/queue/{first}", timeout=60).json()["state"] == "gone"


def test_a_visitor_is_its_address_or_the_one_a_trusted_proxy_names(busy_demo):
    """The per-client rule's identity: the peer's address, unless the peer is a trusted proxy
    (127.0.0.1 here): then the visitor its X-Forwarded-For names. A peer that is not trusted
    cannot pass for someone else."""
    job_id = new_id()
    with httpx.Client(base_url=busy_demo.url, transport=httpx.HTTPTransport(local_address="127.0.0.2"),
                      headers={"X-Forwarded-For": "198.51.100.7"}, timeout=60) as c:  # Gradio's REST protocol
        event = c.post("/gradio_api/call/generate", json={"data": args(job_id, max_frames=5)}).json()["event_id"]
        with c.stream("GET", f"/gradio_api/call/generate/{event}") as r:
            body = "".join(r.iter_text())
    assert "event: complete" in body, body
    assert busy_demo.demo.registry.get(job_id).client == "127.0.0.2"
    job_id = new_id()
    proxied = client_at(busy_demo.url, "198.51.100.7")
    proxied.predict(*args(job_id, max_frames=5), api_name="/generate")
    proxied.close()
    assert busy_demo.demo.registry.get(job_id).client == "198.51.100.7"


def _stop_all(client, job_ids, demo) -> None:
    for job_id in job_ids:
        assert client.predict(job_id, api_name="/stop") == "Stopping…"
    within(lambda: demo.host.scheduler.load()["running"] == 0)


def test_one_visitor_cannot_take_every_place(busy_demo, endless):  # noqa: F811
    """A script sends five Generates that never end at once; another visitor comes after. The
    script gets two places, its other three are refused at once with the fairness rule's line,
    and the other visitor is answered while the script's two still run."""
    from gradio_client.exceptions import AppError

    script, visitor = client_at(busy_demo.url, "203.0.113.101"), client_at(busy_demo.url, "203.0.113.102")
    ids = [new_id() for _ in range(5)]
    jobs = [script.submit(*args(i, seed=endless), api_name="/generate") for i in ids]
    scheduler = busy_demo.demo.host.scheduler
    try:
        wait_until(lambda: sum(j.done() for j in jobs) == 3, what="three of the script's Generates refused")
        for j in (j for j in jobs if j.done()):
            with pytest.raises(AppError) as err:
                j.result()
            assert err.value.message.startswith(f"Cannot start: {PER_CLIENT}"), err.value.message
        status = visitor.predict(*args(new_id(), max_frames=10), api_name="/generate")[0]
        assert status.startswith("Done"), status
        assert scheduler.load()["running"] == 2 and sum(j.done() for j in jobs) == 3  # the script's two run on
    finally:
        _stop_all(script, [i for i, j in zip(ids, jobs) if not j.done()], busy_demo.demo)
        script.close()
        visitor.close()


@pytest.mark.browser
def test_the_page_and_the_api_refuse_with_the_same_line(browser, busy_demo, endless):  # noqa: F811
    """Chromium's page and a plain Client are the same visitor (127.0.0.1): with two of its
    Generates running, a third is refused on the page with the very line the API answers."""
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    client = Client(busy_demo.url, verbose=False)
    ids = [new_id() for _ in range(2)]
    jobs = [client.submit(*args(i, seed=endless), api_name="/generate") for i in ids]
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    try:
        wait_until(lambda: busy_demo.demo.registry.load()["running"] == 2, what="two Generates running")
        with pytest.raises(AppError) as err:
            client.predict(*args(new_id(), max_frames=10), api_name="/generate")
        line = err.value.message
        assert line.startswith(f"Cannot start: {PER_CLIENT}"), line
        page = context.new_page()
        page.goto(busy_demo.url + "/", wait_until="load")
        page.wait_for_function("() => window.gepardPlayer && document.querySelector('#gepard-generate')",
                               timeout=60_000)
        set_number(page, "gepard-max-frames", 10)
        page.click("#gepard-generate")
        page.get_by_text(line, exact=True).first.wait_for(timeout=30_000)
        # The stream the click opened ended with the refusal, rather than waiting for a Generate that never comes.
        page.wait_for_function("() => !window.gepardPlayer.isPlaying()", timeout=30_000)
    finally:
        context.close()
        _stop_all(client, [i for i, j in zip(ids, jobs) if not j.done()], busy_demo.demo)
        client.close()
