"""vLLM-Omni 0.30's speech WebSocket (`/v1/audio/speech/stream`, the wheel's
`serving_speech_stream.py`): its messages, limits and session config, as our server speaks them.

Client -> server: `session.config` first (within 10 s; repeatable between utterances), then
`input.text` pieces, `input.done` (ends the utterance, not the connection) and `session.close`.
Server -> client: per unit of text `audio.start`, the audio (binary frames, or with
`word_timestamps` `audio.chunk` JSON frames ending with the sentence's timestamps), `audio.done`;
per utterance `session.done`; `error` for anything refused. Error messages are worded as the
wheel words them. Where ours differs, docs/DEPLOY.md lists it.
"""

from __future__ import annotations

import base64
import json
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator

from gepard_demo.serving.cloning import EXTENSION_FIELDS
from gepard_demo.serving.protocol import SAMPLE_RATE

STREAM_PATH = "/v1/audio/speech/stream"
CONFIG_TIMEOUT_S = 10.0  # the first session.config must come within this
IDLE_TIMEOUT_S = 30.0  # a connection with no message this long, and nothing left to send, ends
MAX_CONFIG_CHARS = 4 * 1024 * 1024  # session.config carries a reference clip
MAX_TEXT_CHARS = 128 * 1024  # any other message

_INT64 = (-(2**63), 2**63 - 1)


class StreamError(ValueError):
    """A refused message: its `error` text as vLLM-Omni words it."""


