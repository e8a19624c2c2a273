"""The page's saved voices in headless Chromium: save the reference under a name, pick it back (its
clip in the reference box), delete it; on a public page each visitor's voices are theirs alone,
tested with two browser contexts (two visitors); locally one library, the server's folder."""

from __future__ import annotations

import os
import secrets
import sys

import httpx
import pytest
import soundfile as sf
from tests.support.app_fixtures import (  # noqa: F401
    PLAYER_ENDED,
    LiveDemo,
    browser,
    free_port,
    serve_in_thread,
    set_number,
    start_process,
    stop_process,
    tiny_codec,
)
from tests.page.test_app_page import last_job, open_page
from tests.support.sound import voice_like

from gepard_demo.ui.page.saved_voices import SavedVoiceSettings
from gepard_demo.voice.library import VoiceLibrary

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def _demo(tiny_engine, tiny_codec, folder, per_visitor, wavs):  # noqa: F811
    from app import DEMO_STREAM
    from gepard_demo.ui.hosts.model_host import ModelHost
    from gepard_demo.ui.server import build_app

    host = ModelHost(tiny_engine, tiny_codec, requested="tiny")
    return build_app(host, stream=DEMO_STREAM, wav_dir=wavs, saved_voices=SavedVoiceSettings(folder, per_visitor))


@pytest.fixture(scope="module")
def public_demo(tiny_engine, tiny_codec, tmp_path_factory):  # noqa: F811
    folder = tmp_path_factory.mktemp("page-voices")
    demo = _demo(tiny_engine, tiny_codec, folder, True, tmp_path_factory.mktemp("wavs-voices"))
    with serve_in_thread(demo.app, "demo-voices") as port:
        yield LiveDemo(f"http://127.0.0.1:{port}", port, demo), folder


def _open_voices(page):
    page.get_by_text("Voice and guidance", exact=True).click()
    page.wait_for_selector("#gepard-saved-voice")


def _choices(page) -> list[str]:
    page.locator("#gepard-saved-voice input").click()
    names = page.locator("ul[role=listbox] li").all_inner_texts()
    page.keyboard.press("Escape")
    # Blurred: Gradio's dropdown redraws new choices only once it has lost the focus.
    page.evaluate("() => document.activeElement?.blur()")
    return [n.strip() for n in names]


def _choices_become(page, want: list[str], timeout_s: float = 30.0) -> list[str]:
    """The picker's choices once they are `want` (the page's load event fills them), else the last seen."""
    import time

    deadline, got = time.monotonic() + timeout_s, []
    while time.monotonic() < deadline:
        got = _choices(page)
        if got == want:
            break
        time.sleep(0.5)
    return got


def _status(page, text: str):
    page.wait_for_function("(t) => document.querySelector('#gepard-saved-voice-status')?.innerText.includes(t)",
                           arg=text, timeout=60_000)


def _save(page, clip, name, consent="rec-1"):
    page.locator("#gepard-ref-audio input[type=file]").set_input_files(str(clip))
    page.wait_for_function("() => document.querySelector('#gepard-ref-status')?.innerText.includes('Reference ready')",
                           timeout=60_000)
    page.fill("#gepard-save-voice-name textarea, #gepard-save-voice-name input", name)
    page.fill("#gepard-save-voice-consent textarea, #gepard-save-voice-consent input", consent)
    page.click("#gepard-save-voice")


