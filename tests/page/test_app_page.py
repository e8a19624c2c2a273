"""The page as a person sees it, in headless Chromium: layout on desktop and phone, the
controls' states, feedback for every click, the wait line, errors, dark mode, the Eval tab.

One browser for the module; each test opens its own context (viewport / colour scheme).
"""

from __future__ import annotations

import secrets
import time

import pytest
from tests.support.app_fixtures import PLAYER_ENDED, args, browser, flood_listeners, live_demo, set_number, tiny_codec  # noqa: F401  (fixtures)
from tests.support.hold_fixtures import endless  # noqa: F401  (fixture)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

ENDED = PLAYER_ENDED


def open_page(browser, url, width=1280, height=900, dark=False):
    context = browser.new_context(viewport={"width": width, "height": height},
                                  color_scheme="dark" if dark else "light")
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url + ("/?__theme=dark" if dark else "/"), wait_until="load")  # not networkidle: the page keeps a heartbeat open (its gr.State)
    page.wait_for_function("() => window.gepardPlayer && window.gepardPage && document.querySelector('#gepard-generate') && document.querySelector('#gepard-recut')", timeout=60_000)
    return context, page, errors


def box(page, sel):
    return page.locator(sel).first.bounding_box()




def last_job(page):
    page.wait_for_function("() => window.gepardPlayer.stats.jobId")
    return page.evaluate("window.gepardPlayer.stats.jobId")


def test_layout_controls_and_keyboard(browser, live_demo):
    ctx, page, errors = open_page(browser, live_demo.url)
    try:
        # Desktop: the results sit beside the text, not below every control.
        text, results = box(page, "#gepard-text"), box(page, "#gepard-results")
        assert results["x"] > text["x"] + text["width"] - 5 and results["y"] < text["y"] + text["height"]
        # Random weights: the banner is one line that expands, and the default budget is short.
        assert box(page, "#gepard-banner")["height"] < 90
        assert "random weights" in page.inner_text("#gepard-banner")
        assert page.input_value("#gepard-max-frames input[type=number]") == "64"
        # Seed box off while "random seed" is ticked; lookback off in exact mode.
        seed = page.locator("#gepard-seed input")
        assert page.is_checked("#gepard-random-seed input") and seed.is_disabled()
        page.uncheck("#gepard-random-seed input")
        page.wait_for_function("() => !document.querySelector('#gepard-seed input').disabled")
        page.get_by_text("Streaming", exact=True).click()
        assert page.locator("#gepard-lookback input[type=number]").is_disabled()
        page.locator("#gepard-decode-mode").get_by_text("lookback").click()
        page.wait_for_function("() => !document.querySelector('#gepard-lookback input[type=number]').disabled")
        # Live character count against the limit.
        page.fill("#gepard-text textarea", "x" * 2001)
        page.wait_for_function("() => document.querySelector('#gepard-charcount').dataset.over === '1'")
        assert "2001 / 2000" in page.inner_text("#gepard-charcount")
        # Ctrl+Enter generates; while the stream still plays after generation, it says so.
        page.fill("#gepard-text textarea", "Keyboard start.")
        set_number(page, "gepard-stop-threshold", 0.99)  # the whole budget: 64 frames, 3 s of audio
        page.press("#gepard-text textarea", "Control+Enter")
        job = last_job(page)
        page.wait_for_function("() => document.querySelector('#gepard-player-status').innerText.startsWith('Generated, playing')",
                               timeout=30_000)
        assert page.evaluate("document.body.classList.contains('gepard-playing')")  # full player held back
        stats = page.wait_for_function(ENDED, arg=job, timeout=30_000).json_value()
        assert stats["state"] == "ended" and stats["samplesReceived"] == 64 * 1024
        page.wait_for_function("() => document.querySelector('#gepard-status').innerText.startsWith('Done')")
        assert not page.evaluate("document.body.classList.contains('gepard-playing')")
        # An error greys the old results and is titled by what went wrong.
        page.fill("#gepard-text textarea", "   ")
        page.click("#gepard-generate")
        page.get_by_text("Text not accepted: Please enter some text").first.wait_for(timeout=15_000)
        assert page.evaluate("document.querySelector('#gepard-results').classList.contains('gepard-stale')")
        # The Eval tab has no placeholder table headed 1 2 3.
        page.get_by_role("tab", name="Eval").click()
        headers = page.locator("#component-0 th, table th").all_inner_texts()
        assert not {"1", "2", "3"} <= {h.strip() for h in headers}
    finally:
        ctx.close()
    assert not errors, errors


