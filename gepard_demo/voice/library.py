"""Saved voices by name: vLLM-Omni 0.30's voice library (facts §19; `serving_speech.py`'s
`upload_voice`, `_validate_speaker_name`, `_restore_uploaded_speakers`,
`_check_registration_allowed`), holding what Gepard needs of a voice.

A voice is one safetensors file in the library's folder: the speaker prefix Gepard's compressor
made from the clip at upload (`prefix`, (K, hidden) fp32: a request with the voice uses it as it
is, so it makes the PCM the same clip sent as `ref_audio` makes), the trimmed clip itself
(`audio`, mono float32 at 22.05 kHz: what a picker plays), and the wheel's metadata in the
header (name, its lower case, consent, created_at, mime_type, file_size, ref_text,
speaker_description, embedding_source, embedding_dim). Files are named as the wheel names them
(`{name}_{consent}_{created_at}.safetensors`, sanitized, kept inside the folder).

Rules, the wheel's: names are trimmed and case-insensitive, never empty, "." or "..", and hold no
path separator or NUL; at most `max_voices` (SPEAKER_MAX_UPLOADED, 1000); the registration policy
is "overwrite" (a new upload of a name replaces it) or "immutable" (it is refused until deleted);
a name that would shadow a built-in voice is refused. Where the wheel is silent, what a careful
server does (docs/DEPLOY.md):

- a name is compared as `voice_key` makes it (NFKC, trimmed, case-folded), so "ＤＥＦＡＵＬＴ"
  is "default" and "José" typed in NFC or NFD is one voice; it is kept in NFKC, at most
  MAX_NAME_CHARS characters, and control, format (zero-width, bidi) and line or paragraph
  separator characters are refused, so two names that look alike are one name or refused;
- the texts stored with a voice are bounded (MAX_CONSENT_CHARS, MAX_TEXT_CHARS), and what goes
  into a file name is sanitized and cut short, so no client text can make a name the disk refuses;
- the folder is made by the first voice written into it, not by a look or a refused upload;
- the listing is re-read only when the folder's files change (their names, sizes and times), so a
  request naming a voice does not open every file;
- a file is written aside and renamed into place, so an upload killed midway leaves no half voice
  (leftovers are removed when the folder is opened);
- add and delete hold the folder's lock (a lock file, so two processes on one folder agree too):
  two uploads of one name at once end as one voice;
- a voice deleted while a request uses it leaves that request alone: it holds the prefix tensor.
"""

from __future__ import annotations

import fcntl
import os
import re
import threading
import time
import unicodedata
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save_file

POLICIES = ("overwrite", "immutable")
MAX_VOICES = 1000  # the wheel's SPEAKER_MAX_UPLOADED default
MAX_UPLOAD_BYTES = 10 * 1024 * 1024  # the wheel's MAX_FILE_SIZE
MAX_NAME_CHARS = 64  # ours: the wheel bounds only the file name (255)
MAX_CONSENT_CHARS = 200  # ours: a consent record is an id or a short note, and part of it names the file
MAX_TEXT_CHARS = 2000  # ours: ref_text and speaker_description (each read into every listing)
_FILE_PART_CHARS = 64  # at most this much of the name and of the consent goes into a file name
# Refused in a name: control (Cc), format (Cf: zero-width, bidi overrides), surrogates, private use,
# unassigned, and line/paragraph separators; a space other than U+0020 is one after NFKC or refused.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
SUFFIX = ".safetensors"
_TEMP = ".partial-"  # a file being written: never a voice
_LOCK = ".lock"
_INT_KEYS = ("created_at", "file_size", "embedding_dim")


class VoiceError(ValueError):
    """A voice request that cannot be served; `field` names what to fix (a 400 names it)."""

    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.field = field


def default_voices_dir(env: Mapping[str, str]) -> Path:
    """The wheel's SPEAKER_SAMPLES_DIR where the environment (passed in by a command) sets it, else
    under the user's cache, as the wheel's default is (~/.cache/vllm-omni/speakers)."""
    return Path(env.get("SPEAKER_SAMPLES_DIR") or "~/.cache/gepard-demo/voices").expanduser()


def voice_key(name: str | None) -> str:
    """What two names are compared by, everywhere (the library, the server's "default", the page):
    NFKC, trimmed, case-folded."""
    return unicodedata.normalize("NFKC", name or "").strip().casefold()


