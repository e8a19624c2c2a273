"""The app across ZeroGPU's process boundary, in headless Chromium: `python app.py --zerogpu
emulate`, a real process whose GPU calls run in a worker forked from it (arguments and yields
pickled, as `spaces.GPU` runs them; gepard_demo/zerogpu/forked.py). The page streams with no
gaps, Stop stops, a reference voice is prepared in a GPU call and then used, and an Eval smoke
run completes (bounded, as on a public Space). Any state that would have to cross the boundary
in memory fails here: the worker's writes never reach the page's process, and the model refuses
to run outside a GPU call.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf
from tests.support.app_fixtures import browser, free_port, set_number, start_process, stop_process  # noqa: F401  (fixtures)
from tests.support.hold_fixtures import ENDLESS_SEED

from gepard_demo.ui.page.voice import example_voices

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.forks]
ROOT = Path(__file__).resolve().parents[2]

PLAYER_DONE = """(jobId) => {
  const p = window.gepardPlayer;
  const s = p.history.find((h) => h.jobId === jobId) || (p.stats.jobId === jobId ? p.stats : null);
  return s && ['ended', 'stopped', 'failed', 'error'].includes(s.state) ? s : null;
}"""


@pytest.fixture(scope="module")
def emulated_app(tiny_cache_dir, tmp_path_factory):
    work = tmp_path_factory.mktemp("zerogpu-app")  # the Eval tab's runs/ go here
    log = work / "app.log"
    port = free_port()
    env = {**os.environ, "GEPARD_CACHE_DIR": str(tiny_cache_dir)}
    # tests/support/app_child.py: app.py with the tests' hooks (a request seeded ENDLESS_SEED never ends)
    proc = start_process([sys.executable, str(ROOT / "tests" / "support" / "app_child.py"), "--model", "tiny", "--zerogpu", "emulate",
                          "--public", "--port", str(port)], port, log, env, cwd=work)
    try:
        yield f"http://127.0.0.1:{port}", log
    finally:
        stop_process(proc)
    text = log.read_text()
    assert "OutsideGpuCall" not in text and "Traceback" not in text, text[-3000:]


@pytest.fixture
def page(browser, emulated_app):
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    pg = context.new_page()
    errors = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(emulated_app[0] + "/", wait_until="load")  # not networkidle: the page keeps a heartbeat open (its gr.State)
    pg.wait_for_function("() => window.gepardPlayer && document.querySelector('#gepard-generate') && document.querySelector('#gepard-recut')", timeout=60_000)
    yield pg
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def generate(page, text: str, max_frames: int, seed: int | None = None) -> dict:
    page.fill("#gepard-text textarea", text)
    set_number(page, "gepard-max-frames", max_frames)
    set_number(page, "gepard-stop-threshold", 0.99)  # the tiny model's stop head: run the whole budget
    if seed is not None:
        page.uncheck("#gepard-random-seed input")
        page.wait_for_function("() => !document.querySelector('#gepard-seed input').disabled")
        page.fill("#gepard-seed input", str(seed))
        page.locator("#gepard-seed input").blur()
    page.click("#gepard-generate")
    page.wait_for_function("() => window.gepardPlayer.stats.jobId")
    return page.evaluate("window.gepardPlayer.stats.jobId")


def wait_player(page, job_id: str, timeout_ms: int = 90_000) -> dict:
    return page.wait_for_function(PLAYER_DONE, arg=job_id, timeout=timeout_ms).json_value()


def test_the_page_streams_from_the_gpu_worker_without_gaps(page, emulated_app):
    log = emulated_app[1].read_text()
    assert "Start-up: device cpu · torch " in log and " · driver " in log and "GPU calls: forked" in log
    assert "Warm-up" not in log  # nothing runs the model in the main process
    assert "forked worker process" in page.inner_text("#gepard-banner")
    stats = wait_player(page, generate(page, "The weather is sunny today, across the boundary.", 80))
    assert stats["state"] == "ended", stats
    assert stats["samplesReceived"] == stats["samplesPlayed"] == 80 * 1024
    assert stats["underruns"] == 0 and stats["outputPeak"] > 0.01
    page.wait_for_function("() => document.querySelector('#gepard-status')?.innerText.startsWith('Done')")
    assert "80" in page.inner_text("#gepard-stats")  # frames: the worker's stats reached the page


def test_stop_ends_the_gpu_call(page):
    job = generate(page, "This one never ends by itself on the GPU.", 4000, seed=ENDLESS_SEED)
    page.wait_for_function("() => window.gepardPlayer.stats.state === 'playing'", timeout=60_000)
    page.click("#gepard-stop")
    assert wait_player(page, job)["state"] == "stopped"
    page.wait_for_function("() => document.querySelector('#gepard-status')?.innerText.startsWith('Stopped')",
                           timeout=15_000)
    # The call ended and the worker is free: a short request plays to the end.
    assert wait_player(page, generate(page, "And a short one.", 12, seed=3))["state"] == "ended"


def test_a_reference_voice_is_prepared_on_the_gpu_and_then_used(page, emulated_app):
    url, _ = emulated_app
    plain_job = generate(page, "Say it in this voice.", 20, seed=5)
    assert wait_player(page, plain_job)["state"] == "ended"
    plain = _full_audio(page, url)
    page.get_by_text("Voice and guidance").click()
    page.set_input_files("#gepard-ref-audio input[type=file]", example_voices()[0])
    page.wait_for_function("() => (document.querySelector('#gepard-ref-status')?.innerText || '').includes('Reference ready')",
                           timeout=90_000)
    assert "prepared on the GPU" in page.inner_text("#gepard-ref-status")
    cloned_job = generate(page, "Say it in this voice.", 20, seed=5)
    assert wait_player(page, cloned_job)["state"] == "ended"
    cloned = _full_audio(page, url, not_src=plain[1])
    assert len(cloned[0]) == len(plain[0]) == 20 * 1024 and not np.allclose(cloned[0], plain[0])


def _full_audio(page, url: str, not_src: str | None = None) -> tuple[np.ndarray, str]:
    """The full-audio player's WAV, fetched from its download link as a person's browser would."""
    link = "#gepard-audio a[href*='gradio_api/file=']"
    page.wait_for_function("([sel, old]) => { const a = document.querySelector(sel); return a && a.href !== old; }",
                           arg=[link, not_src or ""], timeout=30_000)
    src = page.get_attribute(link, "href")
    data = httpx.get(src if src.startswith("http") else url + src, timeout=30).content
    return sf.read(io.BytesIO(data), dtype="float32")[0], src


def test_an_eval_smoke_run_completes_and_a_big_one_is_refused(page):
    page.get_by_role("tab", name="Eval").click()
    page.fill("#eval-limit input", "0")  # all of `smoke` is 6 utterances: within the public bound
    set_number(page, "eval-max-frames", 2000)
    page.click("#eval-run")
    page.get_by_text("more than this public page runs").first.wait_for(timeout=30_000)
    set_number(page, "eval-max-frames", 16)
    page.fill("#eval-limit input", "3")
    page.click("#eval-run")
    page.wait_for_function("() => /corpus WER/i.test(document.querySelector('#eval-summary')?.innerText || '')",
                           timeout=180_000)
    summary = page.inner_text("#eval-summary")
    assert "Failures" in summary and "catastrophic" in summary  # the failure table, in the tab
    # A failed row plays: the tiny model's noise fails every utterance.
    page.locator("#eval-failed input").click()
    page.get_by_role("option").first.click()
    page.wait_for_selector("#eval-failed-audio audio", state="attached", timeout=30_000)
