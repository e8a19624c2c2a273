"""The page's saved voices: a picker in the "Voice and guidance" group, over the voice library
(gepard_demo/voice/library.py) the speech server keeps too.

The picker lists the voices with their clip's length; picking one loads its clip into the
reference box (its play button plays it; Generate then speaks in it, the prefix made from the
clip as for any reference). "Save this reference as…" keeps the reference now in the box under a
name, with the speaker's consent record; "Delete" removes the picked voice.

Whose voices. Locally, one library: the folder the server's `--voices-dir` names, so a voice saved
on the page is the server's too. On a public page (a Space), a voice is someone's identity: each
visitor has a library of their own, never listed to, usable by or deletable by another. A visitor
is a random token this page keeps in their browser (Gradio's BrowserState: localStorage), and
their voices live in a folder named by the token's SHA-256; every event finds the library from
the token it is sent, so a visitor who never had a token reaches nobody's voices.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import secrets
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import gradio as gr
from gradio.data_classes import FileData
import numpy as np

from gepard_demo.voice.library import SUFFIX, SavedVoice, VoiceError, VoiceLibrary
from gepard_demo.voice.reference_audio import PageAudio, ReferenceAudioError, page_audio, prepare_reference

if TYPE_CHECKING:
    import torch

TOKEN_RE = re.compile(r"[A-Za-z0-9_-]{32,64}")  # whole-string (fullmatch): no trailing newline slips through
VISITOR_KEY = "gepard-visitor"  # the token's localStorage key (encrypted there by Gradio's BrowserState)
SECRET_FILE = ".visitor-secret"  # beside the voices: the key the visitors' tokens are encrypted with
# A public page's bounds, so a flood of first saves cannot fill the disk: at most this many visitors
# keep voices, each at most this many (a clip is at most 15 s, 1.3 MB: 2.6 GB in all at worst).
MAX_VISITORS = 200
VOICES_PER_VISITOR = 10
RATE = 22050  # a saved clip's rate (the library keeps it at the codec's)


class MadePrefix(Protocol):
    @property
    def tokens(self) -> torch.Tensor: ...  # (K, hidden)

    @property
    def seconds(self) -> float: ...  # the reference's length after trimming


class PageVoices(Protocol):
    """What makes a reference's prefix on this page (voice.PageVoices: here or in a GPU call)."""

    def prefix(self, ref_audio: PageAudio) -> MadePrefix | None: ...


def visitor_secret(folder: Path, given: str | None = None) -> str:
    """The key Gradio's BrowserState encrypts a visitor's token with. Gradio makes a random one
    per launch, so after a restart no browser could read its token and every visitor's voices
    were lost; this one outlives restarts: the operator's (`given`: GEPARD_VISITOR_SECRET), else
    one made once beside the voices (SECRET_FILE, readable by this user alone) and read after.
    The voices and their key live and die together: on a Space, both on its persistent storage."""
    if given:
        return given
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / SECRET_FILE
    with contextlib.suppress(FileExistsError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32))
    for _ in range(50):  # another process may be writing it this instant
        key = path.read_text().strip()
        if key:
            return key
        time.sleep(0.02)
    raise RuntimeError(f"{path} is empty: remove it, or set GEPARD_VISITOR_SECRET")


@dataclass(frozen=True)
class SavedVoiceSettings:
    """folder: the library (the server's --voices-dir); per_visitor: each visitor their own (a
    public page); secret: the visitors' token key (None: visitor_secret's, beside the voices)."""

    folder: Path
    per_visitor: bool
    secret: str | None = None


def _holds_voices(folder: Path) -> bool:
    return folder.is_dir() and any(p.name.endswith(SUFFIX) for p in folder.iterdir())