def test_phone_layout_and_dark_plot(browser, live_demo):
    ctx, page, errors = open_page(browser, live_demo.url, width=390, height=844, dark=True)
    try:
        button, results = box(page, "#gepard-generate"), box(page, "#gepard-results")
        assert button["y"] + button["height"] <= 844  # Generate is on the first screen, no scrolling
        assert page.evaluate("window.scrollY") == 0
        assert 0 <= results["y"] - (button["y"] + button["height"]) < 160  # right under the button (and its live line)
        assert box(page, "#gepard-examples")["y"] > results["y"]  # the examples follow
        assert box(page, "#gepard-banner")["height"] < 844 / 6
        set_number(page, "gepard-max-frames", 10)
        page.click("#gepard-generate")
        job = last_job(page)
        page.wait_for_function(ENDED, arg=job, timeout=30_000)
        page.wait_for_selector("#gepard-plot svg", timeout=15_000)
        # The plot draws in the page's colours: light text on the dark page.
        rgb = page.evaluate("getComputedStyle(document.querySelector('#gepard-plot svg text')).fill")
        assert sum(int(x) for x in rgb[rgb.index("(") + 1:rgb.index(")")].split(",")[:3]) > 3 * 150, rgb
    finally:
        ctx.close()
    assert not errors, errors


def test_after_a_flood_and_behind_a_queue_every_click_answers(browser, live_demo, endless):
    flood_listeners(live_demo.url)
    # The flood's clients are gone; the server frees their slots once it sees each hang-up
    # (under CI load that can lag the client: the page's own stream was then refused, 8 per
    # client, and retried, so the click took 5 s).
    registry, deadline = live_demo.demo.registry, time.monotonic() + 10
    while registry.open_listeners() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert registry.open_listeners() == 0
    ctx, page, errors = open_page(browser, live_demo.url)
    other = first = None
    try:
        # The flood held nothing: a click's stream is let in (a full listener table refuses it:
        # the player's state would be 'error') and plays to its end.
        set_number(page, "gepard-max-frames", 10)
        page.click("#gepard-generate")
        stats = page.wait_for_function(ENDED, arg=last_job(page), timeout=60_000).json_value()
        assert stats["state"] == "ended" and stats["samplesPlayed"] == stats["samplesReceived"] > 0, stats
        # Someone else's long request runs; this page's click waits, says so in words, and
        # Stop while waiting cancels at once.
        from gradio_client import Client

        other = Client(live_demo.url, verbose=False)
        first = secrets.token_hex(16)
        running = other.submit(*args(first, text="Someone else talks forever.", stop_threshold=0.99, seed=endless,
                                     max_frames=4000, fade_ms=0, silence_ms=0), api_name="/generate")
        deadline = time.monotonic() + 20
        while live_demo.demo.registry.get(first) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        page.click("#gepard-generate")
        job = last_job(page)
        page.wait_for_function("() => document.querySelector('#gepard-player-status').innerText.startsWith('Waiting: 1 request ahead')",
                               timeout=10_000)
        assert len(live_demo.demo.blocks._queue) == 1  # this page's click, behind the running one
        assert "about" in page.inner_text("#gepard-player-status")
        t0 = time.monotonic()
        page.click("#gepard-stop")
        # The request ahead never ends, so without Stop neither would happen: the timeouts guard
        # a hang only (30 s: the page's round trips, player, Gradio's queue, the status, took
        # 3.5 s under .ci/slowed.sh beside another worker, and more once in a whole slowed suite).
        assert page.wait_for_function(ENDED, arg=job, timeout=30_000).json_value()["state"] == "stopped"
        page.wait_for_function("() => document.querySelector('#gepard-status').innerText.includes('had not started')",
                               timeout=30_000)
        assert time.monotonic() - t0 < 30
        # ...and it left Gradio's queue too, not only our registry (no dead event waits its turn).
        queue = live_demo.demo.blocks._queue
        deadline = time.monotonic() + 10
        while len(queue) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(queue) == 0
        other.predict(first, api_name="/stop")
        assert running.result(timeout=30)[0].startswith("Stopped")
    finally:
        ctx.close()
        if other is not None and first is not None:  # a failed step must not leave the endless request running
            other.predict(first, api_name="/stop")
    assert not errors, errors


