"""Captions in a real headless Chromium: the words under the player, the word being spoken lit on
the player's own clock (live, then in the finished audio), a click on a word playing from it, the
take's SRT and VTT. The page streams a Piper recording whose words sit between silences of known
length (alignment_fixtures), so what is lit at a time must be the word whose samples are there."""

from __future__ import annotations

import pytest
from tests.support.alignment_fixtures import WORD_GAPS, WORDS, PiperCodec, aligner, spoken  # noqa: F401  (aligner: fixture)
from tests.support.app_fixtures import ARTIFACTS, PLAYER_ENDED, browser, serve_in_thread, set_number  # noqa: F401,F811  (fixtures)

from gepard_demo.settings import StreamSettings
from gepard_demo.host_settings import BatchingSettings

pytestmark = [pytest.mark.slow, pytest.mark.browser]

SPEECH = spoken(WORDS, WORD_GAPS)
CODEC = PiperCodec(SPEECH.audio)
SLACK_S = 0.15  # the aligner's edges (within 0.1 s) and the worklet's 46 ms progress reports


@pytest.fixture(scope="module")
def page_url(tiny_engine, aligner, tmp_path_factory):  # noqa: F811
    from gepard_demo.ui.hosts.model_host import ModelHost
    from gepard_demo.ui.server import build_app

    host = ModelHost(tiny_engine, CODEC, requested="tiny").batch(BatchingSettings(max_batch=1, codec_batching=False))
    stream = StreamSettings(first_chunk_frames=10, chunk_frames=10, fade_ms=20.0)
    demo = build_app(host, stream=stream, wav_dir=tmp_path_factory.mktemp("wavs-captions-browser"),
                     captions=aligner.settings)
    with serve_in_thread(demo.app, "demo-captions-browser") as port:
        yield f"http://127.0.0.1:{port}"


def _owners(t: float, slack: float = SLACK_S) -> set[int]:
    """The words whose samples are playing at t, give or take `slack` (empty in a silence), from
    where they were put (two, near the gap between them)."""
    return {i for i, (start, end) in enumerate(SPEECH.edges) if start - slack <= t <= end + slack}


def _passed_over(i: int, stalls: list, slack: float = SLACK_S) -> bool:
    """Word i was said wholly while the page did not run (captions.js stalls): it could not be lit."""
    start, end = SPEECH.edges[i]
    return any(a - slack <= start and end <= b + slack for a, b, _ in stalls)