class VisitorVoices:
    """The libraries the page reaches, one per visitor token on a public page, else one.

    Only a written voice makes a visitor's folder, and their last voice deleted removes it; the
    MAX_VISITORS places count folders holding voices. Every write (a save, a delete and the folder
    it may make or remove) holds one lock for the visitors' folder, a file lock too, so the count
    and the write agree across this page's threads and processes."""

    def __init__(self, settings: SavedVoiceSettings, reserved: tuple[str, ...] = ("default",)):
        self.settings, self.reserved = settings, reserved
        self._lock = threading.Lock()
        self.secret = visitor_secret(Path(settings.folder), settings.secret) if settings.per_visitor \
            else (settings.secret or secrets.token_urlsafe(32))

    def folder(self, token: str | None) -> Path:
        """The library's folder for this visitor (VoiceError on a public page without a valid token)."""
        folder = Path(self.settings.folder)
        if not self.settings.per_visitor:
            return folder
        if not isinstance(token, str) or not TOKEN_RE.fullmatch(token):
            raise VoiceError("this page has no saved voices of yours yet (reload it to get your own library)", "visitor")
        return folder / "visitors" / hashlib.sha256(token.encode()).hexdigest()[:32]

    def library(self, token: str | None) -> VoiceLibrary:
        """The visitor's library (nothing made on disk until a voice is written)."""
        if not self.settings.per_visitor:
            return VoiceLibrary(self.folder(token), reserved=self.reserved)
        return VoiceLibrary(self.folder(token), max_voices=VOICES_PER_VISITOR, reserved=self.reserved)

    def _existing(self, token: str | None) -> VoiceLibrary | None:
        try:
            return self.library(token)
        except VoiceError:
            return None

    def voices(self, token: str | None) -> list[SavedVoice]:
        library = self._existing(token)
        return [] if library is None else library.voices()

    def save(self, token: str | None, voices: PageVoices, ref_audio: PageAudio, name: str, consent: str) -> SavedVoice:
        """The reference now in the box, under `name`: its prefix (made as Generate makes it) and its
        trimmed clip. VoiceError naming the field, nothing saved and no folder made."""
        library = self.library(token)
        name, consent = library.check(name, consent)
        if ref_audio is None:
            raise VoiceError("there is no reference in the box to save: upload or record one first", "ref_audio")
        self._room(library.folder)  # before the costly part; again under the lock
        try:
            samples, rate = page_audio(ref_audio)
            clip = prepare_reference(samples, rate)
            prefix = voices.prefix(ref_audio)
        except ReferenceAudioError as exc:
            raise VoiceError(f"the reference cannot be saved: {exc}", "ref_audio") from exc
        if prefix is None:
            raise VoiceError("there is no reference in the box to save: upload or record one first", "ref_audio")
        with self._writing():
            self._room(library.folder)
            return library.add(name, consent, prefix.tokens.detach().cpu(), clip, prefix.seconds)

    def _room(self, folder: Path) -> None:
        """Refuse a visitor's first voice when MAX_VISITORS others hold voices already."""
        if not self.settings.per_visitor or _holds_voices(folder):
            return
        visitors = folder.parent
        if not visitors.is_dir():
            return
        holding = sum(1 for p in visitors.iterdir() if p != folder and p.is_dir() and _holds_voices(p))
        if holding >= MAX_VISITORS:
            raise VoiceError(f"this page keeps saved voices for {MAX_VISITORS} visitors and has no room for more; "
                             "run the app yourself to keep yours", "visitor")

    def clip(self, token: str | None, name: str) -> tuple[int, np.ndarray]:
        library = self._existing(token)
        if library is None:
            raise VoiceError(f"Unknown voice {name!r}", "voice")
        return RATE, library.clip(name)

    def delete(self, token: str | None, name: str) -> bool:
        """Remove the voice (its folder too when it was the visitor's last)."""
        library = self._existing(token)
        if library is None or library.find(name) is None:
            return False
        with self._writing():
            gone = library.delete(name)
            if self.settings.per_visitor and not _holds_voices(library.folder):
                shutil.rmtree(library.folder, ignore_errors=True)
        return gone

    def is_clip(self, token: str | None, name: str, audio: PageAudio) -> bool:
        """Whether a reference box's value is this voice's clip (as the box hands it back: its
        samples, maybe as 16-bit PCM)."""
        try:
            rate, clip = self.clip(token, name)
            samples, box_rate = page_audio(audio)
        except (VoiceError, ReferenceAudioError):
            return False
        mono = samples if samples.ndim == 1 else samples.mean(axis=1)
        return box_rate == rate and mono.shape == clip.shape and bool(np.max(np.abs(mono - clip), initial=0.0) < 1e-3)

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        visitors = Path(self.settings.folder) / ("visitors" if self.settings.per_visitor else "")
        visitors.mkdir(parents=True, exist_ok=True)
        # Not the library's own ".lock" (locally the same folder): a second flock on it would wait on us.
        with self._lock, open(visitors / ".visitors.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass
class SavedVoicesUI:
    picker: gr.Dropdown
    name: gr.Textbox
    consent: gr.Textbox
    save: gr.Button
    delete: gr.Button
    status: gr.Markdown


def build_saved_voices() -> SavedVoicesUI:
    """The picker and its buttons (inside the "Voice and guidance" group)."""
    picker = gr.Dropdown(choices=[], value=None, label="Saved voices (pick one to load it above)",
                         elem_id="gepard-saved-voice", allow_custom_value=False)
    with gr.Row():
        name = gr.Textbox(label="Name", max_lines=1, elem_id="gepard-save-voice-name", scale=2)
        consent = gr.Textbox(label="Consent record (the speaker's)", max_lines=1, elem_id="gepard-save-voice-consent",
                             scale=2)
    with gr.Row():
        save = gr.Button("Save this reference as…", size="sm", elem_id="gepard-save-voice")
        delete = gr.Button("Delete the picked voice", size="sm", elem_id="gepard-delete-voice")
    status = gr.Markdown("", elem_id="gepard-saved-voice-status")
    return SavedVoicesUI(picker, name, consent, save, delete, status)


def _choices(shelf: VisitorVoices, token: str | None) -> list[tuple[str, str]]:
    return [(f"{v.name} ({v.clip_s:.1f} s)", v.name) for v in shelf.voices(token)]


def wire_saved_voices(shelf: VisitorVoices, voices: PageVoices, ui: SavedVoicesUI, visitor: gr.BrowserState,
                      ref_audio: gr.Audio, demo: gr.Blocks) -> None:
    """The picker's events. None is public API: a visitor's voices are reached only through the
    token their own browser holds (`visitor`, made on their first visit)."""

    def arrive(token: str):
        token = token if isinstance(token, str) and TOKEN_RE.fullmatch(token) else secrets.token_urlsafe(32)
        return token, gr.update(choices=_choices(shelf, token), value=None)

    def pick(token: str, name: str | None):
        if not name:
            return gr.skip(), ""
        try:
            rate, clip = shelf.clip(token, name)
        except VoiceError as exc:
            return gr.skip(), f"**{exc}**"
        return (rate, clip), f"Saved voice **{name}**: its {len(clip) / rate:.1f} s clip is the reference now (play it above)."

    def save(token: str, audio: PageAudio, name: str, consent: str):
        try:
            voice = shelf.save(token, voices, audio, name, consent)
        except VoiceError as exc:
            return gr.skip(), f"**Not saved ({exc.field}):** {exc}"
        return (gr.update(choices=_choices(shelf, token), value=None),
                f"Saved **{voice.name}** ({voice.clip_s:.1f} s).")

    def delete(token: str, name: str | None, audio: PageAudio):
        if not name:
            return gr.skip(), gr.skip(), "**Pick a saved voice to delete first.**"
        held = shelf.is_clip(token, name, audio)
        try:  # where a pick put its clip in Gradio's cache: the box's own postprocess names the file
            data = ref_audio.postprocess(shelf.clip(token, name))
        except (VoiceError, TypeError):
            data = None
        cached = Path(data.path) if isinstance(data, FileData) and data.path else None
        gone = shelf.delete(token, name)
        if gone and cached is not None:  # its URL serves nothing from now on
            shutil.rmtree(cached.parent, ignore_errors=True)
        return (gr.update(choices=_choices(shelf, token), value=None),
                None if held else gr.skip(),  # the box held the deleted clip: it goes too
                f"Deleted **{name}**." if gone else f"**No saved voice {name!r} here.**")

    demo.load(arrive, visitor, [visitor, ui.picker], api_visibility="private", show_progress="hidden")
    ui.picker.input(pick, [visitor, ui.picker], [ref_audio, ui.status],
                    api_visibility="private", show_progress="hidden")
    # Saving makes the prefix (the codec's encoder): in the engine's queue, as a reference's preparing.
    ui.save.click(save, [visitor, ref_audio, ui.name, ui.consent], [ui.picker, ui.status], concurrency_limit=1,
                  concurrency_id="gepard-engine", api_visibility="private", show_progress="hidden")
    ui.delete.click(delete, [visitor, ui.picker, ref_audio], [ui.picker, ref_audio, ui.status],
                    api_visibility="private", show_progress="hidden")
