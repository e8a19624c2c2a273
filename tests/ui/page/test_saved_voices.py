"""The page's saved voices outside a browser (gepard_demo/ui/page/saved_voices.py): whose library
an event reaches, the public page's bounds (visitors, voices each) and what a refused save, a look
or a delete leaves on disk, the visitors' lasting secret, a deleted voice's clip in Gradio's cache.
The page itself, in Chromium: tests/page/test_app_saved_voices.py."""

from __future__ import annotations

import os
import secrets
import stat
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from tests.support.sound import voice_like

from gepard_demo.ui.page import saved_voices
from gepard_demo.ui.page.saved_voices import SECRET_FILE, SavedVoiceSettings, VisitorVoices, visitor_secret
from gepard_demo.voice.library import VoiceError, VoiceLibrary

CLIP = (22050, voice_like(4.0, seed=3))


class Prefixes:
    """What a page's PageVoices gives: a prefix with its seconds (the compressor is not the subject)."""

    def __init__(self):
        self.made = 0

    def prefix(self, ref_audio):
        self.made += 1
        return SimpleNamespace(tokens=torch.zeros(8, 16), seconds=4.0)


def _token() -> str:
    return secrets.token_urlsafe(32)


def _visitor_dirs(folder) -> list[str]:
    visitors = folder / "visitors"
    return sorted(p.name for p in visitors.iterdir() if p.is_dir()) if visitors.is_dir() else []


def test_locally_the_page_and_the_server_share_one_library(tmp_path):
    local = VisitorVoices(SavedVoiceSettings(tmp_path, per_visitor=False))
    assert local.folder(None) == tmp_path and local.folder("anything") == tmp_path
    public = VisitorVoices(SavedVoiceSettings(tmp_path, per_visitor=True))
    with pytest.raises(VoiceError):  # a public page never falls back to the shared library
        public.folder(None)
    assert public.voices("../../etc") == [] and public.delete(None, "x") is False
    assert not (tmp_path / "visitors").exists()  # asking made no folder


def test_a_token_is_matched_whole(tmp_path):
    public = VisitorVoices(SavedVoiceSettings(tmp_path, per_visitor=True))
    token = _token()
    public.folder(token)
    for bad in (token + "\n", token + " ", "\n" + token, token[:31]):
        with pytest.raises(VoiceError):
            public.folder(bad)


def test_a_public_page_bounds_its_visitors_and_their_voices(tmp_path, monkeypatch):
    """A flood of first saves cannot fill the disk: a visitor past MAX_VISITORS, or a voice past
    VOICES_PER_VISITOR, is refused naming why, and nothing is written."""
    monkeypatch.setattr(saved_voices, "MAX_VISITORS", 2)
    monkeypatch.setattr(saved_voices, "VOICES_PER_VISITOR", 2)
    public = VisitorVoices(SavedVoiceSettings(tmp_path, per_visitor=True))
    tokens = [_token() for _ in range(3)]
    for t in tokens[:2]:
        public.save(t, Prefixes(), CLIP, "One", "rec")
    with pytest.raises(VoiceError, match="2 visitors") as err:
        public.save(tokens[2], Prefixes(), CLIP, "One", "rec")
    assert err.value.field == "visitor"
    public.save(tokens[0], Prefixes(), CLIP, "Two", "rec")
    with pytest.raises(VoiceError, match="limit reached"):
        public.save(tokens[0], Prefixes(), CLIP, "Three", "rec")
    assert len(_visitor_dirs(tmp_path)) == 2
    assert sorted(v.name for v in public.voices(tokens[0])) == ["One", "Two"]
    assert np.isfinite(public.clip(tokens[1], "One")[1]).all()


def test_refused_saves_make_no_folder_and_take_no_place(tmp_path, monkeypatch):
    """A save refused for its name, consent or audio, from fresh tokens, makes no folder; so a
    flood of them leaves every place free for the next real visitor (issue 62: 192 such saves took
    all 200 places before)."""
    monkeypatch.setattr(saved_voices, "MAX_VISITORS", 3)
    public = VisitorVoices(SavedVoiceSettings(tmp_path, per_visitor=True))
    prefixes = Prefixes()
    refusals = [("bad/name", "rec", CLIP), ("Fine", "", CLIP), ("Fine", "x" * 300, CLIP), ("Fine", "rec", None),
                ("Fine", "rec", (22050, np.zeros(22050 * 4, np.float32)))]
    for _ in range(4):
        for name, consent, clip in refusals:
            with pytest.raises(VoiceError):
                public.save(_token(), prefixes, clip, name, consent)
    assert _visitor_dirs(tmp_path) == [] and prefixes.made == 0  # and no compressor run for any
    for _ in range(3):  # every place is still free
        public.save(_token(), prefixes, CLIP, "Mine", "rec")
    assert len(_visitor_dirs(tmp_path)) == 3


