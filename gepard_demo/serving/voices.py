"""Saved voices on the speech server: vLLM-Omni 0.30's voice routes (`api_server.py`'s
`list_voices`, `upload_voice`, `delete_voice`; `serving_speech.py`'s `upload_voice`), with their
field names, JSON shapes and error texts, over the library in gepard_demo/voice/library.py.

- `GET /v1/audio/voices`: {"voices": every name a request may send (sorted: "default" and the
  saved ones, lower case), "uploaded_voices": each saved voice's metadata}.
- `POST /v1/audio/voices` (multipart): `audio_sample` (a file, at most 10 MB), `name`, `consent`,
  optional `ref_text` and `speaker_description` -> {"success": true, "voice": {...}}.
- `DELETE /v1/audio/voices/{name}` -> {"success": true, "message": ...}, 404 when unknown.

Where Gepard differs, and why. The wheel keeps the clip and conditions on it at each request;
Gepard's compressor turns the clip into a speaker prefix, so the prefix is made once, at upload,
and kept with the voice: a request with the voice then gives the PCM the same clip sent as
`ref_audio` gives at the same seed. The clip must pass what `ref_audio` passes (decodable, not
silent, 3-15 s of sound: voice/reference_audio.py), not the wheel's 1-30 s of file, since a clip
the compressor refuses as `ref_audio` would make a voice no request could use. `speaker_embedding`
(the wheel's Qwen3-TTS vectors) is refused: Gepard has no such embedding. A missing `name` or
`consent` is a 400 naming it (the wheel's FastAPI answers 422). Every refusal stores nothing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.datastructures import FormData, UploadFile

from gepard_demo.serving.body_limit import BodyTooLarge
from gepard_demo.serving.protocol import DEFAULT_VOICE, VOICES_PATH, error_body
from gepard_demo.voice.library import (
    MAX_TEXT_CHARS,
    MAX_UPLOAD_BYTES,
    VoiceError,
    VoiceLibrary,
    VoiceStoreError,
    check_text,
)
from gepard_demo.voice.reference_audio import ReferenceAudioError, decode_audio, prepare_reference

if TYPE_CHECKING:
    import torch

    from gepard_demo.voice.speaker_prefix import SpeakerPrefixer

# The wheel's upload_voice: the content types it takes, and the one it reads from a file's
# extension when the client sent application/octet-stream.
ALLOWED_MIME_TYPES = frozenset({"audio/mpeg", "audio/wav", "audio/x-wav", "audio/ogg", "audio/aac", "audio/flac",
                                "audio/webm", "audio/mp4"})
_BY_EXTENSION = ((".wav", "audio/wav"), (".mp3", "audio/mpeg"), (".mpeg", "audio/mpeg"), (".flac", "audio/flac"),
                 (".ogg", "audio/ogg"), (".aac", "audio/aac"), (".webm", "audio/webm"), (".mp4", "audio/mp4"))
FORM_FIELDS = ("audio_sample", "speaker_embedding", "consent", "name", "ref_text", "speaker_description")


@dataclass(frozen=True)
class Upload:
    """A POST's form, as read off the wire (server.py): the file's bytes, name and content type."""

    content: bytes | None
    filename: str
    content_type: str
    name: str | None
    consent: str | None
    ref_text: str | None = None
    speaker_description: str | None = None
    speaker_embedding: str | None = None


@dataclass(frozen=True)
class CheckedUpload:
    """An upload that passed every check (VoiceShelf.check): what `save` stores."""

    name: str
    consent: str
    content: bytes
    clip: np.ndarray  # trimmed mono at the encoder's rate: what a picker plays
    mime_type: str
    ref_text: str | None
    speaker_description: str | None


def mime_type_of(content_type: str | None, filename: str) -> str:
    """The wheel's rule: the client's type, else (octet-stream) one read from the extension, else WAV."""
    if content_type and content_type != "application/octet-stream":
        return content_type
    lower = (filename or "").lower()
    return next((mime for ext, mime in _BY_EXTENSION if lower.endswith(ext)), "audio/wav")


class VoiceShelf:
    """The server's saved voices: the library on disk and the prefixer that makes a voice's prefix."""

    def __init__(self, library: VoiceLibrary, prefixer: SpeakerPrefixer):
        self.library, self.prefixer = library, prefixer

    def listing(self) -> dict:
        saved = self.library.voices()
        return {"voices": sorted({DEFAULT_VOICE, *(v.key for v in saved)}),
                "uploaded_voices": [v.listing() for v in saved]}

    def knows(self, name: str) -> bool:
        return self.library.find(name) is not None

    def unknown(self, name: str) -> VoiceError:
        """A request's voice that is neither "default" nor saved: the error names what there is
        (the wheel says "Gepard has no built-in speakers", untrue beside its own listing)."""
        there = ", ".join(f"'{v}'" for v in self.listing()["voices"])
        return VoiceError(f"Unknown voice '{name}'. This server's voices: {there} (GET {VOICES_PATH}). Upload a "
                          f"voice first via POST {VOICES_PATH}, or send ref_audio.", "voice")

    def prefix(self, name: str) -> torch.Tensor:
        """The saved voice's prefix, on the compressor's device and dtype: the tensor the same clip
        sent as `ref_audio` gives (VoiceError naming `voice` when there is none of that name)."""
        return self.library.prefix(name).to(self.prefixer.compressor.queries)

    def check(self, form: Upload) -> CheckedUpload:
        """Every check an upload gets but the disk's, and its clip decoded and trimmed (bounded:
        voice/reference_audio.py refuses a file past MAX_FILE_S from its header), before the
        compressor's turn. VoiceError (its field named) for any refusal, with nothing stored."""
        if form.speaker_embedding is not None and form.content is not None:
            raise VoiceError("'audio_sample' and 'speaker_embedding' are mutually exclusive", "speaker_embedding")
        if form.speaker_embedding is not None:
            raise VoiceError("Gepard takes a voice as audio: 'speaker_embedding' (Qwen3-TTS's speaker vector) is "
                             "not served; send 'audio_sample'", "speaker_embedding")
        if form.content is None:
            raise VoiceError("Either 'audio_sample' or 'speaker_embedding' must be provided", "audio_sample")
        for field, value in (("name", form.name), ("consent", form.consent)):
            if value is None:
                raise VoiceError(f"'{field}' is required", field)
        if len(form.content) > MAX_UPLOAD_BYTES:
            raise VoiceError(f"File size exceeds maximum limit of 10MB. Got {len(form.content)} bytes.", "audio_sample")
        mime_type = mime_type_of(form.content_type, form.filename)
        if mime_type not in ALLOWED_MIME_TYPES:
            raise VoiceError(f"Unsupported MIME type: {mime_type}. Allowed: {set(ALLOWED_MIME_TYPES)}", "audio_sample")
        name, consent = self.library.check(form.name, form.consent)  # name, consent, policy and cap
        ref_text = check_text(form.ref_text, "ref_text", MAX_TEXT_CHARS)
        description = check_text(form.speaker_description, "speaker_description", MAX_TEXT_CHARS)
        try:
            # The clip a picker plays, trimmed as the prefixer trims it.
            samples, rate = decode_audio(form.content)
            clip = prepare_reference(samples, rate, self.prefixer.window, self.prefixer.encoder.sample_rate)
        except ReferenceAudioError as exc:
            raise VoiceError(f"audio_sample: {exc}", "audio_sample") from exc
        return CheckedUpload(name, consent, form.content, clip, mime_type, ref_text, description)

    def save(self, upload: CheckedUpload) -> dict:
        """Make the checked upload's prefix (as `ref_audio` makes it) and store the voice; the
        wheel's answer's `voice` object. Runs off the event loop, in the compressor's turn."""
        try:
            prefix = self.prefixer.from_bytes(upload.content)
        except ReferenceAudioError as exc:
            raise VoiceError(f"audio_sample: {exc}", "audio_sample") from exc
        voice = self.library.add(upload.name, upload.consent, prefix.tokens, upload.clip, prefix.seconds,
                                 mime_type=upload.mime_type, file_size=len(upload.content), ref_text=upload.ref_text,
                                 speaker_description=upload.speaker_description)
        result = {"name": voice.name, "consent": voice.consent, "created_at": voice.created_at,
                  "mime_type": voice.mime_type, "file_size": voice.file_size}
        result.update({k: v for k, v in (("ref_text", voice.ref_text),
                                         ("speaker_description", voice.speaker_description)) if v})
        return result

    def upload(self, form: Upload) -> dict:
        """Check and save in one go, outside a server (the CLI, a test)."""
        return self.save(self.check(form))

    def delete(self, name: str) -> bool:
        return self.library.delete(name)