def check_name(name: str | None) -> str:
    """The wheel's `_validate_speaker_name` (trimmed; not empty, ".", ".."; no / \\ NUL), on the
    name in NFKC, plus no control, format or separator characters and at most MAX_NAME_CHARS."""
    trimmed = unicodedata.normalize("NFKC", name or "").strip()
    if not trimmed or trimmed in (".", "..") or any(c in trimmed for c in "/\\\x00"):
        raise VoiceError(f"Invalid voice name {name!r}: must be non-empty, no path separators or NUL", "name")
    odd = sorted({f"U+{ord(c):04X}" for c in trimmed
                  if unicodedata.category(c) in _REFUSED_CATEGORIES or (c.isspace() and c != " ")})
    if odd:
        raise VoiceError(f"Invalid voice name {name!r}: no control, format or separator characters ({', '.join(odd)})",
                         "name")
    if len(trimmed) > MAX_NAME_CHARS:
        raise VoiceError(f"Invalid voice name: {len(trimmed)} characters, at most {MAX_NAME_CHARS}", "name")
    return trimmed


def check_text(value: str | None, field: str, limit: int) -> str | None:
    """An optional text kept with a voice: the wheel's rule (whitespace alone is absent), at most
    `limit` characters (VoiceError naming `field`)."""
    text = (value or "").strip()
    if len(text) > limit:
        raise VoiceError(f"{field} is {len(text)} characters; at most {limit}", field)
    return text or None


def _sanitize(text: str) -> str:
    """The wheel's `_sanitize_filename` (only [A-Za-z0-9_.-], no leading dots), cut to
    _FILE_PART_CHARS: a file name never holds more of a client's text than that."""
    clean = re.sub(r"[^a-zA-Z0-9_.-]", "_", text).lstrip(".") or "file"
    return clean[:_FILE_PART_CHARS]


@dataclass(frozen=True)
class SavedVoice:
    """One voice's metadata, as its file's header holds it."""

    name: str
    consent: str
    created_at: int
    mime_type: str
    file_size: int  # the uploaded file's bytes
    clip_s: float  # the trimmed clip's length
    embedding_dim: int  # the prefix's width (hidden)
    ref_text: str | None = None
    speaker_description: str | None = None
    path: Path = field(default=Path(), repr=False, compare=False)

    @property
    def key(self) -> str:
        return voice_key(self.name)

    def listing(self) -> dict:
        """Its entry in `GET /v1/audio/voices`' `uploaded_voices` (the wheel's keys; no path)."""
        entry = {"name": self.name, "consent": self.consent, "created_at": self.created_at, "file_size": self.file_size,
                 "mime_type": self.mime_type, "embedding_source": "audio", "embedding_dim": self.embedding_dim,
                 "clip_s": round(self.clip_s, 3)}
        if self.ref_text:
            entry["ref_text"] = self.ref_text
        if self.speaker_description:
            entry["speaker_description"] = self.speaker_description
        return entry

    def header(self) -> dict[str, str]:
        values = {"name": self.name, "voice_name_lower": self.key, "consent": self.consent,
                  "created_at": self.created_at, "mime_type": self.mime_type, "file_size": self.file_size,
                  "clip_s": self.clip_s, "embedding_source": "audio", "embedding_dim": self.embedding_dim,
                  "ref_text": self.ref_text, "speaker_description": self.speaker_description}
        return {k: str(v) for k, v in values.items() if v is not None}

    @classmethod
    def from_header(cls, header: dict[str, str], path: Path) -> "SavedVoice":
        ints = {k: int(header[k]) for k in _INT_KEYS if k in header}
        return cls(name=header["name"], consent=header.get("consent", ""), created_at=ints.get("created_at", 0),
                   mime_type=header.get("mime_type", "audio/wav"), file_size=ints.get("file_size", path.stat().st_size),
                   clip_s=float(header.get("clip_s", 0.0)), embedding_dim=ints.get("embedding_dim", 0),
                   ref_text=header.get("ref_text"), speaker_description=header.get("speaker_description"), path=path)


class VoiceStoreError(RuntimeError):
    """The disk refused a voice (full, read-only): the server's fault, told without its paths."""