def test_looking_makes_no_folder(tmp_path):
    public = VisitorVoices(SavedVoiceSettings(tmp_path, per_visitor=True))
    token = _token()
    assert public.voices(token) == [] and public.delete(token, "Mine") is False
    with pytest.raises(VoiceError):
        public.clip(token, "Mine")
    assert _visitor_dirs(tmp_path) == []


def test_a_visitors_last_voice_deleted_frees_their_place(tmp_path, monkeypatch):
    monkeypatch.setattr(saved_voices, "MAX_VISITORS", 1)
    public = VisitorVoices(SavedVoiceSettings(tmp_path, per_visitor=True))
    first, second = _token(), _token()
    public.save(first, Prefixes(), CLIP, "One", "rec")
    public.save(first, Prefixes(), CLIP, "Two", "rec")
    with pytest.raises(VoiceError, match="1 visitors"):
        public.save(second, Prefixes(), CLIP, "Mine", "rec")
    assert public.delete(first, "one") and len(_visitor_dirs(tmp_path)) == 1  # one voice left: kept
    assert public.delete(first, "TWO") and _visitor_dirs(tmp_path) == []  # the last: the folder goes
    public.save(second, Prefixes(), CLIP, "Mine", "rec")
    assert [v.name for v in public.voices(second)] == ["Mine"]


def test_an_empty_folder_left_behind_takes_no_place(tmp_path, monkeypatch):
    """Folders an older version left empty (or a crash between mkdir and write) count for nothing."""
    monkeypatch.setattr(saved_voices, "MAX_VISITORS", 1)
    for i in range(5):
        (tmp_path / "visitors" / f"{i:032x}").mkdir(parents=True)
    public = VisitorVoices(SavedVoiceSettings(tmp_path, per_visitor=True))
    public.save(_token(), Prefixes(), CLIP, "Mine", "rec")


def test_the_visitors_secret_is_made_once_readable_by_its_owner_and_kept(tmp_path):
    """Gradio's BrowserState key: the operator's when given, else one file beside the voices made
    once (0600), read by every later start: a restart keeps every browser's token readable."""
    key = visitor_secret(tmp_path)
    path = tmp_path / SECRET_FILE
    assert len(key) >= 32 and path.read_text() == key
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert visitor_secret(tmp_path) == key  # a restart reads it back
    assert VisitorVoices(SavedVoiceSettings(tmp_path, per_visitor=True)).secret == key
    assert VisitorVoices(SavedVoiceSettings(tmp_path, True, secret="operator's")).secret == "operator's"
    assert visitor_secret(tmp_path / "other") != key


def test_the_box_holding_a_voices_clip_is_recognised(tmp_path):
    """Deleting a voice clears the reference box when it holds that voice's clip (as the box hands
    it back, maybe as 16-bit PCM), and leaves any other reference alone."""
    public = VisitorVoices(SavedVoiceSettings(tmp_path, per_visitor=True))
    token = _token()
    public.save(token, Prefixes(), CLIP, "Mine", "rec")
    rate, clip = public.clip(token, "Mine")
    pcm16 = (rate, np.round(clip * 32767).astype(np.int16))
    assert public.is_clip(token, "Mine", (rate, clip)) and public.is_clip(token, "MINE", pcm16)
    assert not public.is_clip(token, "Mine", (rate, clip[1:])) and not public.is_clip(token, "Mine", None)
    assert not public.is_clip(_token(), "Mine", (rate, clip))


def test_a_page_library_is_the_folder_the_server_reads(tmp_path):
    local = VisitorVoices(SavedVoiceSettings(tmp_path, per_visitor=False))
    local.save(None, Prefixes(), CLIP, "Narrator", "rec")
    assert [v.name for v in VoiceLibrary(tmp_path).voices()] == ["Narrator"]
    assert local.delete(None, "narrator") and tmp_path.is_dir()  # the shared folder stays