def test_a_visitors_saved_voices_are_theirs_alone(browser, public_demo, tmp_path):
    live, folder = public_demo
    clip = tmp_path / "mine.wav"
    sf.write(clip, voice_like(4.0, f0=160.0, seed=21), 22050)
    a_ctx, a, a_errors = open_page(browser, live.url)
    b_ctx, b, b_errors = open_page(browser, live.url)
    try:
        _open_voices(a)
        _save(a, clip, "Mine")
        _status(a, "Saved Mine (4.0 s)")
        assert _choices(a) == ["Mine (4.0 s)"]
        # Visitor A's voice is stored under A's token alone: one visitor folder, holding it.
        visitors = [p for p in (folder / "visitors").iterdir() if p.is_dir()]
        assert len(visitors) == 1 and [v.name for v in VoiceLibrary(visitors[0]).voices()] == ["Mine"]
        # Visitor B (another browser) does not see it, cannot load it, cannot delete it.
        _open_voices(b)
        assert _choices(b) == []
        held = [page.evaluate("() => localStorage.getItem('gepard-visitor')") for page in (a, b)]
        assert all(held) and held[0] != held[1]  # each browser holds its own token (Gradio encrypts it)
        # On the server, a token that is not A's reaches none of A's voices: not to load, not to delete.
        from gepard_demo.ui.page.saved_voices import VisitorVoices
        from gepard_demo.voice.library import VoiceError

        voices = VisitorVoices(SavedVoiceSettings(folder, True))
        stranger = secrets.token_urlsafe(32)
        with pytest.raises(VoiceError):
            voices.clip(stranger, "Mine")
        assert voices.delete(stranger, "Mine") is False and voices.voices(stranger) == []
        assert [v.name for v in VoiceLibrary(visitors[0]).voices()] == ["Mine"]
        # A picks it back: its clip is the reference again, ready for Generate.
        a.reload()
        a.wait_for_function("() => window.gepardPlayer && document.querySelector('#gepard-generate')", timeout=60_000)
        _open_voices(a)
        assert _choices_become(a, ["Mine (4.0 s)"]) == ["Mine (4.0 s)"]  # the browser kept its token
        a.locator("#gepard-saved-voice input").click()
        # The option itself, once the list shows it: keys pressed before a loaded host drew the list pick nothing.
        a.locator("ul[role=listbox] li", has_text="Mine (4.0 s)").click()
        _status(a, "its 4.0 s clip is the reference now")
        a.wait_for_function("() => document.querySelector('#gepard-ref-status')?.innerText.includes('Reference ready')",
                            timeout=60_000)
        clip_url = a.evaluate("() => document.querySelector('#gepard-ref-audio [href*=\"file=\"]')?.href || ''")
        assert clip_url and httpx.get(clip_url, timeout=30).status_code == 200
        # Generate speaks in it, and the take's stats say how close it came (GE2E, named).
        set_number(a, "gepard-max-frames", 10)
        a.click("#gepard-generate")
        assert a.wait_for_function(PLAYER_ENDED, arg=last_job(a), timeout=60_000).json_value()["state"] == "ended"
        a.wait_for_function("() => document.querySelector('#gepard-stats')?.innerText.includes('speaker similarity')",
                            timeout=30_000)
        assert "not the authors' WavLM-SV" in a.inner_text("#gepard-stats")
        # ...and deletes it.
        a.click("#gepard-delete-voice")
        _status(a, "Deleted Mine")
        assert _choices(a) == [] and not visitors[0].exists()  # the last voice took its folder along
        # The deleted voice's clip is gone from the page's cache too: its URL serves nothing now.
        assert httpx.get(clip_url, timeout=30).status_code in (403, 404)
        assert not a_errors and not b_errors, (a_errors, b_errors)
    finally:
        a_ctx.close()
        b_ctx.close()


def test_a_bad_save_names_its_field_and_keeps_nothing(browser, public_demo, tmp_path):
    live, folder = public_demo
    clip = tmp_path / "me.wav"
    sf.write(clip, voice_like(4.0, f0=120.0, seed=5), 22050)
    ctx, page, errors = open_page(browser, live.url)
    try:
        _open_voices(page)
        _save(page, clip, "bad/name")
        _status(page, "Not saved (name)")
        page.fill("#gepard-save-voice-name textarea, #gepard-save-voice-name input", "Fine")
        page.fill("#gepard-save-voice-consent textarea, #gepard-save-voice-consent input", "")
        page.click("#gepard-save-voice")
        _status(page, "Not saved (consent)")
        assert _choices(page) == []
        assert not errors, errors
    finally:
        ctx.close()


def test_a_visitors_voices_outlive_a_restart_of_the_app(browser, tiny_cache_dir, tmp_path):
    """A Space sleeps and wakes: `python app.py --public` stopped and started again on one folder.
    The same browser, reloaded, still reads its token (the key it was encrypted with is kept
    beside the voices) and finds its voice; before, Gradio's key was new each launch and the
    picker came back empty."""
    port, voices = free_port(), tmp_path / "voices"
    clip = tmp_path / "mine.wav"
    sf.write(clip, voice_like(4.0, f0=150.0, seed=8), 22050)
    env = {**os.environ, "GEPARD_MODEL": "tiny", "GEPARD_CACHE_DIR": str(tiny_cache_dir),
           "GRADIO_SERVER_PORT": str(port)}
    env.pop("GEPARD_VISITOR_SECRET", None)
    cmd = [sys.executable, "app.py", "--public", "--no-eval-tab", "--no-captions", "--voices-dir", str(voices)]
    url = f"http://127.0.0.1:{port}"
    proc = start_process(cmd, port, tmp_path / "first.log", env)
    ctx, page, errors = open_page(browser, url)
    try:
        _open_voices(page)
        _save(page, clip, "Mine")
        _status(page, "Saved Mine (4.0 s)")
        held = page.evaluate("() => localStorage.getItem('gepard-visitor')")
        stop_process(proc)
        proc = start_process(cmd, port, tmp_path / "second.log", env)
        page.reload()
        page.wait_for_function("() => window.gepardPlayer && document.querySelector('#gepard-generate')",
                               timeout=60_000)
        # The page's load event has answered once the token is stored again (encrypted anew: a fresh IV).
        page.wait_for_function("(held) => localStorage.getItem('gepard-visitor') !== held", arg=held, timeout=60_000)
        _open_voices(page)
        assert _choices_become(page, ["Mine (4.0 s)"]) == ["Mine (4.0 s)"]
        assert len([p for p in (voices / "visitors").iterdir() if p.is_dir()]) == 1  # the same visitor's folder
        assert not errors, errors
    finally:
        ctx.close()
        stop_process(proc)
