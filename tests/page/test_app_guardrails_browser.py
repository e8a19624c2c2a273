"""The derailment guardrails on the page, in headless Chromium against the real app (issue 33): the
controls in the Sampling group, a force-stopped take that says so (stats, takes table, A/B diff),
its settings JSON whose synth line carries the guardrails, "use A's settings" putting them back,
both takes' entropy traces in the A/B plot, and a re-cut of a force-stopped take."""

from __future__ import annotations

import json
import urllib.request

import pytest
from tests.support.app_fixtures import browser, live_demo, set_number, tiny_codec  # noqa: F401  (fixtures)
from tests.page.test_app_takes import ROWS, generate, open_page, pick, plot_data, prepare

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def _fill(page, elem_id: str, text: str) -> None:
    box = page.locator(f"#{elem_id} input, #{elem_id} textarea").first
    box.fill(text)
    box.press("Enter")
    box.blur()


def test_a_force_stopped_take_says_so_everywhere_and_comes_back(browser, live_demo):  # noqa: F811
    ctx, page, errors = open_page(browser, live_demo.url)
    try:
        page.click("#gepard-guardrails button, #gepard-guardrails .label-wrap")  # open the sub-group
        prepare(page, "A guarded take.", 60, seed=9)
        set_number(page, "gepard-repetition-penalty", 1.3)
        _fill(page, "gepard-force-stop", "25")
        generate(page)
        page.wait_for_function(ROWS, arg=1)
        stats = page.inner_text("#gepard-stats")
        assert "force-stopped" in stats and "frames 0-9:" in stats, stats
        table = page.inner_text("#gepard-takes")
        assert "force stop at 25" in table and "1.3" in table, table
        # The settings JSON's synth line makes it again, guardrails included.
        page.wait_for_function("() => document.querySelectorAll('#gepard-take-files a').length >= 2")
        links = page.locator("#gepard-take-files a")
        href = next(h for h in (links.nth(i).get_attribute("href") for i in range(links.count())) if ".json" in h)
        doc = json.loads(urllib.request.urlopen(href if href.startswith("http") else live_demo.url + href).read())
        assert "--repetition-penalty 1.3" in doc["synth"] and "--force-stop-frames 25" in doc["synth"]
        assert doc["sampling"]["force_stop_frames"] == 25 and len(doc["entropy"]) == 25
        # A second take without the guards: the diff marks them, the A/B plot has both entropy traces.
        set_number(page, "gepard-repetition-penalty", 1.0)
        _fill(page, "gepard-force-stop", "off")
        generate(page)
        page.wait_for_function(ROWS, arg=2)
        page.wait_for_function("() => document.querySelector('#gepard-take-diff')?.innerText.includes('take #1')")
        diff = page.inner_text("#gepard-take-diff")
        assert "force_stop_frames ◀" in diff and "repetition_penalty ◀" in diff, diff
        data = plot_data(page, "#gepard-ab-plot")
        assert [len(t["h"]) for t in data["traces"]] == [60, 25]  # B ran to its budget, A was force-stopped
        assert page.locator("#gepard-ab-plot polyline.gepard-entropy").count() == 2
        # "Use A's settings" with A = take #1 puts the guards back.
        pick(page, "gepard-take-a", 1)
        page.wait_for_function("() => document.querySelector('#gepard-take-diff')?.innerText.includes('A: take #1')")
        page.click("#gepard-use-a")
        page.wait_for_function("() => document.querySelector('#gepard-force-stop input')?.value === '25'", timeout=10_000)
        assert float(page.input_value("#gepard-repetition-penalty input[type=number]")) == 1.3
        # A force-stopped take re-cuts at any lower threshold: here it runs to the same force stop.
        page.wait_for_function("() => document.querySelector('#gepard-recut-note')?.innerText.includes('force-stopped at 25')"
                               " || document.querySelector('#gepard-recut-note')?.innerText.includes('every threshold')",
                               timeout=10_000)
    finally:
        ctx.close()
    assert not errors, errors