NO_VOICES = ("This server does not keep voices: its checkpoint has no voice compressor to make a voice's "
             "speaker prefix with (vLLM-Omni 0.30's Gepard is zero-shot too)")
# The largest body an upload may send: the wheel's 10 MB file plus its form (the texts are bounded by
# the library, MAX_TEXT_CHARS twice and a name and consent). Past it, 413 before the body is read.
UPLOAD_BODY_BYTES = MAX_UPLOAD_BYTES + 64 * 1024


def voice_router(shelf: VoiceShelf | None, encoder_lock: asyncio.Lock) -> APIRouter:
    """The three routes (module docstring). encoder_lock: the service's, so an upload's compressor
    run takes its turn with the requests' reference clips; its clip is decoded and checked before."""
    router = APIRouter()

    def error(message: str, status: int = 400, param: str | None = None) -> JSONResponse:
        return JSONResponse(error_body(message, status, param), status_code=status)

    @router.get(VOICES_PATH)
    async def list_voices():
        if shelf is None:
            return {"voices": [DEFAULT_VOICE], "uploaded_voices": []}
        return await anyio.to_thread.run_sync(shelf.listing)

    @router.post(VOICES_PATH)
    async def upload_voice(request: Request):
        if shelf is None:
            return error(NO_VOICES)
        try:
            form = await request.form(max_files=len(FILE_FIELDS) + 1, max_fields=2 * len(FORM_FIELDS))
        except BodyTooLarge:
            raise  # the middleware answers 413
        except Exception as exc:  # noqa: BLE001  not multipart, or a part over Starlette's limits
            return error(f"the body must be multipart/form-data with {', '.join(FORM_FIELDS)}: {exc}", 400,
                         "audio_sample")
        try:
            upload = await _read_form(form)
            checked = await anyio.to_thread.run_sync(shelf.check, upload)
            async with encoder_lock:
                voice = await anyio.to_thread.run_sync(shelf.save, checked)
        except VoiceError as exc:
            return error(str(exc), 400, exc.field)
        except VoiceStoreError as exc:
            return error(str(exc), 500)
        finally:
            await form.close()
        return {"success": True, "voice": voice}

    @router.delete(VOICES_PATH + "/{name}")
    async def delete_voice(name: str):
        if shelf is None or not await anyio.to_thread.run_sync(shelf.delete, name):
            return error(f"Voice '{name}' not found", 404, "name")
        return {"success": True, "message": f"Voice '{name}' deleted successfully"}

    return router


FILE_FIELDS = ("audio_sample",)


async def _read_form(form: FormData) -> Upload:
    """The multipart form's fields, each sent at most once, files only where a file belongs (a
    VoiceError naming the field otherwise); the file read whole (Starlette has spooled it, and
    the body limit bounds it)."""
    texts: dict[str, str | None] = {}
    for key in FORM_FIELDS:
        values = form.getlist(key)
        if len(values) > 1:
            raise VoiceError(f"'{key}' was sent {len(values)} times; send it once", key)
        value = values[0] if values else None
        if key in FILE_FIELDS:
            if value is not None and not isinstance(value, UploadFile):
                raise VoiceError(f"'{key}' must be a file (multipart file part)", key)
        elif value is not None and not isinstance(value, str):
            raise VoiceError(f"'{key}' must be a text field, not a file", key)
        else:
            texts[key] = value
    sample = form.get("audio_sample")
    if not isinstance(sample, UploadFile):
        return Upload(None, "", "", **texts)
    return Upload(await sample.read(), sample.filename or "", sample.content_type or "", **texts)
