"""The app on ZeroGPU's real runtime: the `spaces` package itself (0.51), SPACES_ZERO_GPU=true, a
device API on loopback that answers as ZeroGPU does (tests/support/zerogpu_device.py), and a CPU build of
torch let through spaces' two CUDA steps by tests/support/app_child.py alone. Through it, in headless
Chromium and through the API: gapless streaming, a long text's segments made in one call, Stop within a frame, while queued for a GPU and
during a cold start, a closed tab while queued, a reference voice, an Eval batch and a re-cut,
the visitor's X-IP-Token on every schedule, asks that fit a free quota, ZeroGPU's refusals as one
line each, several visitors' calls at once, no CUDA in the main process, spaces' auto-wrap off.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import soundfile as sf
from tests.support.app_fixtures import ARTIFACTS, PLAYER_ENDED, args, browser, fixed_seed, free_port, set_number, start_process, stop_process  # noqa: F401
from tests.support.hold_fixtures import ENDLESS_SEED, HANG_S
from tests.support.zerogpu_device import ILLEGAL, NO_GPU, QUEUE_TIMEOUT, QUOTA, DeviceApi, spaces_app_command, spaces_env, wait_until

from gepard_demo.ui.page.voice import example_voices

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.forks]

# A JWT-shaped X-IP-Token (spaces reads its payload): what Hugging Face's page sends for a visitor.
TOKEN = "eyJhbGciOiJub25lIn0.eyJ1c2VyIjoidmlzaXRvciJ9.c2lnbmF0dXJl"
COLD_START_S = 2.0  # each fresh worker's start, as CUDA init and the weights' transfer take


@pytest.fixture(scope="module")
def device_api():
    api = DeviceApi()
    yield api
    api.close()


@pytest.fixture(scope="module")
def spaces_app(device_api, tiny_cache_dir, tmp_path_factory):
    work = tmp_path_factory.mktemp("spaces-app")
    log, port = work / "app.log", free_port()
    # SPACES_GRADIO_AUTO_WRAP on, as a Space may set it: the app must turn it off.
    env = spaces_env(device_api, work, tiny_cache_dir, SPACES_GRADIO_AUTO_WRAP="true",
                     GEPARD_TEST_COLD_START_S=str(COLD_START_S))
    proc = start_process(spaces_app_command(port, "--public"), port, log, env, cwd=work, timeout=180)
    try:
        yield f"http://127.0.0.1:{port}", log
    finally:
        stop_process(proc)
    text = log.read_text()
    assert "Low-level CUDA init" not in text and "OutsideGpuCall" not in text, text[-3000:]


@pytest.fixture
def page(browser, spaces_app):
    context = browser.new_context(viewport={"width": 1280, "height": 1000}, extra_http_headers={"X-IP-Token": TOKEN})
    pg = context.new_page()
    errors = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(spaces_app[0] + "/", wait_until="load")
    pg.wait_for_function("() => window.gepardPlayer && document.querySelector('#gepard-generate')", timeout=60_000)
    yield pg
    context.close()
    assert not errors, errors


def generate(page, text: str, max_frames: int, seed: int = 7) -> str:
    page.fill("#gepard-text textarea", text)
    set_number(page, "gepard-max-frames", max_frames)
    set_number(page, "gepard-stop-threshold", 0.99)  # the tiny model's stop head: the whole budget
    fixed_seed(page, seed)
    page.click("#gepard-generate")
    page.wait_for_function("() => window.gepardPlayer.stats.jobId")
    return page.evaluate("window.gepardPlayer.stats.jobId")


def ended(page, job: str, timeout_ms: int = 120_000) -> dict:
    return page.wait_for_function(PLAYER_ENDED, arg=job, timeout=timeout_ms).json_value()


def status(page) -> str:
    return page.inner_text("#gepard-status")


def api_client(url: str, token: str | None = TOKEN):
    from gradio_client import Client

    return Client(url, verbose=False, headers={"X-IP-Token": token} if token else None)


def api_args(text: str = "Hello from ZeroGPU.", seed: int = 7, max_frames: int = 20) -> list:
    return args("", text=text, stop_threshold=0.99, seed=seed, max_frames=max_frames, silence_ms=0)


def test_start_up_under_spaces_reports_and_touches_no_gpu(spaces_app, device_api):
    log = spaces_app[1].read_text()
    line = next(x for x in log.splitlines() if x.startswith("Start-up: "))
    assert re.search(r"device cuda \(NVIDIA H200.*\) · torch 2\.13\.0\S* \(CUDA build 13\.0\) · driver .* · ZeroGPU", line), line
    assert device_api.paths()[0] == "/startup-report"  # although the app never calls gr.Blocks.launch
    assert "Warm-up" not in log and "Low-level CUDA init" not in log  # nothing ran the model in the main process


def test_generate_streams_without_a_gap_asks_what_fits_and_carries_the_token(page, device_api):
    before = len(device_api.schedules())
    job = generate(page, "The weather is sunny today, with a light breeze from the west.", 80)
    stats = ended(page, job)
    assert stats["state"] == "ended" and stats["underruns"] == 0, stats
    assert stats["samplesReceived"] == stats["samplesPlayed"] == 80 * 1024
    page.wait_for_function("() => document.querySelector('#gepard-status')?.innerText.startsWith('Done')")
    (schedule,) = device_api.schedules()[before:]
    assert schedule["token"] == TOKEN  # the visitor's quota is the one charged
    assert int(schedule["durationSeconds"]) <= 30  # a sentence: well inside a free visitor's quota
    assert "GPU calls" in page.inner_text("#gepard-stats")
    wait_until(lambda: any(r.get("fail") == "false" for r in device_api.releases()[-1:]), 30, "the call's release")
    # Spaces' Gradio auto-wrap is off: a click that needs no GPU (Stop, nothing running) schedules nothing.
    n, before_click = len(device_api.schedules()), status(page)
    page.click("#gepard-stop")
    page.wait_for_function("(s) => document.querySelector('#gepard-status')?.innerText !== s", arg=before_click)
    assert len(device_api.schedules()) == n


def test_stop_ends_the_gpu_call_within_a_frame(page, device_api):
    job = generate(page, "This one never ends by itself on the GPU.", 4096, seed=ENDLESS_SEED)
    page.wait_for_function("() => window.gepardPlayer.stats.state === 'playing'", timeout=60_000)
    released = len(device_api.releases())
    page.click("#gepard-stop")
    assert ended(page, job, 15_000)["state"] == "stopped"
    page.wait_for_function("() => document.querySelector('#gepard-status')?.innerText.startsWith('Stopped')",
                           timeout=15_000)
    wait_until(lambda: len(device_api.releases()) > released, HANG_S, "the GPU released after Stop")
    assert ended(page, generate(page, "And a short one.", 12))["state"] == "ended"  # the worker is free


def test_stop_while_queued_for_a_gpu_answers_at_once_and_the_call_ends_at_its_first_step(page, device_api):
    device_api.hold_next_queue()
    job = generate(page, "Waiting in ZeroGPU's queue.", 4096, seed=ENDLESS_SEED)
    assert device_api.queued.wait(30)
    page.click("#gepard-stop")  # answered with no GPU in sight: the queue is held until released below
    assert ended(page, job, 15_000)["state"] == "stopped"
    page.wait_for_function("() => document.querySelector('#gepard-status')?.innerText.startsWith('Stopped')",
                           timeout=15_000)
    assert "as soon as ZeroGPU starts it" in status(page)
    released = len(device_api.releases())
    device_api.release_queue()  # a GPU comes: the call starts and ends at its first step
    wait_until(lambda: len(device_api.releases()) > released, 30, "the stopped call's release")


def test_stop_during_a_cold_start(page, device_api):
    device_api.fresh_next = True  # a fresh worker: /allow, then its (emulated) CUDA init and weights
    allows = len([p for p in device_api.paths() if p == "/allow"])
    job = generate(page, "Stopped while the worker starts.", 4096, seed=ENDLESS_SEED)
    wait_until(lambda: len([p for p in device_api.paths() if p == "/allow"]) > allows, 60, "the worker's /allow")
    released = len(device_api.releases())
    page.click("#gepard-stop")
    assert ended(page, job, 15_000)["state"] == "stopped"
    page.wait_for_function("() => document.querySelector('#gepard-status')?.innerText.startsWith('Stopped')",
                           timeout=15_000)
    wait_until(lambda: len(device_api.releases()) > released, COLD_START_S + 30, "the call's release after its start")


def test_a_closed_tab_leaves_zerogpus_queue(browser, spaces_app, device_api):
    context = browser.new_context(extra_http_headers={"X-IP-Token": TOKEN})
    pg = context.new_page()
    pg.goto(spaces_app[0] + "/", wait_until="load")
    pg.wait_for_function("() => window.gepardPlayer && document.querySelector('#gepard-generate')", timeout=60_000)
    device_api.hold_next_queue()
    allows = len([p for p in device_api.paths() if p == "/allow"])
    generate(pg, "Left before a GPU came.", 4096, seed=ENDLESS_SEED)
    assert device_api.queued.wait(30)
    context.close()
    assert device_api.queue_closed.wait(HANG_S)  # spaces sees the visitor gone at its next ping
    assert len([p for p in device_api.paths() if p == "/allow"]) == allows  # no GPU was taken for it


def test_a_reference_voice_is_prepared_on_the_gpu_and_used(page):
    page.get_by_text("Voice and guidance").click()
    page.set_input_files("#gepard-ref-audio input[type=file]", example_voices()[0])
    page.wait_for_function("() => (document.querySelector('#gepard-ref-status')?.innerText || '').includes('Reference ready')",
                           timeout=90_000)
    assert "prepared on the GPU" in page.inner_text("#gepard-ref-status")
    assert ended(page, generate(page, "Say it in this voice.", 20, seed=5))["state"] == "ended"


def test_a_take_recuts_through_a_gpu_call(page):
    assert ended(page, generate(page, "Where would a lower threshold have stopped this take?", 60, seed=11))["state"] == "ended"
    page.wait_for_selector("#gepard-ab-plot .gepard-pstop", timeout=30_000)
    p = json.loads(page.get_attribute("#gepard-ab-plot .gepard-pstop", "data-pstop"))["traces"][0]["p"]
    t = round(max(0.01, np.floor(max(p[1:31]) * 100) / 100 - 0.01), 2)
    set_number(page, "gepard-recut-threshold", t)
    page.click("#gepard-recut")
    page.wait_for_function("() => document.querySelector('#gepard-recut-note')?.innerText.includes('Re-cut of take')",
                           timeout=60_000)


def test_an_eval_batch_runs_in_a_gpu_call(page):
    page.get_by_role("tab", name="Eval").click()
    set_number(page, "eval-max-frames", 16)
    page.fill("#eval-limit input", "3")
    page.click("#eval-run")
    page.wait_for_function("() => /corpus WER/i.test(document.querySelector('#eval-summary')?.innerText || '')",
                           timeout=180_000)


def test_a_long_text_is_one_call_making_its_segments_together(spaces_app, device_api):
    """Three text segments of 50 frames each: one GPU call (three, one a segment, before issue 34)
    through spaces' worker, its segments rows of one batch, asking for that batch."""
    text = " ".join(f"Sentence number {k} says a few more words about the weather." for k in range(1, 15))
    before = len(device_api.schedules())
    client = api_client(spaces_app[0])
    try:
        result = client.predict(*api_args(text, seed=5, max_frames=50), api_name="/generate")
    finally:
        client.close()
    schedules = device_api.schedules()[before:]
    assert len(schedules) == 1 and schedules[0]["token"] == TOKEN, schedules
    assert result[0].startswith("Done"), result[0]
    assert "| frames | 150 (budget 50 per text segment, 3 segments) |" in result[2]
    assert f"| GPU calls | 1 ({int(schedules[0]['durationSeconds'])} s asked;" in result[2]
    audio, _ = sf.read(result[1], dtype="float32")
    assert len(audio) == 150 * 1024  # every segment's frames, each once


