"""A client of the speech API (vLLM-Omni serving Gepard, or our `python -m gepard_demo serve`).

Used by eval's served engine and the app's served mode; the wire format lives in `protocol.py`.

    client = SpeechClient("http://127.0.0.1:8091")
    client.model()                         # the first entry of GET /v1/models
    for pcm in client.stream("Hello.", seed=1, max_new_tokens=200, mode="sse"):
        ...                                # int16 arrays as they arrive (22050 Hz mono)

Only the seed, the frame budget and a reference voice go with a request: sampling and chunking
are fixed per server (settings.fixed_by_server; vLLM-Omni refuses `extra_params`). A
reference voice goes as vLLM-Omni's `ref_audio` field (a data URL); our server clones with it,
vLLM-Omni 0.30 refuses it for Gepard (a 400, "refused").
"""

from __future__ import annotations

import base64
import contextlib
import mimetypes
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import numpy as np

from gepard_demo.model.guards.ending import BUDGET, STOP, Ended
from gepard_demo.serving.protocol import (
    DEFAULT_VOICE,
    MODELS_PATH,
    SPEECH_PATH,
    VOICES_PATH,
    Pcm16Reader,
    StreamMode,
    error_message,
    iter_sse_events,
    sse_audio,
)
from gepard_demo.settings import EXTENSION_GROUPS, SamplingSettings, extension_fields
from gepard_demo.units import SAMPLES_PER_FRAME, Json

if TYPE_CHECKING:
    import httpx


class SpeechServerError(RuntimeError):
    """The server is unreachable, timed out, refused the request or broke the stream.

    kind: "connect", "timeout", "refused" (an HTTP error status) or "protocol"; a "refused"
    request fails the same way on any server, the others are the server's own trouble.
    """

    def __init__(self, message: str, kind: str, status: int | None = None):
        super().__init__(message)
        self.kind = kind
        self.status = status


def audio_data_url(path: str | Path) -> str:
    """A recording as the `ref_audio` field takes it: `data:audio/...;base64,...` of the file's
    own bytes (the server decodes and resamples it, so nothing is converted here)."""
    path = Path(path)
    mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    if not mime.startswith("audio/"):
        mime = "application/octet-stream"
    return bytes_data_url(path.read_bytes(), mime)


def bytes_data_url(data: bytes, mime: str = "audio/wav") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


@dataclass(frozen=True)
class ServedFeatures:
    """What a server takes beyond vLLM-Omni's Gepard protocol, read from its /v1/models entry.
    Our server says; vLLM-Omni says nothing, and takes neither: its Gepard refuses `ref_audio`
    with a 400, and it drops unknown fields unread, so guidance sent to it would be silently lost."""

    voice_cloning: bool = False  # `ref_audio` (our server when its checkpoint has a compressor)
    guidance: bool = False  # our extension fields of the group of that name (settings.EXTENSION_GROUPS)
    guardrails: bool = False  # ditto
    normalization: bool = False  # ditto
    probe: bool = False  # the SSE done event carries the onset-entropy probe and how the run ended
    word_timestamps: bool = False  # vLLM-Omni's field, served (ours with --word-timestamps; serving/timestamps.py)
    low_confidence: float = 0.7  # below it the server's word confidence is low (its /v1/models says)

    @classmethod
    def of(cls, entry: dict) -> "ServedFeatures":
        low = (entry.get("word_alignment") or {}).get("low_confidence")
        return cls(voice_cloning=entry.get("voice_cloning") is True, guidance=entry.get("guidance") is True,
                   guardrails=entry.get("guardrails") is True, normalization=entry.get("normalization") is True,
                   probe=entry.get("probe") is True,
                   word_timestamps=entry.get("word_timestamps") is True,
                   low_confidence=float(low) if isinstance(low, (int, float)) else 0.7)

    def takes(self, group: str) -> bool:
        """Whether the server takes a group of our extension fields (settings.EXTENSION_GROUPS)."""
        return {"guidance": self.guidance, "guardrails": self.guardrails, "normalization": self.normalization}[group]

    def check_word_timestamps(self, url: str) -> None:
        """Before the first request: a server that does not list word_timestamps would refuse the
        field (vLLM-Omni without --forced-aligner, its Gepard always): refused here, naming it."""
        if not self.word_timestamps:
            raise SpeechServerError(f"word_timestamps: the speech server at {url} does not list it in GET /v1/models "
                                    "(vLLM-Omni's Gepard refuses the field; start ours with `serve --word-timestamps`)",
                                    "refused")


def guidance_fields(sampling: SamplingSettings) -> dict:
    """Our extension fields for classifier-free guidance; none when it is off (settings.extension_fields)."""
    return extension_fields(sampling)["guidance"]


def guardrail_fields(sampling: SamplingSettings) -> dict:
    """Our extension fields for the authors' guardrails; only those in effect (settings.extension_fields)."""
    return extension_fields(sampling)["guardrails"]


