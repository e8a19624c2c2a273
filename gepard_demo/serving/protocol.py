"""The speech API as vLLM-Omni 0.30 serves Gepard: `POST /v1/audio/speech`, in one place.

Shared by our server (`server.py`), eval's served engine and the app's served mode
(through `client.py`), so that all three read and write the protocol the same way:

- `SpeechBody`: the request fields with the types, bounds and coercions of vLLM-Omni's
  `OpenAICreateSpeechRequest` (vllm_omni/entrypoints/openai/protocol/audio.py).
- `GEPARD_RULES`: what vLLM-Omni's Gepard adapter (tts_adapters/gepard.py) and its serving
  layer refuse on top, one row per field, so a field is accepted or refused in one line.
- `stream_mode()`: none / raw / sse, exactly as the request model decides it.
- `pcm16()`: float samples -> s16le. libsndfile's conversion (floor(x * 32768), clipped), the
  one vLLM-Omni uses through soundfile, and the one `synth` writes its WAV with.
- SSE events (`speech.audio.delta` / `.done` / `.error`): writing and parsing.

`tests/serving/test_conformance.py` loads vLLM-Omni's own request model and adapter rules from
the installed wheel and checks a corpus of requests against this module and the server.
Deliberate differences are listed in README.md (section "Serving").
"""

from __future__ import annotations

import base64
import io
import json
import re
import struct
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Literal

import numpy as np
import soundfile as sf
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from gepard_demo.settings import EXTENSION_GROUPS
from gepard_demo.units import SAMPLE_RATE  # Gepard's native rate; the only one served (sample_rate is refused)

PROTOCOL = "vllm-omni==0.30.0"  # the wheel whose protocol this is (tests/support/vllm_omni_reference.py reads it)
SPEECH_PATH = "/v1/audio/speech"
MODELS_PATH = "/v1/models"
VOICES_PATH = "/v1/audio/voices"  # vLLM-Omni's voice library (serving/voices.py)
DEFAULT_VOICE = "default"
MAX_NEW_TOKENS = (1, 4096)  # frames; vLLM-Omni's ARTTSAdapter bounds
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

StreamMode = Literal["none", "raw", "sse"]
# Non-streamed encodings (soundfile format, subtype, media type), as vLLM-Omni encodes them.
FORMATS = {
    "wav": ("WAV", "PCM_16", "audio/wav"),
    "pcm": ("RAW", "PCM_16", "audio/pcm"),
    "flac": ("FLAC", "PCM_16", "audio/flac"),
    "mp3": ("MP3", None, "audio/mpeg"),
}
STREAM_FORMATS = ("pcm", "wav")  # what streaming (raw or SSE) may carry
# vLLM-Omni's voice-cloning fields; its Gepard adapter refuses them (zero-shot only).
CLONING_FIELDS = ("ref_audio", "ref_text", "ref_audio_2", "speaker_embedding", "x_vector_only_mode", "task_type")
# Declared request fields the Gepard adapter refuses whenever they are set (not None).
UNSUPPORTED_FIELDS = ("non_streaming_mode", "instructions", "language", "ambient_sound", "duration_seconds",
                      "initial_codec_chunk_frames")
# Fields a rule of GEPARD_RULES refuses whenever they are given: not taken while that rule stands.
REFUSED_WHEN_GIVEN = CLONING_FIELDS + UNSUPPORTED_FIELDS + ("sample_rate", "extra_params", "word_timestamps")
# Our extension fields (not vLLM-Omni's), always taken beside its fields: the sampling settings
# declared served in an extension group (settings.EXTENSION_GROUPS; serving/cloning.py reads them).
EXTENSION_FIELDS = tuple(name for names in EXTENSION_GROUPS.values() for name in names)


class RequestError(ValueError):
    """A request the server refuses; status is the HTTP code, param the offending field."""

    def __init__(self, message: str, param: str | None = None, status: int = 400):
        super().__init__(message)
        self.param = param
        self.status = status


