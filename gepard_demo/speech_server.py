"""A vLLM-Omni-compatible speech endpoint backed by our engine + codec (facts §6).

Production serves Gepard with vLLM-Omni; this app speaks the same `/v1/audio/speech` subset
so that one client (eval's `--engine server`, a regression CI, curl) can score either the
served model or ours, and differences come from the model, not the protocol:

- `POST /v1/audio/speech`, JSON: `input` (text), `voice` ("default" only), `response_format`
  ("wav" or "pcm": s16le mono at 22050 Hz), `stream` (bool), `stream_format` ("audio": raw
  bytes; "sse": `speech.audio.delta` events with base64 audio, then `speech.audio.done`),
  `max_new_tokens` (frames, 1-4096), `seed`, `model` (must name the served model if given).
  Rejected with 400 as vLLM-Omni does: `speed` != 1, any `extra_params`, voice-cloning fields,
  and formats other than wav / pcm. Streaming needs `response_format` "pcm".
- `GET /v1/models`: the served model id, plus `random_weights` and the fixed settings.
- Temperature, top-k, greedy, stop threshold and the chunking / fade / silence are fixed per
  server (chosen at start, as vLLM-Omni reads them from gepard_config.json and env vars).

Every request goes through `SynthesisSession`, the path the app and eval use. One engine,
one request at a time: an asyncio lock serializes them and the engine work runs in a worker
thread, so the event loop keeps answering (and rejecting bad requests) meanwhile.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import logging
import wave
from dataclasses import asdict, dataclass
from typing import Any

import anyio
import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from .settings import MAX_FRAMES_LIMIT, SamplingSettings, SettingsError, StreamSettings
from .streaming import SynthesisSession, TextError

log = logging.getLogger(__name__)

SAMPLE_RATE = 22050  # the only rate the protocol's pcm format has (facts §6)
SPEECH_PATH = "/v1/audio/speech"
MODELS_PATH = "/v1/models"
RESPONSE_FORMATS = ("wav", "pcm")
VLLM_ONLY_FORMATS = ("flac", "mp3")  # vLLM-Omni serves these; we do not encode them
STREAM_FORMATS = ("audio", "sse")
CLONING_FIELDS = ("ref_audio", "ref_text", "ref_audio_url", "speaker_embedding", "x_vector_only_mode", "task_type")
KNOWN_FIELDS = {"model", "input", "voice", "response_format", "stream", "stream_format", "max_new_tokens", "seed",
                "speed", "extra_params", *CLONING_FIELDS}


class RequestError(ValueError):
    """A request the server refuses; status is the HTTP code, param the offending field."""

    def __init__(self, message: str, param: str | None = None, status: int = 400):
        super().__init__(message)
        self.param = param
        self.status = status


@dataclass(frozen=True)
class SpeechRequest:
    text: str
    response_format: str
    stream: bool
    stream_format: str
    max_new_tokens: int
    seed: int | None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # JSON true is not a number


def parse_request(body: Any, model_id: str, default_max_frames: int) -> SpeechRequest:
    """Check a request body field by field; raises RequestError naming the field."""
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    unknown = sorted(set(body) - KNOWN_FIELDS)
    if unknown:
        raise RequestError(f"unknown field(s) {unknown}; accepted: {sorted(KNOWN_FIELDS - set(CLONING_FIELDS))}", unknown[0])
    model = body.get("model")
    if model is not None and model != model_id:
        raise RequestError(f"The model `{model}` does not exist; this server serves `{model_id}`.", "model", 404)
    cloning = [f for f in CLONING_FIELDS if body.get(f) is not None]
    if cloning:
        raise RequestError(f"voice cloning is not supported (got {cloning}); Gepard has one voice: 'default'", cloning[0])
    if body.get("extra_params") is not None:
        raise RequestError("extra_params are not accepted: temperature, top-k and the stop threshold are fixed "
                           "per server (see GET /v1/models)", "extra_params")
    speed = body.get("speed", 1.0)
    if isinstance(speed, bool) or not isinstance(speed, (int, float)) or speed != 1:
        raise RequestError(f"speed must be 1.0 (Gepard cannot change its speaking rate), got {speed!r}", "speed")
    voice = body.get("voice", "default")
    if voice != "default":
        raise RequestError(f"voice must be 'default' (Gepard has one voice), got {voice!r}", "voice")
    text = body.get("input")
    if not isinstance(text, str):
        raise RequestError("input must be a string: the text to speak", "input")
    fmt = body.get("response_format", "wav")
    if fmt not in RESPONSE_FORMATS:
        also = " (vLLM-Omni also encodes flac and mp3; this server does not)" if fmt in VLLM_ONLY_FORMATS else ""
        raise RequestError(f"response_format must be one of {list(RESPONSE_FORMATS)}, got {fmt!r}{also}", "response_format")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestError(f"stream must be true or false, got {stream!r}", "stream")
    stream_format = body.get("stream_format", "audio")
    if stream_format not in STREAM_FORMATS:
        raise RequestError(f"stream_format must be one of {list(STREAM_FORMATS)}, got {stream_format!r}", "stream_format")
    if stream and fmt != "pcm":
        # A streamed WAV would need a header whose length is not known yet.
        raise RequestError("streaming needs response_format 'pcm' (s16le mono 22050 Hz)", "response_format")
    max_new_tokens = body.get("max_new_tokens", default_max_frames)
    if not _is_int(max_new_tokens) or not 1 <= max_new_tokens <= MAX_FRAMES_LIMIT:
        raise RequestError(f"max_new_tokens must be an integer in [1, {MAX_FRAMES_LIMIT}] (frames), got {max_new_tokens!r}",
                           "max_new_tokens")
    seed = body.get("seed")
    if seed is not None and (not _is_int(seed) or not 0 <= seed < 2**63):
        raise RequestError(f"seed must be a non-negative 64-bit integer, got {seed!r}", "seed")
    return SpeechRequest(text, fmt, stream, stream_format, max_new_tokens, seed)


def to_pcm16(samples: np.ndarray) -> bytes:
    """float32 [-1, 1] -> s16le, scaled by 32768 as libsndfile does (so a client dividing by
    32768 and writing a WAV with soundfile gets these very integers back). Element-wise, so
    converting chunks equals converting the whole."""
    scaled = np.round(np.asarray(samples, dtype=np.float32) * 32768.0)
    return np.clip(scaled, -32768, 32767).astype("<i2").tobytes()


def wav_bytes(pcm16: bytes, sample_rate: int = SAMPLE_RATE) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(pcm16)
    return buf.getvalue()


def _error(message: str, param: str | None = None, status: int = 400) -> JSONResponse:
    # OpenAI's error shape, which vLLM's clients already parse.
    kind = "NotFoundError" if status == 404 else "BadRequestError"
    return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": status}}, status_code=status)


def _sse(event: dict) -> bytes:
    return f"data: {json.dumps(event)}\n\n".encode()


def build_speech_app(engine: Any, codec: Any, sampling: SamplingSettings, stream: StreamSettings) -> FastAPI:
    """The FastAPI app for one loaded engine + codec.

    sampling: the server's fixed temperature / top-k / greedy / stop threshold; its
        max_frames is the default max_new_tokens and its seed (if any) the default seed.
    stream: the server's fixed chunking, decode mode, fade and silence.
    """
    sampling.validate()
    stream.validate()
    if int(codec.sample_rate) != SAMPLE_RATE:
        raise ValueError(f"the codec runs at {codec.sample_rate} Hz; the speech API's pcm is {SAMPLE_RATE} Hz")
    info = engine.model_info
    model_id = info.name
    lock = asyncio.Lock()  # one engine: requests take turns
    app = FastAPI(title="Gepard speech server (vLLM-Omni /v1/audio/speech subset)")

    def session_for(req: SpeechRequest) -> SynthesisSession:
        settings = sampling.replace(max_frames=req.max_new_tokens, seed=req.seed if req.seed is not None else sampling.seed)
        # Checks text and settings up front, without touching the engine.
        return SynthesisSession(engine, codec, req.text, settings, stream)

    @app.get(MODELS_PATH)
    async def models():
        return {"object": "list", "data": [{
            "id": model_id, "object": "model", "owned_by": "gepard-demo", "root": info.path,
            "revision": info.revision, "random_weights": info.random_weights,
            "device": info.device, "dtype": info.dtype,
            "fixed_settings": {"sampling": asdict(sampling), "stream": asdict(stream)},
        }]}

    @app.post(SPEECH_PATH)
    async def speech(request: Request):
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            return _error("the request body must be JSON")
        try:
            req = parse_request(body, model_id, sampling.max_frames)
            session = session_for(req)
        except RequestError as exc:
            return _error(str(exc), exc.param, exc.status)
        except (TextError, SettingsError) as exc:
            return _error(str(exc), "input" if isinstance(exc, TextError) else None)
        headers = {"X-Gepard-Seed": str(session.sampling.seed), "X-Gepard-Sample-Rate": str(SAMPLE_RATE),
                   "Cache-Control": "no-store"}
        if req.stream:
            media = "text/event-stream" if req.stream_format == "sse" else "application/octet-stream"
            body_iter = _stream_body(session, lock, sse=req.stream_format == "sse")
            return StreamingResponse(body_iter, media_type=media, headers={**headers, "X-Accel-Buffering": "no"})
        async with lock:
            audio = await anyio.to_thread.run_sync(session.run)
        st = session.stats
        headers.update({"X-Gepard-Frames": str(st.frames), "X-Gepard-Stop-Fired": str(st.stop_fired).lower(),
                        "X-Gepard-Runaway": str(st.runaway).lower()})
        pcm = to_pcm16(audio)
        if req.response_format == "wav":
            return Response(wav_bytes(pcm), media_type="audio/wav", headers=headers)
        return Response(pcm, media_type="audio/pcm", headers=headers)

    return app


async def _stream_body(session: SynthesisSession, lock: asyncio.Lock, sse: bool):
    """Chunks as the session makes them. The lock is taken only once the body is iterated,
    so a response that is never sent cannot hold the engine."""
    it = iter(session)
    async with lock:
        try:
            while True:
                chunk = await anyio.to_thread.run_sync(next, it, None)
                if chunk is None:
                    break
                if not len(chunk.samples):
                    continue
                data = to_pcm16(chunk.samples)
                yield _sse({"type": "speech.audio.delta", "audio": base64.b64encode(data).decode()}) if sse else data
            if sse:
                st = session.stats
                yield _sse({"type": "speech.audio.done",
                            "gepard": {"frames": st.frames, "stop_fired": st.stop_fired, "runaway": st.runaway,
                                       "seed": st.seed}})
        except Exception as exc:  # mid-stream the status is already sent: end the stream loudly
            log.exception("speech stream failed")
            if sse:
                yield _sse({"type": "error", "error": {"message": str(exc)}})
            else:
                raise
        finally:
            # A client that goes away cancels this generator; free the engine (waiting for
            # the decode step in flight in its worker thread) before the next request runs.
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(session.close)