def no_extension_reason(group: str) -> str:
    """Why a server that does not list a group in /v1/models cannot take its fields."""
    return (f"takes no {group} ({' / '.join(EXTENSION_GROUPS[group])} are our server's extension fields; "
            "vLLM-Omni drops them unread)")


def unserved_extension(sampling: SamplingSettings, features: ServedFeatures) -> tuple[str, str, Json] | None:
    """(group, field, value) of the first extension field this request needs that the server
    does not take (sent anyway it would be dropped unread: the caller refuses instead); or None."""
    for group, fields in extension_fields(sampling).items():
        if fields and not features.takes(group):
            name = next(iter(fields))
            return group, name, fields[name]
    return None


def request_body(text: str, *, seed: int | None = None, max_new_tokens: int | None = None,
                 mode: StreamMode = "raw", response_format: str = "pcm", ref_audio: str | None = None,
                 guidance: dict | None = None, word_timestamps: bool = False, voice: str | None = None) -> dict:
    """The JSON body for one utterance; mode "raw" = stream_format "audio" (raw bytes),
    "sse" = speech.audio.delta events, "none" = one whole response. ref_audio: a reference
    voice as `audio_data_url` makes it (vLLM-Omni's cloning field). guidance: `guidance_fields` and
    `guardrail_fields` (our extensions; only for a server whose ServedFeatures say it takes them).
    voice: a saved voice's name (only one `SpeechClient.check_voice` found listed); None: "default"."""
    body: dict[str, Json] = {"input": text, "voice": voice or DEFAULT_VOICE, "response_format": response_format}
    if ref_audio is not None:
        body["ref_audio"] = ref_audio
    body.update(guidance or {})
    if word_timestamps:  # vLLM-Omni's field: only where ServedFeatures.word_timestamps says it is served
        body["word_timestamps"] = True
    if mode != "none":
        body.update(stream=True, stream_format="audio" if mode == "raw" else "sse")
    if max_new_tokens is not None:
        body["max_new_tokens"] = max_new_tokens
    if seed is not None:
        body["seed"] = seed
    return body


