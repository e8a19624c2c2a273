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

import hashlib
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import gradio as gr
import numpy as np

from gepard_demo.voice.library import SavedVoice, VoiceError, VoiceLibrary
from gepard_demo.voice.reference_audio import PageAudio, ReferenceAudioError, page_audio, prepare_reference

if TYPE_CHECKING:
    import torch

TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{32,64}$")
VISITOR_KEY = "gepard-visitor"  # the token's localStorage key (encrypted there by Gradio's BrowserState)
# A public page's bounds, so a flood of first saves cannot fill the disk: at most this many visitors
# keep voices, each at most this many (a clip is at most 15 s, 1.3 MB: 2.6 GB in all at worst).
MAX_VISITORS = 200
VOICES_PER_VISITOR = 10
RATE = 22050  # a saved clip's rate (the library keeps it at the codec's)


class MadePrefix(Protocol):
    tokens: torch.Tensor  # (K, hidden)
    seconds: float  # the reference's length after trimming


class PageVoices(Protocol):
    """What makes a reference's prefix on this page (voice.PageVoices: here or in a GPU call)."""

    def prefix(self, ref_audio: PageAudio) -> MadePrefix | None: ...


@dataclass(frozen=True)
class SavedVoiceSettings:
    """folder: the library (the server's --voices-dir); per_visitor: each visitor their own (a public page)."""

    folder: Path
    per_visitor: bool


class VisitorVoices:
    """The libraries the page reaches, one per visitor token on a public page, else one."""

    def __init__(self, settings: SavedVoiceSettings, reserved: tuple[str, ...] = ("default",)):
        self.settings, self.reserved = settings, reserved

    def folder(self, token: str | None) -> Path:
        """The library's folder for this visitor (VoiceError on a public page without a valid token)."""
        folder = Path(self.settings.folder)
        if not self.settings.per_visitor:
            return folder
        if not isinstance(token, str) or not TOKEN_RE.match(token):
            raise VoiceError("this page has no saved voices of yours yet (reload it to get your own library)", "visitor")
        return folder / "visitors" / hashlib.sha256(token.encode()).hexdigest()[:32]

    def library(self, token: str | None) -> VoiceLibrary:
        """The visitor's library, made on their first save (a visit alone makes no folder)."""
        if not self.settings.per_visitor:
            return VoiceLibrary(self.folder(token), reserved=self.reserved)
        folder = self.folder(token)
        visitors = folder.parent
        if not folder.is_dir() and visitors.is_dir() and sum(1 for p in visitors.iterdir() if p.is_dir()) >= MAX_VISITORS:
            raise VoiceError(f"this page keeps saved voices for {MAX_VISITORS} visitors and has no room for more; "
                             "run the app yourself to keep yours", "visitor")
        return VoiceLibrary(folder, max_voices=VOICES_PER_VISITOR, reserved=self.reserved)

    def _existing(self, token: str | None) -> VoiceLibrary | None:
        try:
            folder = self.folder(token)
        except VoiceError:
            return None
        return self.library(token) if folder.is_dir() else None

    def voices(self, token: str | None) -> list[SavedVoice]:
        library = self._existing(token)
        return [] if library is None else library.voices()

    def save(self, token: str | None, voices: PageVoices, ref_audio: PageAudio, name: str, consent: str) -> SavedVoice:
        """The reference now in the box, under `name`: its prefix (made as Generate makes it) and its
        trimmed clip. VoiceError naming the field, nothing saved."""
        library = self.library(token)
        name, consent = library.check(name, consent)
        if ref_audio is None:
            raise VoiceError("there is no reference in the box to save: upload or record one first", "ref_audio")
        try:
            prefix = voices.prefix(ref_audio)
            samples, rate = page_audio(ref_audio)
            clip = prepare_reference(samples, rate)
        except ReferenceAudioError as exc:
            raise VoiceError(f"the reference cannot be saved: {exc}", "ref_audio") from exc
        return library.add(name, consent, prefix.tokens.detach().cpu(), clip, prefix.seconds)

    def clip(self, token: str | None, name: str) -> tuple[int, np.ndarray]:
        library = self._existing(token)
        if library is None:
            raise VoiceError(f"Unknown voice {name!r}", "voice")
        return RATE, library.clip(name)

    def delete(self, token: str | None, name: str) -> bool:
        library = self._existing(token)
        return library is not None and library.delete(name)


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
    private = {"api_visibility": "private", "show_progress": "hidden"}

    def arrive(token: str):
        token = token if isinstance(token, str) and TOKEN_RE.match(token) else secrets.token_urlsafe(32)
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

    def delete(token: str, name: str | None):
        if not name:
            return gr.skip(), "**Pick a saved voice to delete first.**"
        gone = shelf.delete(token, name)
        return (gr.update(choices=_choices(shelf, token), value=None),
                f"Deleted **{name}**." if gone else f"**No saved voice {name!r} here.**")

    demo.load(arrive, visitor, [visitor, ui.picker], **private)
    ui.picker.input(pick, [visitor, ui.picker], [ref_audio, ui.status], **private)
    # Saving makes the prefix (the codec's encoder): in the engine's queue, as a reference's preparing.
    ui.save.click(save, [visitor, ref_audio, ui.name, ui.consent], [ui.picker, ui.status], concurrency_limit=1,
                  concurrency_id="gepard-engine", **private)
    ui.delete.click(delete, [visitor, ui.picker], [ui.picker, ui.status], **private)
