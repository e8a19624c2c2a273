"""The page's saved voices in headless Chromium: save the reference under a name, pick it back (its
clip in the reference box), delete it; on a public page each visitor's voices are theirs alone,
tested with two browser contexts (two visitors); locally one library, the server's folder."""

from __future__ import annotations

import secrets

import pytest
import soundfile as sf
from app_fixtures import PLAYER_ENDED, LiveDemo, browser, serve_in_thread, set_number, tiny_codec  # noqa: F401
from test_app_page import last_job, open_page
from test_speaker_prefix import voice_like

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
        visitors = list((folder / "visitors").iterdir())
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
        a.keyboard.press("ArrowDown")
        a.keyboard.press("Enter")
        _status(a, "its 4.0 s clip is the reference now")
        a.wait_for_function("() => document.querySelector('#gepard-ref-status')?.innerText.includes('Reference ready')",
                            timeout=60_000)
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
        assert _choices(a) == [] and VoiceLibrary(visitors[0]).voices() == []
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


def test_locally_the_page_and_the_server_share_one_library(tiny_engine, tiny_codec, tmp_path):  # noqa: F811
    from gepard_demo.ui.page.saved_voices import VisitorVoices

    local = VisitorVoices(SavedVoiceSettings(tmp_path, per_visitor=False))
    assert local.folder(None) == tmp_path and local.folder("anything") == tmp_path
    public = VisitorVoices(SavedVoiceSettings(tmp_path, per_visitor=True))
    from gepard_demo.voice.library import VoiceError

    with pytest.raises(VoiceError):  # a public page never falls back to the shared library
        public.folder(None)
    assert public.voices("../../etc") == [] and public.delete(None, "x") is False
    assert not (tmp_path / "visitors").exists()  # asking made no folder


def test_a_public_page_bounds_its_visitors_and_their_voices(tmp_path, monkeypatch):
    """A flood of first saves cannot fill the disk: a visitor past MAX_VISITORS, or a voice past
    VOICES_PER_VISITOR, is refused naming why, and nothing is written."""
    import numpy as np

    from gepard_demo.ui.page import saved_voices
    from gepard_demo.ui.page.saved_voices import VisitorVoices
    from gepard_demo.voice.library import VoiceError

    class Prefixes:  # what a page's PageVoices gives: a prefix with its seconds
        def prefix(self, ref_audio):
            from types import SimpleNamespace

            import torch

            return SimpleNamespace(tokens=torch.zeros(8, 16), seconds=4.0)

    monkeypatch.setattr(saved_voices, "MAX_VISITORS", 2)
    monkeypatch.setattr(saved_voices, "VOICES_PER_VISITOR", 2)
    public = VisitorVoices(SavedVoiceSettings(tmp_path, per_visitor=True))
    clip = (22050, voice_like(4.0, seed=3))
    tokens = [secrets.token_urlsafe(32) for _ in range(3)]
    for t in tokens[:2]:
        public.save(t, Prefixes(), clip, "One", "rec")
    with pytest.raises(VoiceError, match="2 visitors"):
        public.save(tokens[2], Prefixes(), clip, "One", "rec")
    public.save(tokens[0], Prefixes(), clip, "Two", "rec")
    with pytest.raises(VoiceError, match="limit reached"):
        public.save(tokens[0], Prefixes(), clip, "Three", "rec")
    assert len(list((tmp_path / "visitors").iterdir())) == 2
    assert sorted(v.name for v in public.voices(tokens[0])) == ["One", "Two"]
    assert np.isfinite(public.clip(tokens[1], "One")[1]).all()