@dataclass(frozen=True)
class ServedEnd(Ended):
    """How a served utterance ended, read from its `speech.audio.done` event: the one reader of
    our server's report (streaming/report.py) for every client. vLLM-Omni says nothing there:
    its utterance ends on the stop head or the budget, told apart by the audio's length (1024
    samples a frame; it adds no end silence), and it has no probe (entropy and nll None)."""

    frames: int
    ended_by: str
    entropy: list[float | None] | None = None
    nll: list[float | None] | None = None

    @classmethod
    def read(cls, done: dict, samples: int, max_frames: int) -> "ServedEnd":
        ours = done.get("gepard") or {}
        if "ended_by" in ours:
            return cls(int(ours["frames"]), ours["ended_by"], ours.get("entropy"), ours.get("nll"))
        frames = -(-samples // SAMPLES_PER_FRAME)
        return cls(frames, BUDGET if frames >= max_frames else STOP)

    @property
    def stop_frame(self) -> int | None:
        return self.frames if self.stop_fired else None


@dataclass(eq=False)
class StreamResult:
    """Filled in while `SpeechClient.stream` runs: when the first audio came and the headers.
    `hang_up()` (any thread) closes the connection now, even while the reading thread waits
    for the server's first byte: the server sees its client gone and frees the request."""

    ttfa_s: float | None = None
    headers: dict[str, str] = field(default_factory=dict)
    _socket: socket.socket | None = field(default=None, repr=False)
    _hung_up: bool = False

    def hang_up(self) -> None:
        self._hung_up = True
        if self._socket is not None:
            with contextlib.suppress(OSError):  # wakes a blocked read on Linux; close() alone does not
                self._socket.shutdown(socket.SHUT_RDWR)


class SpeechClient:
    def __init__(self, url: str, timeout: float = 60.0, transport: httpx.BaseTransport | None = None):
        import httpx

        self.url = url.rstrip("/")
        self.timeout = timeout
        self._client = httpx.Client(base_url=self.url, timeout=httpx.Timeout(timeout), transport=transport)

    def close(self) -> None:
        self._client.close()

    def _failed(self, what: str, exc: Exception) -> SpeechServerError:
        import httpx

        if isinstance(exc, httpx.ConnectError):
            kind, reason = "connect", "connection failed"
        elif isinstance(exc, httpx.TimeoutException):
            kind, reason = "timeout", f"no answer within {self.timeout} s"
        else:
            kind, reason = "protocol", type(exc).__name__
        return SpeechServerError(f"speech server at {self.url}: {what}: {reason} ({exc})", kind)

    def models(self) -> dict:
        """`GET /v1/models` as the server returns it."""
        import httpx

        try:
            r = self._client.get(MODELS_PATH)
            r.raise_for_status()
            return r.json()
        except (httpx.HTTPError, ValueError) as e:
            raise self._failed(f"GET {MODELS_PATH}", e) from e

    def model(self) -> dict:
        """The served model's entry (id, and our server's extensions when it is ours)."""
        data = self.models().get("data") or []
        if not data or "id" not in data[0]:
            raise SpeechServerError(f"speech server at {self.url}: GET {MODELS_PATH} lists no model", "protocol")
        return data[0]

    def voices(self) -> list[str]:
        """The voice names a request may send (`GET /v1/audio/voices`' `voices`); ["default"] where the
        server has no such route (a server before vLLM-Omni's voice library)."""
        import httpx

        try:
            r = self._client.get(VOICES_PATH)
            if r.status_code in (404, 405):
                return [DEFAULT_VOICE]
            r.raise_for_status()
            names = r.json().get("voices")
        except (httpx.HTTPError, ValueError, AttributeError) as e:
            raise self._failed(f"GET {VOICES_PATH}", e) from e
        return [str(n) for n in names] if isinstance(names, list) else [DEFAULT_VOICE]

    def check_voice(self, name: str) -> None:
        """Before the first request in a saved voice: one the server does not list would be refused
        (or, on a server that ignores the field, silently spoken in its default voice): refused here."""
        listed = self.voices()
        if name.strip().lower() not in {n.lower() for n in listed}:
            raise SpeechServerError(f"voice: the speech server at {self.url} does not list {name!r} in GET "
                                    f"/v1/audio/voices (it lists {', '.join(listed)}); upload it there first "
                                    "(POST /v1/audio/voices; vLLM-Omni 0.30's Gepard keeps none)", "refused")

    def stream(self, text: str, *, seed: int | None = None, max_new_tokens: int | None = None,
               mode: StreamMode = "raw", result: StreamResult | None = None,
               cancel: threading.Event | None = None, done: dict | None = None,
               ref_audio: str | None = None, guidance: dict | None = None,
               word_timestamps: bool = False, voice: str | None = None) -> Iterator[np.ndarray]:
        """int16 sample arrays of one utterance as they arrive (s16le pcm, 22050 Hz mono).
        `ref_audio`: speak in this voice (an `audio_data_url`); `voice`: in this saved one (check_voice);
        `guidance`: `guidance_fields`.
        `cancel` set: the connection is closed at the next chunk (the server frees its engine).
        `done` (SSE): receives the `speech.audio.done` event (ours carries frames / stop / seed), and
        with `word_timestamps` (SSE only) our `speech.audio.word_timestamps` event under that key."""
        import httpx

        body = request_body(text, seed=seed, max_new_tokens=max_new_tokens, mode=mode, response_format="pcm",
                            ref_audio=ref_audio, guidance=guidance, word_timestamps=word_timestamps, voice=voice)
        result = result if result is not None else StreamResult()
        reader = Pcm16Reader()
        t0 = time.perf_counter()
        try:
            with self._client.stream("POST", SPEECH_PATH, json=body) as r:
                network = r.extensions.get("network_stream")  # absent on a test transport
                result._socket = network.get_extra_info("socket") if network is not None else None
                if result._hung_up:
                    return
                result.headers = dict(r.headers)
                if r.status_code != 200:
                    r.read()
                    try:
                        msg = error_message(r.json(), r.text)
                    except ValueError:
                        msg = r.text[:300]
                    raise SpeechServerError(f"speech server at {self.url} refused {text[:60]!r} "
                                            f"(HTTP {r.status_code}): {msg}", "refused", r.status_code)
                pieces = self._sse_audio(r, done) if mode == "sse" else r.iter_bytes()
                for data in pieces:
                    if cancel is not None and cancel.is_set():
                        return
                    if not data:
                        continue
                    samples = reader.feed(data)
                    if len(samples):
                        if result.ttfa_s is None:
                            result.ttfa_s = time.perf_counter() - t0
                        yield samples
        except httpx.HTTPError as e:
            if result._hung_up or cancel is not None and cancel.is_set():
                return  # our own hang-up broke the read
            raise self._failed(f"POST {SPEECH_PATH}", e) from e
        except (RuntimeError, ValueError) as e:
            if isinstance(e, SpeechServerError):
                raise
            raise SpeechServerError(f"speech server at {self.url}: {e}", "protocol") from e
        try:
            reader.finish()
        except ValueError as e:
            raise SpeechServerError(f"speech server at {self.url}: {e}", "protocol") from e

    @staticmethod
    def _sse_audio(response: httpx.Response, done: dict | None) -> Iterator[bytes]:
        for event in iter_sse_events(response.iter_lines()):
            data = sse_audio(event)
            if data is None:
                if done is not None and event.get("type") == "speech.audio.word_timestamps":
                    done["word_timestamps"] = event
                elif done is not None:
                    done.update(event)
                continue
            yield data
