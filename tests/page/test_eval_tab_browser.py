"""The Eval tab in headless Chromium against the real app: comparing runs (table, forest plot,
regressions played side by side), "Open in the demo" making a row again as a take whose frames
are the row's, and the blind listening test answered, reloaded and resumed.

Two real runs of one set, scored with Whisper: Piper (real speech, the base) and the tiny Gepard
with a reference voice, guidance and its own sampling settings (noise: worse everywhere).
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import urllib.request

import numpy as np
import pytest
import soundfile as sf
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from tests.support.app_fixtures import ARTIFACTS, LiveDemo, browser, serve_in_thread, tiny_codec  # noqa: F401  (fixtures)
from tests.support.sound import voice_like

from eval.runs.run import done_rows

pytestmark = [pytest.mark.slow, pytest.mark.browser]

SET = [{"id": "hello", "text": "Hello there, how are you today?", "category": "casual"},
       {"id": "numbers", "text": "Call me at nine thirty on Monday.", "category": "numbers"}]
BASE, NEW = "piper-base", "gepard-new"
TAKE_LISTED = "(n) => (document.querySelector('#gepard-take-a input')?.value || '').startsWith('#' + n + ' ')"


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_engine, tiny_codec):  # noqa: F811
    from eval.engines.local import GepardLocal
    from eval.engines.piper import PiperReference
    from eval.runs.measure import measure
    from eval.runs.run import RunConfig, run
    from eval.runs.score import score
    from eval.scoring.asr import ASRSettings
    from gepard_demo.settings import SamplingSettings, StreamSettings

    d = tmp_path_factory.mktemp("eval-tab-runs")
    set_file = d / "set.jsonl"
    set_file.write_text("".join(json.dumps(u) + "\n" for u in SET))
    voice = d / "voice.wav"
    sf.write(voice, voice_like(3.0, 22050, f0=120.0, seed=3), 22050, subtype="PCM_16")
    run(RunConfig(engine="piper", model="en_US-joe-medium", set=str(set_file), base_seed=77), d / BASE,
        engine=PiperReference.load(), log=lambda m: None)
    sampling = SamplingSettings(temperature=0.8, top_k=5, stop_threshold=0.45, max_frames=40, cfg_scale=1.5, cfg_frames=6)
    run(RunConfig(engine="local", model="tiny", set=str(set_file), base_seed=77, batch_size=2, sampling=sampling,
                  stream=StreamSettings(first_chunk_frames=4, chunk_frames=9, fade_ms=10.0), ref_audio=str(voice)),
        d / NEW, engine=GepardLocal(tiny_engine, tiny_codec), log=lambda m: None)
    for name in (BASE, NEW):
        score(d / name, ASRSettings(backend="faster-whisper", model="tiny.en"), log=lambda m: None)
        measure(d / name, dnsmos="off", log=lambda m: None)
    return d


@pytest.fixture(scope="module")
def eval_demo(runs, tiny_engine, tiny_codec, tmp_path_factory):  # noqa: F811
    from app import DEMO_STREAM
    from eval.ui.tab import build_eval_tab
    from gepard_demo.host_settings import BatchingSettings
    from gepard_demo.ui.hosts.model_host import ModelHost
    from gepard_demo.ui.server import build_app

    host = ModelHost(tiny_engine, tiny_codec, requested="tiny").batch(BatchingSettings(max_batch=1))
    demo = build_app(host, stream=DEMO_STREAM, wav_dir=tmp_path_factory.mktemp("wavs-eval-tab"),
                     eval_tab=functools.partial(build_eval_tab, runs_dir=runs))
    with serve_in_thread(demo.app, "demo-eval-tab") as port:
        yield LiveDemo(f"http://127.0.0.1:{port}", port, demo)
    host.scheduler.close()


def open_eval(browser, url):  # noqa: F811
    ctx = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url + "/", wait_until="load")
    page.wait_for_function("() => window.gepardPlayer && document.querySelector('#gepard-generate')", timeout=60_000)
    page.get_by_role("tab", name="Eval").click()
    return ctx, page, errors


def choose(page, elem_id: str, option: str) -> None:
    """Pick `option` in a Gradio dropdown as a person would (a multiselect adds it)."""
    box = page.locator(f"#{elem_id} input")
    item = page.locator(f"ul[role=listbox] li[aria-label='{option}']").first
    for attempt in range(3):  # on a loaded host the list may not open on a click that lands mid re-render
        # The list opens on the input's focus event: an input still focused from the last pick
        # (its re-render not yet done on a slow host) would take the click without opening it.
        box.blur()
        box.click()
        box.fill(option)  # filters the list down to it, highlighted
        try:
            item.wait_for(timeout=20_000)
            break
        except PlaywrightTimeout:
            if attempt == 2:
                raise
            page.keyboard.press("Escape")
    box.press("Enter")
    page.keyboard.press("Escape")
    page.wait_for_function("([id, o]) => (document.querySelector('#' + id)?.innerText || '').includes(o)"
                           " || document.querySelector('#' + id + ' input')?.value === o", arg=[elem_id, option])


def wait_text(page, selector: str, needle: str, timeout_ms: int = 30_000) -> str:
    page.wait_for_function("([s, n]) => (document.querySelector(s)?.innerText || '').includes(n)",
                           arg=[selector, needle], timeout=timeout_ms)
    return page.inner_text(selector)


def player_file(page, elem_id: str) -> str:
    """The URL of what a player plays (its download link)."""
    link = f"#{elem_id} a[href*='gradio_api/file=']"
    page.wait_for_selector(link, state="attached", timeout=20_000)
    return page.get_attribute(link, "href")


def fetch(url: str, href: str) -> bytes:
    return urllib.request.urlopen(href if href.startswith("http") else url + href).read()


def test_compare_plays_regressions_and_a_row_opens_in_the_demo_with_its_frames(browser, eval_demo, runs):  # noqa: F811
    ctx, page, errors = open_eval(browser, eval_demo.url)
    try:
        page.get_by_text("Compare runs: per category and per failure").click()
        choose(page, "eval-compare-base", BASE)
        choose(page, "eval-compare-new", NEW)
        page.click("#eval-compare-run")
        out = wait_text(page, "#eval-compare-out", "REGRESSION", 60_000)
        assert "breach" in out and "corpus_wer" in out and "casual" in out and "numbers" in out  # per category
        # The same comparison folder `python -m eval compare` writes.
        data = json.loads((runs / "compare" / f"{BASE}-vs-{NEW}" / "compare.json").read_text())
        assert data["runs"][0]["pairs"] == 2 and any(data["breaches"].values())
        for chart in ("forest", "failures"):
            src = page.wait_for_selector(f"#eval-compare-{chart} img", state="attached", timeout=20_000).get_attribute("src")
            assert fetch(eval_demo.url, src)[:8] == b"\x89PNG\r\n\x1a\n"
        # The worst regression is picked and both sides play.
        page.wait_for_function("() => document.querySelector('#eval-compare-worse input')?.value", timeout=20_000)
        worse = page.input_value("#eval-compare-worse input")
        assert worse.startswith(f"{NEW}: ") and "WER" in worse
        uid = worse.split(": ", 1)[1].split(" ", 1)[0]
        srcs = [player_file(page, f"eval-compare-{s}-audio") for s in ("base", "new")]
        heard = [sf.read(io.BytesIO(fetch(eval_demo.url, s)))[0] for s in srcs]
        wavs = [sf.read(runs / r / "wav" / f"{uid}.wav")[0] for r in (BASE, NEW)]
        assert [len(h) for h in heard] == [len(w) for w in wavs]  # base's and new's own audio, side by side

        # Open the new run's row in the demo: the Speak tab, its text and settings, then a take.
        page.click("#eval-compare-open-new")
        row = next(r for r in done_rows(runs / NEW) if r["id"] == uid)
        page.wait_for_function("(t) => document.querySelector('#gepard-text textarea')?.value === t", arg=row["text"],
                               timeout=20_000)
        assert page.locator("#gepard-generate").is_visible()  # the Speak tab is the one shown
        assert page.input_value("#gepard-seed input") == str(row["seed"])
        assert float(page.input_value("#gepard-temperature input[type=number]")) == 0.8
        page.wait_for_function(TAKE_LISTED, arg=1, timeout=90_000)
        page.wait_for_function("() => [...document.querySelectorAll('#gepard-take-files a')]"
                               ".some(a => a.href.includes('.codes.npy'))", timeout=20_000)
        hrefs = [a.get_attribute("href") for a in page.locator("#gepard-take-files a").all()]
        take_codes = np.load(io.BytesIO(fetch(eval_demo.url, next(h for h in hrefs if ".codes.npy" in h))))
        row_codes = np.load(runs / NEW / row["codes"])
        assert take_codes.shape == row_codes.shape and np.array_equal(take_codes, row_codes)
        doc = json.loads(fetch(eval_demo.url, next(h for h in hrefs if ".json" in h and ".npy" not in h)))
        assert doc["seed"] == row["seed"] and doc["reference_voice"] is True and (doc["sampling"]["cfg_scale"], doc["sampling"]["cfg_frames"]) == (1.5, 6)
    finally:
        ctx.close()
    assert not errors, errors


def test_listening_test_is_blind_keeps_votes_and_survives_a_reload(browser, eval_demo, runs):  # noqa: F811
    ctx, page, errors = open_eval(browser, eval_demo.url)
    try:
        page.get_by_text("Blind listening test").click()
        choose(page, "eval-listen-runs", BASE)
        choose(page, "eval-listen-runs", NEW)
        page.fill("#eval-listen-session textarea, #eval-listen-session input", "blind1")
        page.fill("#eval-listen-who textarea, #eval-listen-who input", "ann")
        page.click("#eval-listen-start")
        wait_text(page, "#eval-listen-line", "Pair 1 of 2")
        srcs = [player_file(page, f"eval-listen-{s}") for s in "ab"]
        assert not any(BASE in s or NEW in s for s in srcs)  # nothing in the players names the run
        first_text = page.inner_text("#eval-listen-line")
        page.click("#eval-listen-pick-a")
        wait_text(page, "#eval-listen-line", "Pair 2 of 2")

        page.reload(wait_until="load")  # the session and the listener come back; the next pair is asked
        page.wait_for_function("() => document.querySelector('#gepard-generate')", timeout=60_000)
        page.get_by_role("tab", name="Eval").click()
        page.get_by_text("Blind listening test").click()
        wait_text(page, "#eval-listen-line", "Pair 2 of 2 for ann")
        assert page.input_value("#eval-listen-session textarea, #eval-listen-session input") == "blind1"
        assert page.inner_text("#eval-listen-line") != first_text
        page.click("#eval-listen-same")
        wait_text(page, "#eval-listen-line", "all 2 pairs answered")
        report = wait_text(page, "#eval-listen-report", "2 votes from 1 listener")
        assert "Wilson" in report
        votes = [json.loads(x) for x in (runs / "listening" / "blind1" / "votes.jsonl").read_text().splitlines()]
        assert [v["who"] for v in votes] == ["ann", "ann"] and votes[1]["choice"] == "same"

        # An answered pair names its runs, and each side opens in the demo.
        page.click("#eval-listen-done input")
        page.locator("ul[role=listbox] li", has_text=f"pair {votes[0]['pair']}:").first.click()
        side_a = votes[0]["a"]
        page.click("#eval-listen-open-a")
        text = next(u["text"] for u in SET if u["id"] == votes[0]["id"])
        page.wait_for_function("(t) => document.querySelector('#gepard-text textarea')?.value === t", arg=text,
                               timeout=20_000)
        note = wait_text(page, "body", f"{side_a} / {votes[0]['id']}")
        assert note
        page.wait_for_function(TAKE_LISTED, arg=1, timeout=90_000)  # made again as a take
    finally:
        ctx.close()
    assert not errors, errors


@contextlib.contextmanager
def _eval_tab(browser, url: str, width: int):
    """A page at `width` px on the Eval tab: (page, its JavaScript errors so far); closed after."""
    ctx = browser.new_context(viewport={"width": width, "height": 1000})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(url + "/", wait_until="load")
        page.wait_for_function("() => window.gepardPlayer && document.querySelector('#gepard-generate')", timeout=60_000)
        page.get_by_role("tab", name="Eval").click()
        yield page, errors
    finally:
        ctx.close()


@pytest.mark.parametrize("width", [1400, 800])
def test_the_per_utterance_table_keeps_each_header_word_whole(browser, eval_demo, width):  # noqa: F811
    """It broke its headers mid-word at 1400 px ("categ / ory", "stop_f / ired"); now each column is
    headed by a short label of whole words and is as wide as its longest word (as the takes table)."""
    from tests.page.test_app_takes import HEADERS

    from eval.ui.runs_view import TABLE_HEADERS

    with _eval_tab(browser, eval_demo.url, width) as (page, errors):
        page.get_by_text("Earlier runs", exact=True).click()  # the accordion that holds the run picker
        choose(page, "eval-pick", NEW)
        page.get_by_role("button", name="Open", exact=True).click()
        wait_text(page, "#eval-table", "numbers", 60_000)  # the run's rows are in
        heads = page.evaluate(HEADERS, "#eval-table")
        ARTIFACTS.mkdir(exist_ok=True)
        page.locator("#eval-table").screenshot(path=str(ARTIFACTS / f"eval_table_{width}.png"))
    assert not errors, errors
    assert [h["text"] for h in heads] == list(TABLE_HEADERS.values())
    assert not [h for h in heads if h["broken"]], heads


@pytest.fixture(scope="module")
def grid_sweep(eval_demo, runs):
    """A real sweep (2 points, one sentence) made with the page's engine, as the tab makes one."""
    from eval.ui.sweep_section import run_sweep_ui

    form = dict(set_name="smoke", set_file=None, limit=1, batch_size=2, base_seed=5, engine_name="local",
                asr_backend="faster-whisper", asr_model="tiny.en", vad=True, max_frames=12)
    run_sweep_ui(eval_demo.demo.host, runs, "grid", form, {"temperature": "0.5 1.0", "stop_threshold": "0.5"}, "")
    return "grid"