def test_words_follow_the_voice_and_a_click_plays_from_a_word(browser, page_url):
    context = browser.new_context(viewport={"width": 1280, "height": 1100})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(page_url + "/", wait_until="load")
    page.wait_for_function("() => window.gepardPlayer && window.gepardCaptions && document.querySelector('#gepard-generate')",
                           timeout=60_000)
    page.fill("#gepard-text textarea", SPEECH.text)
    set_number(page, "gepard-max-frames", CODEC.frames)
    set_number(page, "gepard-stop-threshold", 0.99)
    page.click("#gepard-generate")
    page.wait_for_function("() => window.gepardPlayer.stats.jobId")
    job_id = page.evaluate("window.gepardPlayer.stats.jobId")
    # Live: the words are there while the stream plays, and lit as they are heard.
    page.wait_for_function("() => document.querySelectorAll('#gepard-captions .gepard-w').length === 8", timeout=60_000)
    played = page.wait_for_function(PLAYER_ENDED, arg=job_id, timeout=60_000).json_value()
    # Ended once its last sample was rendered; heard until the output has played it out.
    page.wait_for_function("() => window.gepardPlayer.heardSeconds() === null", timeout=30_000)
    live = page.evaluate("window.gepardCaptions.stats.highlights")
    arrivals = page.evaluate("window.gepardCaptions.stats.arrivals")
    assert [i for _, i, _ in live] == sorted(i for _, i, _ in live)  # in order
    # Lit when its samples were heard: the time since the first sample reached the output (the
    # player's firstPlayAt, from the worklet's frame clock; no gap, so no pause in between).
    assert played["underruns"] == 0, played
    heard = [((now - played["firstPlayAt"]) / 1000, i) for _, i, now in live]
    assert all(i in _owners(t, SLACK_S + 0.1) for t, i in heard), [(t, i) for t, i in heard if i not in _owners(t, SLACK_S + 0.1)]
    # Which words light live depends on the machine's speed, not on a count: a segment's words
    # arrive once its audio is complete and aligned, and on a slow host the first of them have
    # been heard by then. Each word heard after its words arrived is lit; none heard wholly
    # before is (the page could not know it yet).
    # A loaded host can also stall the page itself past a word (its stalls): none of those is lit.
    lit = {i for _, i in heard}
    stalls = page.evaluate("window.gepardCaptions.stats.stalls")
    for i, (start, end) in enumerate(SPEECH.edges):
        came = next(now for now, known in arrivals if known > i)
        came_s = (came - played["firstPlayAt"]) / 1000  # on the same heard clock as the words
        if start >= came_s + SLACK_S:
            assert i in lit or _passed_over(i, stalls), (i, SPEECH.edges[i], came_s, heard, stalls)
        if end <= came_s - SLACK_S:
            assert i not in lit, (i, SPEECH.edges[i], came_s, heard)
    assert page.inner_text("#gepard-captions").split() [:8] == WORDS
    assert "8 of 8 words aligned" in page.inner_text("#gepard-captions .gepard-words-note")
    # The finished audio: a click on "nine" plays the full WAV from where "nine" is said.
    page.wait_for_selector("#gepard-audio a[href*='gradio_api/file=']", state="attached", timeout=30_000)
    page.wait_for_selector("#gepard-captions a[href$='.srt']", timeout=30_000)
    page.click("#gepard-captions .gepard-w[data-i='4']")
    page.wait_for_function("() => window.gepardCaptions.audio && window.gepardCaptions.audio.currentTime > 0.2 + "
                           "Number(document.querySelector(\"#gepard-captions .gepard-w[data-i='4']\").dataset.seek)",
                           timeout=20_000)
    seconds, url = page.evaluate("window.gepardCaptions.stats.plays")[-1]
    assert abs(seconds - SPEECH.edges[4][0]) <= SLACK_S and job_id in url
    page.wait_for_function("() => window.gepardCaptions.stats.highlights.some(([t, i]) => i >= 5)", timeout=20_000)
    after = page.evaluate("window.gepardCaptions.stats.highlights")[len(live):]
    since = live[-1][2] if live else 0  # after the live stream's last word
    stalls = [s for s in page.evaluate("window.gepardCaptions.stats.stalls") if s[2] > since]
    assert after and all(i in _owners(t) for t, i, _ in after), after
    # From "nine", or the first word after it the page did not stall over.
    assert after[0][1] >= 4 and all(_passed_over(i, stalls) for i in range(4, after[0][1])), (after, stalls)
    # ...and played from its first word, the finished audio lights every word in turn, each at its
    # place on the media clock, whatever was lit live.
    # (Paused first: what lights from here on is the replay's.)
    page.evaluate("window.gepardCaptions.audio.pause()")
    done, clicked_at = page.evaluate("[window.gepardCaptions.stats.highlights.length, performance.now()]")
    page.click("#gepard-captions .gepard-w[data-i='0']")
    page.wait_for_function("(n) => window.gepardCaptions.stats.highlights.slice(n).some(([t, i]) => i === 7)"
                           " || window.gepardCaptions.audio.ended", arg=done, timeout=30_000)
    replay = [(t, i) for t, i, _ in page.evaluate("window.gepardCaptions.stats.highlights")[done:]]
    assert all(i in _owners(t) for t, i in replay), replay
    # Each word in turn, but for those said while the page stalled (a loaded host).
    stalls = [s for s in page.evaluate("window.gepardCaptions.stats.stalls") if s[2] >= clicked_at]
    order = [i for _, i in replay]
    assert order == sorted(set(order)), replay  # in turn, once each
    assert all(_passed_over(i, stalls) for i in range(8) if i not in order), (replay, stalls)
    # The take: its WAV, SRT and VTT side by side.
    page.wait_for_function("() => document.querySelector('#gepard-take-files')?.innerText.includes('.vtt')",
                           timeout=30_000)
    files = page.inner_text("#gepard-take-files")
    assert ".wav" in files and ".srt" in files and ".vtt" in files
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "captions_browser.png"), full_page=True)
    context.close()
    assert not errors, errors