class SpeechBody(BaseModel):
    """The request body, typed as vLLM-Omni types it (pydantic's lax coercions included:
    `"stream": "true"` and `"max_new_tokens": "20"` pass there, so they pass here).

    One deliberate difference: unknown fields are refused (extra="forbid"); vLLM-Omni drops
    them silently, so a misspelt `temprature` would be ignored without a word.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    input: str
    model: str | None = None
    voice: str | None = Field(default=None, validation_alias=AliasChoices("voice", "speaker"))
    instructions: str | None = None
    response_format: Literal["wav", "pcm", "flac", "mp3", "opus"] = "wav"
    sample_rate: int | None = Field(default=None, gt=0)
    speed: float | None = Field(default=1.0, ge=0.25, le=4.0)
    stream_format: Literal["sse", "audio"] | None = None
    stream: bool = False
    task_type: Literal["CustomVoice", "VoiceDesign", "Base"] | None = None
    language: str | None = None
    ref_audio: str | list[str] | None = None
    ref_text: str | None = None
    ref_audio_2: str | None = None
    ambient_sound: str | None = None
    duration_seconds: float | None = Field(default=None, ge=0.0)
    x_vector_only_mode: bool | None = None
    speaker_embedding: list[float] | list[list[float]] | None = None
    max_new_tokens: int | None = Field(default=None, ge=1, le=_INT64_MAX)
    seed: int | None = Field(default=None, ge=_INT64_MIN, le=_INT64_MAX)
    initial_codec_chunk_frames: int | None = Field(default=None, ge=0, le=_INT64_MAX)
    non_streaming_mode: bool | None = None
    extra_params: dict[str, Any] | None = None
    word_timestamps: bool = False

    @field_validator("voice", mode="before")
    @classmethod
    def _voice_id(cls, v):
        if isinstance(v, dict):  # OpenAI's custom-voice object {"id": ...}
            if "id" not in v:
                raise ValueError("voice dict must contain 'id'")
            return v["id"]
        return v

    @model_validator(mode="after")
    def _streaming_formats(self) -> "SpeechBody":
        if stream_mode(self.stream, self.stream_format) != "none" and self.response_format not in STREAM_FORMATS:
            raise ValueError("Streaming (stream=true, stream_format='audio' or 'sse') requires response_format "
                             f"'pcm' or 'wav', got {self.response_format!r}")
        return self


def stream_mode(stream: bool, stream_format: str | None) -> StreamMode:
    """vLLM-Omni's rule: stream_format "audio" streams raw bytes (whatever `stream` says);
    `stream` or stream_format "sse" streams SSE events; otherwise one whole response."""
    if stream_format == "audio":
        return "raw"
    if stream or stream_format == "sse":
        return "sse"
    return "none"


@dataclass(frozen=True)
class FieldRule:
    """One refusal: when `refuses(body)` holds, the request gets 400 naming `field`."""

    field: str
    refuses: Callable[[SpeechBody], bool]
    message: str


def _set(name: str) -> Callable[[SpeechBody], bool]:
    return lambda b: getattr(b, name) is not None


# In the adapter's order (sample_rate comes from its serving layer: Gepard resamples nothing).
GEPARD_RULES: tuple[FieldRule, ...] = (
    FieldRule("sample_rate", _set("sample_rate"),
              "sample_rate is not supported by the current TTS model (Gepard speaks at 22050 Hz only)"),
    FieldRule("input", lambda b: not b.input.strip(), "Input text cannot be empty"),
    FieldRule("voice", lambda b: b.voice is not None and b.voice.lower() != DEFAULT_VOICE,
              "Invalid voice: Gepard has one voice, 'default'"),
    FieldRule("speed", lambda b: b.speed is not None and b.speed != 1.0,
              "Gepard does not support 'speed' adjustments (it cannot change its speaking rate)"),
    FieldRule("extra_params", lambda b: bool(b.extra_params),
              "Gepard does not accept extra_params: its sampling and streaming settings are fixed "
              "per server (see GET /v1/models)"),
    FieldRule("word_timestamps", lambda b: b.word_timestamps, "Gepard does not support 'word_timestamps'"),
    FieldRule("response_format", lambda b: b.response_format == "opus",
              "Gepard does not support response_format 'opus' (22050 Hz is not an Opus rate)"),
    FieldRule("max_new_tokens",
              lambda b: b.max_new_tokens is not None and not MAX_NEW_TOKENS[0] <= b.max_new_tokens <= MAX_NEW_TOKENS[1],
              f"max_new_tokens must be between {MAX_NEW_TOKENS[0]} and {MAX_NEW_TOKENS[1]} frames"),
    *(FieldRule(f, _set(f), f"Gepard does not support '{f}': voice cloning is not served (zero-shot only)")
      for f in CLONING_FIELDS),
    *(FieldRule(f, _set(f), f"Gepard does not support '{f}'") for f in UNSUPPORTED_FIELDS),
)


@dataclass(frozen=True)
class SpeechRequest:
    """An accepted request, as the server runs it."""

    text: str
    response_format: str
    mode: StreamMode
    max_new_tokens: int | None  # None: the server's default budget
    seed: int | None  # None: the server's default seed, else a fresh one
    word_timestamps: bool = False  # only where the rules let it through (serving/timestamps.py)
    voice: str | None = None  # as sent: "default", a saved voice's name where the server keeps voices (voices.py)


def taken_fields(rules: Iterable[FieldRule] = GEPARD_RULES) -> list[str]:
    """The request fields a server with these rules takes: vLLM-Omni's, less those a rule refuses
    whenever given, and our extension fields."""
    ruled = {r.field for r in rules}
    plain = sorted(n for n in SpeechBody.model_fields if not (n in REFUSED_WHEN_GIVEN and n in ruled))
    return plain + list(EXTENSION_FIELDS)


def parse_speech_request(body: object, model_id: str, rules: Iterable[FieldRule] = GEPARD_RULES) -> SpeechRequest:
    """Decide a request body as vLLM-Omni serving Gepard would; raises RequestError."""
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    try:
        req = SpeechBody.model_validate(body)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = err.get("loc") or ()
        param = str(loc[0]) if loc else None
        if err.get("type") == "extra_forbidden":
            raise RequestError(f"unknown field {param!r}; this server takes: {', '.join(taken_fields(rules))}",
                               param) from None
        raise RequestError(f"{param or 'body'}: {err.get('msg')}", param) from None
    if req.model and req.model != model_id:  # vLLM's _is_model_supported: an empty name is the served one
        raise RequestError(f"The model `{req.model}` does not exist; this server serves `{model_id}`.", "model", 404)
    for rule in rules:
        if rule.refuses(req):
            raise RequestError(rule.message, rule.field)
    return SpeechRequest(req.input, req.response_format, stream_mode(req.stream, req.stream_format),
                         req.max_new_tokens, req.seed, req.word_timestamps, req.voice)


# -- audio bytes --------------------------------------------------------------------------------

def pcm16(samples: np.ndarray) -> bytes:
    """float32 [-1, 1] -> s16le through libsndfile (floor(x * 32768), clipped): what vLLM-Omni
    sends and what `synth` writes. Element-wise, so converting chunks equals converting the whole."""
    x = np.asarray(samples, dtype=np.float32).reshape(-1)
    if not len(x):
        return b""
    buf = io.BytesIO()
    sf.write(buf, x, SAMPLE_RATE, format="RAW", subtype="PCM_16")
    return buf.getvalue()


def pcm16_array(samples: np.ndarray) -> np.ndarray:
    return np.frombuffer(pcm16(samples), dtype="<i2")


def pcm16_to_float(data: bytes | np.ndarray) -> np.ndarray:
    """s16le -> float32 at libsndfile's 1/32768 scale (a 16-bit WAV of it holds the same integers)."""
    a = np.frombuffer(data, dtype="<i2") if isinstance(data, (bytes, bytearray, memoryview)) else np.asarray(data, "<i2")
    return a.astype(np.float32) / 32768.0