class StreamConfig(BaseModel):
    """session.config, typed as vLLM-Omni's StreamingSpeechSessionConfig types it. As on the REST
    route (protocol.SpeechBody), an unknown field is refused where vLLM-Omni drops it; our
    extension fields (cloning.EXTENSION_FIELDS) travel beside it (`StreamSession.extensions`)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    model: str | None = None
    voice: str | None = Field(default=None, validation_alias=AliasChoices("voice", "speaker"))
    task_type: Literal["CustomVoice", "VoiceDesign", "Base"] | None = None
    language: str | None = None
    instructions: str | None = None
    response_format: Literal["wav", "pcm", "flac", "mp3", "opus"] = "wav"
    speed: float | None = Field(default=1.0, ge=0.25, le=4.0)
    max_new_tokens: int | None = Field(default=None, ge=1, le=_INT64[1])
    initial_codec_chunk_frames: int | None = Field(default=None, ge=0, le=_INT64[1])
    non_streaming_mode: bool | None = None
    ref_audio: str | None = None
    ref_text: str | None = None
    x_vector_only_mode: bool | None = None
    speaker_embedding: list[float] | None = Field(default=None, max_length=8192)
    stream_audio: bool = False
    word_timestamps: bool = False
    seed: int | None = Field(default=None, ge=_INT64[0], le=_INT64[1])
    split_granularity: Literal["none", "sentence", "clause"] = "none"

    @model_validator(mode="after")
    def _streaming(self) -> "StreamConfig":
        if self.stream_audio:
            if self.response_format != "pcm":
                raise ValueError("WebSocket streaming audio (stream_audio=true) requires response_format='pcm'. "
                                 f"Got response_format='{self.response_format}'.")
            if self.speed is None:
                self.speed = 1.0
            elif self.speed != 1.0:
                raise ValueError("WebSocket stream_audio=true currently requires speed=1.0; "
                                 "native speed control is only available through HTTP streaming.")
        return self


def parse_message(raw: str) -> dict:
    """One client text message -> its JSON object (StreamError as the wheel words each refusal)."""
    if len(raw) > max(MAX_CONFIG_CHARS, MAX_TEXT_CHARS):
        raise StreamError("WebSocket message too large")
    try:
        msg = json.loads(raw)
    except json.JSONDecodeError:
        raise StreamError("Invalid JSON message") from None
    if not isinstance(msg, dict):
        raise StreamError("WebSocket messages must be JSON objects")
    if msg.get("type") == "session.config":
        if len(raw) > MAX_CONFIG_CHARS:
            raise StreamError("session.config message too large")
    elif len(raw) > MAX_TEXT_CHARS:
        raise StreamError("input.text message too large")
    return msg


def parse_config(msg: dict) -> tuple[StreamConfig, dict]:
    """A session.config message -> (the config, our extension fields in it)."""
    fields = {k: v for k, v in msg.items() if k != "type" and k not in EXTENSION_FIELDS}
    try:
        config = StreamConfig(**fields)
    except ValidationError as exc:
        raise StreamError(f"Invalid session config: {exc}") from None
    return config, {k: msg[k] for k in EXTENSION_FIELDS if k in msg}


def sentence_body(config: StreamConfig, extensions: dict, text: str, seed: int | None) -> dict:
    """The REST body one unit of text is synthesized as (what the wheel builds for its speech
    service), through the checks every REST request meets. The audio is made by the session
    directly, so the body asks for one whole answer (no `stream`)."""
    body: dict[str, Any] = {
        "input": text, "model": config.model, "voice": config.voice, "task_type": config.task_type,
        "language": config.language, "instructions": config.instructions,
        "response_format": config.response_format, "speed": config.speed,
        "max_new_tokens": config.max_new_tokens, "initial_codec_chunk_frames": config.initial_codec_chunk_frames,
        "non_streaming_mode": config.non_streaming_mode, "ref_audio": config.ref_audio, "ref_text": config.ref_text,
        "x_vector_only_mode": config.x_vector_only_mode, "speaker_embedding": config.speaker_embedding,
        "word_timestamps": config.word_timestamps, "seed": seed, **extensions,
    }
    return {k: v for k, v in body.items() if v is not None}


def audio_start(utterance: int, sentence: int, text: str, config: StreamConfig) -> dict:
    """`audio.start`; a PCM stream's `sample_rate` is Gepard's (the wheel announces 24000)."""
    out = {"type": "audio.start", "utterance_index": utterance, "sentence_index": sentence, "sentence_text": text,
           "format": config.response_format}
    if config.stream_audio and config.response_format == "pcm":
        out["sample_rate"] = SAMPLE_RATE
    if config.word_timestamps:
        out["word_timestamps"] = True
    return out


def audio_done(utterance: int, sentence: int, total_bytes: int, failed: bool) -> dict:
    return {"type": "audio.done", "utterance_index": utterance, "sentence_index": sentence,
            "total_bytes": total_bytes, "error": failed}


def session_done(utterance: int, sentences: int) -> dict:
    return {"type": "session.done", "utterance_index": utterance, "total_sentences": sentences}


def audio_chunk(utterance: int, sentence: int, chunk_id: int, start_ms: int, end_ms: int, pcm: bytes,
                timestamps: list[dict] | None) -> dict:
    """`audio.chunk` (word_timestamps): base64 PCM; the sentence's last, empty one carries its
    words (a list: aligned, []: silence, None: the alignment failed)."""
    return {"type": "audio.chunk", "utterance_index": utterance, "sentence_index": sentence, "chunk_id": chunk_id,
            "chunk_start_ms": start_ms, "chunk_end_ms": end_ms, "sample_rate": SAMPLE_RATE,
            "audio_b64": base64.b64encode(pcm).decode("ascii"), "timestamps": timestamps}


def error(message: str, partial_audio: bool = False) -> dict:
    out: dict[str, Any] = {"type": "error", "message": message}
    if partial_audio:
        out.update(partial_audio=True, action="discard")
    return out


# Refusals worded as the wheel words them.
NO_ALIGNER = ("word_timestamps=true but the server was launched without --forced-aligner; either restart the "
              "server with that flag or set word_timestamps=false in session.config.")
TIMESTAMPS_NEED_PCM_STREAM = ("word_timestamps=true requires stream_audio=true and response_format='pcm' "
                              "(timestamps ride the per-sentence PCM audio.chunk stream).")
CONFIG_MID_UTTERANCE = "session.config cannot be applied while an utterance is in progress; send input.done first"