def test_a_reference_is_prepared_when_it_arrives(browser, live_demo, tmp_path):
    """Upload a reference: the page says at once whether it is usable (before any Generate),
    and Generate then finds its prefix computed (a cache hit, no second encoder run)."""
    import numpy as np
    import soundfile as sf
    from tests.support.sound import voice_like

    good, silent = tmp_path / "me.wav", tmp_path / "silent.wav"
    sf.write(good, voice_like(4.5, f0=170.0, seed=11), 22050)
    sf.write(silent, np.zeros(22050 * 4, np.float32), 22050)
    voices = live_demo.demo.controller.voices
    ctx, page, errors = open_page(browser, live_demo.url)
    try:
        page.get_by_text("Voice and guidance", exact=True).click()
        page.locator("#gepard-ref-audio input[type=file]").set_input_files(str(good))
        page.wait_for_function("() => document.querySelector('#gepard-ref-status')?.innerText.includes('Reference ready')",
                               timeout=60_000)
        status = page.inner_text("#gepard-ref-status")
        assert "4.5 s" in status, status
        prefixer = voices._prefixer
        misses, hits = prefixer.misses, prefixer.hits
        set_number(page, "gepard-max-frames", 10)
        page.click("#gepard-generate")
        assert page.wait_for_function(ENDED, arg=last_job(page), timeout=60_000).json_value()["state"] == "ended"
        # the player can finish before the handler's last update reaches the status line
        page.wait_for_function("() => document.querySelector('#gepard-status').innerText.startsWith('Done')",
                               timeout=15_000)
        assert (prefixer.misses, prefixer.hits) == (misses, hits + 1)  # prepared on upload, used as is

        page.locator("#gepard-ref-audio button[aria-label='Clear']").first.click()
        page.wait_for_function("() => !document.querySelector('#gepard-ref-status')?.innerText.includes('Reference ready')")
        page.locator("#gepard-ref-audio input[type=file]").set_input_files(str(silent))
        page.wait_for_function("() => document.querySelector('#gepard-ref-status')?.innerText.includes('not usable')",
                               timeout=60_000)
        assert "silent" in page.inner_text("#gepard-ref-status").lower()
        assert not errors, errors
    finally:
        ctx.close()


def test_an_out_of_range_number_is_named_not_silently_clamped(browser, live_demo):
    """Gradio clamps a typed number to the slider's range on blur; the page says so, naming the
    field and the range, and the note goes once the value is in range again."""
    ctx, page, errors = open_page(browser, live_demo.url)
    try:
        frames = page.locator("#gepard-max-frames input[type=number]")
        frames.fill("99999")
        note = page.locator("#gepard-max-frames .gepard-range-note")
        note.wait_for(timeout=5_000)
        assert note.inner_text() == ("Max frames per text segment: 99999 is above the maximum 4096 "
                                     "(range 1 to 4096); it is set to 4096.")
        frames.blur()
        page.wait_for_function("() => document.querySelector('#gepard-max-frames input[type=number]').value === '4096'")
        assert note.is_visible()  # still says what happened after the clamp
        temp = page.locator("#gepard-temperature input[type=number]")
        temp.fill("0")
        assert "below the minimum 0.05" in page.locator("#gepard-temperature .gepard-range-note").inner_text()
        frames.fill("100")
        assert note.count() == 0
        assert page.locator(".gepard-range-note").count() == 1  # the temperature's, until it is fixed
    finally:
        ctx.close()
    assert not errors, errors