def encode_audio(samples: np.ndarray, response_format: str, sample_rate: int = SAMPLE_RATE) -> tuple[bytes, str]:
    """A whole utterance in one of FORMATS -> (bytes, media type)."""
    fmt, subtype, media = FORMATS[response_format]
    if fmt == "RAW":
        return pcm16(samples), media
    buf = io.BytesIO()  # the file holds (wav, flac) or encodes (mp3) pcm16's very integers
    sf.write(buf, pcm16_array(samples), sample_rate, format=fmt, subtype=subtype)
    return buf.getvalue(), media


def streaming_wav_header(sample_rate: int = SAMPLE_RATE) -> bytes:
    """The 44-byte WAV header vLLM-Omni sends first on a streamed WAV: sizes unknown (0xFFFFFFFF)."""
    unknown = 0xFFFFFFFF
    return struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", unknown, b"WAVE", b"fmt ", 16, 1, 1, sample_rate,
                       sample_rate * 2, 2, 16, b"data", unknown)


class Pcm16Reader:
    """Network chunks of s16le -> int16 arrays; a chunk need not end on a sample, so an odd
    trailing byte is carried to the next one (facts §6)."""

    def __init__(self) -> None:
        self._carry = b""

    def feed(self, data: bytes) -> np.ndarray:
        data = self._carry + data
        cut = len(data) - len(data) % 2
        self._carry = data[cut:]
        return np.frombuffer(data[:cut], dtype="<i2")

    def finish(self) -> None:
        if self._carry:
            raise ValueError("the pcm stream ended mid-sample (odd byte count)")