class VoiceLibrary:
    """The voices in one folder (module docstring). Thread-safe; processes sharing the folder agree
    through its lock file. `reserved`: built-in voice names a saved one may not shadow. The folder
    is made by the first `add`."""

    def __init__(self, folder: str | Path, max_voices: int = MAX_VOICES, policy: str = "overwrite",
                 reserved: tuple[str, ...] = ()):
        if policy not in POLICIES:
            raise ValueError(f"voice registration policy must be one of {POLICIES}, got {policy!r}")
        if max_voices < 1:
            raise ValueError(f"max_voices must be at least 1, got {max_voices}")
        self.folder = Path(folder).expanduser()
        self.max_voices, self.policy = max_voices, policy
        self.reserved = {voice_key(r) for r in reserved}
        self._lock = threading.Lock()
        self._last_ts = 0
        self._listing: tuple[tuple, list[SavedVoice]] = ((), [])  # (the files' stat, the voices they hold)
        if self.folder.is_dir():
            with self._locked():
                for leftover in self.folder.glob(f"{_TEMP}*"):  # an upload killed midway
                    leftover.unlink(missing_ok=True)

    # -- reading ---------------------------------------------------------------------------------

    def voices(self) -> list[SavedVoice]:
        """Every voice on disk now (another process's uploads included), oldest first. The headers
        are read again only when the files' names, sizes or times changed since the last look."""
        files = self._files()
        seen, listed = self._listing
        if files == seen:
            return list(listed)
        found: dict[str, SavedVoice] = {}
        for name, _size, _mtime in files:
            path = self.folder / name
            try:
                with safe_open(str(path), framework="pt") as f:
                    voice = SavedVoice.from_header(dict(f.metadata() or {}), path)
            except (OSError, KeyError, ValueError, RuntimeError):
                continue  # not one of ours, or gone meanwhile
            if voice.key in self.reserved:
                continue  # it would shadow a built-in voice (the wheel's _drop_shadowing_uploads)
            if voice.key not in found or found[voice.key].created_at < voice.created_at:
                found[voice.key] = voice
        listed = sorted(found.values(), key=lambda v: (v.created_at, v.key))
        self._listing = (files, listed)
        return list(listed)

    def _files(self) -> tuple[tuple[str, int, int], ...]:
        """(name, size, mtime_ns) of each voice file, by name: what the listing is a function of."""
        try:
            entries = [(e.name, e.stat()) for e in os.scandir(self.folder) if e.name.endswith(SUFFIX)]
        except FileNotFoundError:
            return ()
        return tuple(sorted((name, st.st_size, st.st_mtime_ns) for name, st in entries))

    def find(self, name: str) -> SavedVoice | None:
        key = voice_key(name)
        return next((v for v in self.voices() if v.key == key), None)

    def prefix(self, name: str) -> torch.Tensor:
        """The voice's speaker prefix (K, hidden) fp32; VoiceError naming `voice` when unknown."""
        voice = self.find(name)
        if voice is None:
            raise VoiceError(f"Unknown voice {name!r}: upload it first with POST /v1/audio/voices", "voice")
        try:
            with safe_open(str(voice.path), framework="pt") as f:
                return f.get_tensor("prefix")
        except OSError as exc:  # deleted between the listing and the read
            raise VoiceError(f"Unknown voice {name!r}: upload it first with POST /v1/audio/voices", "voice") from exc

    def clip(self, name: str) -> np.ndarray:
        """The voice's trimmed clip (mono float32, 22.05 kHz)."""
        voice = self.find(name)
        if voice is None:
            raise VoiceError(f"Unknown voice {name!r}", "voice")
        try:
            with safe_open(str(voice.path), framework="pt") as f:
                return f.get_tensor("audio").numpy()
        except OSError as exc:  # deleted between the listing and the read
            raise VoiceError(f"Unknown voice {name!r}", "voice") from exc

    # -- writing ---------------------------------------------------------------------------------

    def add(self, name: str, consent: str, prefix: torch.Tensor, clip: np.ndarray, clip_s: float, *,
            mime_type: str = "audio/wav", file_size: int = 0, ref_text: str | None = None,
            speaker_description: str | None = None) -> SavedVoice:
        """Save a voice (its prefix already made from `clip`); the policy, the cap and the
        reserved names are checked under the folder's lock, and the file appears whole or not at all.
        VoiceError naming the field for a refusal; VoiceStoreError when the disk refuses."""
        name, consent = self.check(name, consent)
        ref_text = check_text(ref_text, "ref_text", MAX_TEXT_CHARS)
        speaker_description = check_text(speaker_description, "speaker_description", MAX_TEXT_CHARS)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with self._locked():
                return self._write(name, consent, prefix, clip, clip_s, mime_type, file_size, ref_text,
                                   speaker_description)
        except OSError as exc:  # its message holds our paths: the client hears only why
            raise VoiceStoreError(f"the voice could not be stored: {exc.strerror or type(exc).__name__}") from None

    def _write(self, name: str, consent: str, prefix: torch.Tensor, clip: np.ndarray, clip_s: float, mime_type: str,
               file_size: int, ref_text: str | None, speaker_description: str | None) -> SavedVoice:
        existing = {v.key: v for v in self.voices()}
        self._refuse(name, existing)  # again: another upload may have come in meanwhile
        stamp = self._stamp(existing.values())
        path = self.folder / f"{_sanitize(name)}_{_sanitize(consent)}_{stamp}{SUFFIX}"
        if self.folder.resolve() not in path.resolve().parents:
            raise VoiceError("Invalid file path: potential path traversal attack detected", "name")
        voice = SavedVoice(name, consent, stamp, mime_type, int(file_size), float(clip_s), int(prefix.shape[-1]),
                           ref_text, speaker_description, path)
        tensors = {"prefix": prefix.detach().float().cpu().contiguous(),
                   "audio": torch.from_numpy(np.ascontiguousarray(clip, dtype=np.float32))}
        partial = self.folder / f"{_TEMP}{uuid.uuid4().hex}"
        try:
            save_file(tensors, str(partial), metadata=voice.header())
            os.replace(partial, path)
        finally:
            partial.unlink(missing_ok=True)
        old = existing.get(voice.key)
        if old is not None:  # overwrite: the old file goes once the new one is in place
            old.path.unlink(missing_ok=True)
        return voice

    def check(self, name: str | None, consent: str | None) -> tuple[str, str]:
        """(name, consent) as kept, if a voice of that name may be saved now (VoiceError naming the
        field otherwise): before the costly part of an upload; `add` checks again under the lock.
        Writes nothing."""
        name = check_name(name)
        consent = (consent or "").strip()
        if not consent:
            raise VoiceError("consent is required: the speaker's consent record for this voice", "consent")
        if len(consent) > MAX_CONSENT_CHARS:
            raise VoiceError(f"consent is {len(consent)} characters; at most {MAX_CONSENT_CHARS} (a record's id or "
                             "a short note)", "consent")
        self._refuse(name, {v.key: v for v in self.voices()})
        return name, consent

    def _refuse(self, name: str, existing: dict[str, SavedVoice]) -> None:
        """The wheel's _check_registration_allowed and _check_upload_cap."""
        key = voice_key(name)
        if key in self.reserved:
            raise VoiceError(f"Voice name '{name}' is reserved by a built-in speaker of this model; "
                             "choose a different name.", "name")
        if key in existing and self.policy == "immutable":
            raise VoiceError(f"Voice '{name}' already exists and VLLM_OMNI_SPEAKER_REGISTRATION_POLICY is "
                             f"'immutable'; delete it first via DELETE /v1/audio/voices/{name}.", "name")
        if key not in existing and len(existing) >= self.max_voices:
            raise VoiceError(f"Uploaded voice limit reached ({self.max_voices}). Delete an existing voice before "
                             "registering a new one, or raise the cap via SPEAKER_MAX_UPLOADED.", "name")

    def delete(self, name: str) -> bool:
        """Remove the voice; False when there is none of that name."""
        if self.find(name) is None:
            return False  # nothing to take: no lock, no folder made
        with self._locked():
            voice = self.find(name)
            if voice is None:
                return False
            for path in self.folder.glob(f"*{SUFFIX}"):  # every file of that name (an older one left behind too)
                if path == voice.path or self._key_of(path) == voice.key:
                    path.unlink(missing_ok=True)
            return True

    def _stamp(self, voices) -> int:
        """The wheel's `_next_upload_timestamp`: seconds, strictly increasing."""
        newest = max((v.created_at for v in voices), default=0)
        self._last_ts = max(int(time.time()), self._last_ts + 1, newest + 1)
        return self._last_ts

    @staticmethod
    def _key_of(path: Path) -> str | None:
        try:
            with safe_open(str(path), framework="pt") as f:
                return voice_key((f.metadata() or {}).get("name"))
        except (OSError, RuntimeError, ValueError):
            return None

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._lock, open(self.folder / _LOCK, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