@pytest.mark.parametrize("width", [1400, 800])
def test_the_sweeps_grid_table_keeps_each_header_word_whole(browser, eval_demo, grid_sweep, width):  # noqa: F811
    """The "Grid points" table was headed by its data's names ("duration_ratio_median" broke mid-word);
    now by short labels of whole words, an axis by its control's, each column as wide as its longest word."""
    import re

    from tests.page.test_app_takes import HEADERS

    from eval.ui.sweep_section import SWEEP_COLUMNS, SWEEP_HEADERS

    with _eval_tab(browser, eval_demo.url, width) as (page, errors):
        page.get_by_text(re.compile("^Sweep: ")).click()  # its accordion
        page.get_by_role("button", name="Refresh list").click()  # the sweep was made after the page was built
        choose(page, "eval-sweep-pick", grid_sweep)
        page.click("#eval-sweep-open")
        wait_text(page, "#eval-sweep-table", "median stop lag", 60_000)  # its points are in
        heads = page.evaluate(HEADERS, "#eval-sweep-table")
        ARTIFACTS.mkdir(exist_ok=True)
        page.locator("#eval-sweep-table").screenshot(path=str(ARTIFACTS / f"eval_sweep_table_{width}.png"))
    assert not errors, errors
    texts = [h["text"] for h in heads]
    assert texts[:2] == ["Temperature", "Stop threshold"] and texts[2:] == [SWEEP_HEADERS[c] for c in SWEEP_COLUMNS]
    assert not [h for h in heads if h["broken"]], heads