# -- SSE ----------------------------------------------------------------------------------------

def sse_event(kind: str, payload: dict) -> bytes:
    """One event as vLLM-Omni writes it: `event: <type>` + compact JSON data."""
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **payload}, separators=(',', ':'))}\n\n".encode()


def delta_event(audio: bytes, response_format: str) -> bytes:
    return sse_event("speech.audio.delta", {"audio": base64.b64encode(audio).decode("ascii"),
                                            "response_format": response_format})


def iter_sse_events(lines: Iterable[str]) -> Iterator[dict]:
    """Text lines of an event stream -> the JSON payload of each event (`data:` lines joined)."""
    data: list[str] = []
    for line in lines:
        line = line.rstrip("\r\n")
        if not line:
            if data:
                yield json.loads("\n".join(data))
                data = []
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" "))
    if data:
        yield json.loads("\n".join(data))


def sse_audio(event: dict) -> bytes | None:
    """The audio bytes of a delta event; None for `speech.audio.done` and our
    `speech.audio.word_timestamps` (serving/timestamps.py); an error event raises."""
    kind = event.get("type")
    if kind == "speech.audio.delta":
        return base64.b64decode(event["audio"])
    if kind in ("speech.audio.done", "speech.audio.word_timestamps"):
        return None
    if kind in ("speech.audio.error", "error"):
        err = event.get("error") or {}
        raise RuntimeError(f"the server ended the stream with an error: {err.get('message', err)}")
    raise ValueError(f"unexpected SSE event {kind!r}")


# -- errors -------------------------------------------------------------------------------------

ERROR_TYPES = {400: "BadRequestError", 404: "NotFoundError", 405: "MethodNotAllowedError",
               413: "RequestEntityTooLargeError", 500: "InternalServerError"}


def error_body(message: str, status: int, param: str | None = None) -> dict:
    """OpenAI's error shape (vLLM's too): {"error": {message, type, param, code}}."""
    kind = ERROR_TYPES.get(status, "BadRequestError" if 400 <= status < 500 else "InternalServerError")
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}


_PATH = re.compile(r"(?<![\w.])(?:/[^\s'\"/:,;()]+){2,}/?")


def fault_message(exc: BaseException) -> str:
    """What a 500 tells the client of a fault: its kind and message, with any absolute path on
    this machine replaced by "<path>" (a disk error's message names our folders)."""
    return f"{type(exc).__name__}: {_PATH.sub('<path>', str(exc))}"


def error_message(body: object, fallback: str = "") -> str:
    """The message of an error body in OpenAI's (or FastAPI's) shape."""
    if isinstance(body, dict):
        err = body.get("error", body.get("detail"))
        if isinstance(err, dict):
            return str(err.get("message", err))
        if err is not None:
            return str(err)
    return fallback[:300]