def ended_how(job) -> str:
    try:
        return f"answered {job.result(timeout=5)!r:.300}"
    except Exception as e:  # noqa: BLE001 - the refusal or failure is what the message reports
        return f"raised {e!r:.500}"


REFUSALS = [
    (QUOTA, TOKEN, "Your ZeroGPU quota for today is used up ("),
    (QUOTA, None, "No GPU for visitors who are not logged in right now"),
    (ILLEGAL, TOKEN, "more GPU time than one ZeroGPU call may take"),
    (QUEUE_TIMEOUT, TOKEN, "No GPU was free within 60 s"),
    (NO_GPU, TOKEN, "No GPU was available for this Space just now"),
    (None, TOKEN, "could not cross to the page (PicklingError)"),  # a worker's item that cannot be pickled
]


@pytest.mark.parametrize("answer,token,line", REFUSALS, ids=["quota", "quota-anonymous", "illegal", "queue-timeout",
                                                              "no-gpu", "unpicklable"])
def test_refusals_are_one_clear_line(spaces_app, device_api, answer, token, line):
    from gradio_client.exceptions import AppError

    if answer is not None:
        device_api.script.append(answer)
    text = "Hello from ZeroGPU." if answer is not None else "UNPICKLABLE, says the test."
    with pytest.raises(AppError) as err:
        api_client(spaces_app[0], token).predict(*api_args(text), api_name="/generate")
    message = str(err.value)
    assert line in message, message
    assert "<" not in message and "\n" not in message.strip() and "Error(" not in message, message
    if "left today" in line:
        assert "12 s left today" in message


def registry_load(url: str) -> dict:
    """What the page's job registry holds (GET /gepard/load): Generates running, finished kept."""
    import httpx

    return httpx.get(url + "/gepard/load", timeout=10).json()


def test_several_visitors_calls_run_at_once(spaces_app, device_api):
    # Both visitors come from 127.0.0.1, as every earlier test's did: a Generate of theirs still
    # counted as running would take one of this address's two places and refuse a visitor here.
    # Every earlier Generate has ended or been stopped; one still running is a leak, said as one.
    wait_until(lambda: registry_load(spaces_app[0])["running"] == 0, 30, "the earlier tests' Generates ending")
    clients = [api_client(spaces_app[0]) for _ in range(2)]
    jobs = [c.submit(*api_args("Two visitors at once.", seed=ENDLESS_SEED, max_frames=4096), api_name="/generate")
            for c in clients]

    def both_running() -> bool:
        for j in jobs:  # one that ended (refused, failed) will never hold a call: say how it ended
            assert not j.done(), f"a visitor's Generate ended before both calls ran: {ended_how(j)}"
        return len(device_api.active) >= 2

    try:
        try:
            wait_until(both_running, 90, "both visitors' GPU calls")
        except AssertionError as e:
            raise AssertionError(f"{e}; calls active: {len(device_api.active)}; registry: "
                                 f"{registry_load(spaces_app[0])}; the app's log ends:\n"
                                 f"{spaces_app[1].read_text()[-3000:]}") from None
        assert device_api.peak_active >= 2  # each its own call, at the same time
    finally:
        for c, j in zip(clients, jobs):
            j.cancel()
            c.close()
    wait_until(lambda: not device_api.active, 60, "both calls released")
