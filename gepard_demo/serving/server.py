"""vLLM-Omni's speech endpoint (as it serves Gepard, facts §6) backed by our engine + codec.

Production serves Gepard with vLLM-Omni; this server speaks the same protocol so one client
(eval's `--engine server`, the app's `--server-url`, the OpenAI SDK, curl) can drive either,
and differences come from the model, not the protocol. What is accepted, refused and streamed
is decided by `protocol.py` (vLLM-Omni's request model + its Gepard adapter's rules):

- `POST /v1/audio/speech`: `input`, `voice` ("default"), `response_format` (wav default, pcm =
  s16le mono 22050 Hz, flac, mp3), `stream` / `stream_format` (none, raw bytes or SSE
  `speech.audio.delta` events; pcm or wav), `max_new_tokens` (frames, 1-4096), `seed`, `model`.
- `GET /v1/models`: the served model id, plus `random_weights`, the fixed settings and whether
  saved voices are served (`voices`).
- `GET / POST /v1/audio/voices`, `DELETE /v1/audio/voices/{name}`: saved voices (voices.py), and
  `voice: "<name>"` in a request (the one voice "default" otherwise, as vLLM-Omni's Gepard).
- Errors in OpenAI's shape for every status (400, 404, 405, 413, 500); a body over
  `max_body_bytes` (a voice upload's: voices.UPLOAD_BODY_BYTES) is refused with 413 before it is
  read (body_limit.py), chunked or not. A 500 names the fault without the server's paths.
- Voice cloning and guidance (cloning.py), when the server has a speaker prefixer:
  `ref_audio` (base64 or a data URL), `ref_text` (accepted, ignored), `task_type` "Base"; always
  our extension fields, guidance and the authors' guardrails (settings.EXTENSION_GROUPS, read in
  cloning.py). Bad reference audio is a 400 naming `ref_audio`.
- How each utterance ended and the onset-entropy probe (gepard_demo/model/guards/probe.py) come back: on a
  whole response as `X-Gepard-Ended-By` (stop, budget or force_stop), `X-Gepard-Force-Stopped` and
  `X-Gepard-Entropy-{Onset,Settled,Drop}` headers; on an SSE stream in the `speech.audio.done`
  event, with the per-step entropy and per-frame NLL traces (too long for a header). A raw stream
  has no place for them.
  Without a prefixer the cloning fields are refused as vLLM-Omni refuses them.
- `word_timestamps` (vLLM-Omni's field) with an aligner (`serve --word-timestamps`): vLLM-Omni's
  `X-Word-Timestamps` header (4 KB rule) on a whole response, a `speech.audio.word_timestamps`
  event after the audio on SSE, refused on a raw stream (timestamps.py says why).
- Temperature, top-k, greedy, stop threshold and the chunking / fade / silence are fixed per
  server (chosen at start, as vLLM-Omni reads them from gepard_config.json and env vars).

Every request goes through `SynthesisSession`, the path the app and eval use. Concurrent
requests decode together: the engine is driven by a `BatchScheduler` (gepard_demo/batching), so
a request joins the running batch at the next step, up to `batching.max_batch` (`--max-batch`,
default 4 like vLLM-Omni's deploy file), and waits in its queue beyond that or while it would
push the running streams below real time (`--admission`). Each request's session runs in a
worker thread (its own codec), so the event loop keeps answering (and rejecting bad requests)
meanwhile; their codec chunks that line up decode in one call (batching/codec_pool.py,
`--no-codec-batching` to decode each alone). A client that hangs up, streamed or not, cancels
its session: its row leaves the batch at the next step. Reference voices are encoded one at a
time (a lock): the encoder is a one-off cost per request and would otherwise crowd the running
streams' cores.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio
from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from gepard_demo.alignment.result import timestamp_headers
from gepard_demo.serving import timestamps
from gepard_demo.serving.body_limit import MAX_BODY_BYTES, BodyLimit
from gepard_demo.serving.operations import ServerMetrics, add_access, operations_router
from gepard_demo.serving.protocol import (
    MODELS_PATH,
    SPEECH_PATH,
    VOICES_PATH,
    SpeechRequest,
    delta_event,
    encode_audio,
    error_body,
    fault_message,
    pcm16,
    sse_event,
    streaming_wav_header,
)
from gepard_demo.serving.service import REFUSALS, SpeechService, close_session, refusal
from gepard_demo.serving.speech_stream import SpeechStreamHandler
from gepard_demo.serving.stream_protocol import STREAM_PATH
from gepard_demo.serving.voices import UPLOAD_BODY_BYTES, VoiceShelf, voice_router
from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.host_settings import BatchingSettings, ServerSettings
from gepard_demo.streaming.report import report_headers, run_report
from gepard_demo.streaming.session import SynthesisSession

if TYPE_CHECKING:
    from starlette.responses import ContentStream

    from gepard_demo.alignment.aligner import Aligner
    from gepard_demo.codec.base import Codec
    from gepard_demo.model.seams import Engine
    from gepard_demo.voice.speaker_prefix import SpeakerPrefixer

log = logging.getLogger(__name__)



def _error(message: str, status: int = 400, param: str | None = None) -> JSONResponse:
    return JSONResponse(error_body(message, status, param), status_code=status)


class SessionStream(StreamingResponse):
    """A streamed session that ends with its client. Starlette notices the disconnect while the
    body's task may be waiting on the session's thread (a decode step, a queued request, a codec
    push); the session is cancelled right there, so its row leaves the batch (or the queue) at
    once instead of when that wait ends. However the response ends, the session is cancelled."""

    def __init__(self, session: SynthesisSession, content: ContentStream, **kwargs: Any):
        super().__init__(content, **kwargs)
        self.session = session

    async def listen_for_disconnect(self, receive) -> None:
        await super().listen_for_disconnect(receive)
        self.session.cancel()

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.session.cancel()  # a no-op once it ended by itself


async def _wait_for_hangup(request: Request, session: SynthesisSession) -> None:
    """Cancel the session when the client disconnects (the body is already read, so the next
    ASGI message can only be the disconnect)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            session.cancel()
            return


def build_speech_app(engine: Engine, codec: Codec, sampling: SamplingSettings, stream: StreamSettings,
                     max_body_bytes: int = MAX_BODY_BYTES, prefixer: SpeakerPrefixer | None = None,
                     batching: BatchingSettings = BatchingSettings(), aligner: Aligner | None = None,
                     voices: VoiceShelf | None = None, server: ServerSettings = ServerSettings()) -> FastAPI:
    """The FastAPI app for one loaded engine + codec (`app.state.scheduler` drives the engine;
    close it to end every request). The arguments are SpeechService's (service.py): the fixed
    settings, the reference-voice prefixer, the word aligner and the saved voices; `server`: the
    served name, API key and CORS (access.py). `app.state.metrics`: its ServerMetrics."""
    service = SpeechService(engine, codec, sampling, stream, batching, prefixer, aligner, voices,
                            served_name=server.served_model_name)
    app = FastAPI(title="Gepard speech server (vLLM-Omni's /v1/audio/speech for Gepard)")
    app.state.scheduler = service.scheduler
    app.state.metrics = metrics = ServerMetrics(service.scheduler, service.model_id)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes,
                       route_limits={("POST", VOICES_PATH): UPLOAD_BODY_BYTES})
    add_access(app, server)  # outside the body limit: a request without the key is refused unread

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        return _error(str(exc.detail), exc.status_code)

    # The last resort: Starlette re-raises after sending this, and uvicorn then drops the
    # (keep-alive) connection, so the speech route answers the faults it can foresee itself.
    @app.exception_handler(Exception)
    async def server_error(request: Request, exc: Exception):
        log.exception("speech request failed")
        return _error(fault_message(exc), 500)

    streams = SpeechStreamHandler(service, metrics, ahead=max(1, batching.look_ahead))

    @app.websocket(STREAM_PATH)
    async def speech_stream(ws: WebSocket):
        await streams.handle(ws)

    app.include_router(voice_router(voices, service.encoder_lock))
    app.include_router(operations_router(service.scheduler, metrics))

    @app.get(MODELS_PATH)
    async def models():
        return {"object": "list", "data": [service.models_entry()]}

    @app.post(SPEECH_PATH)
    async def speech(request: Request):
        try:
            body = json.loads(await request.body())
        except (ValueError, UnicodeDecodeError):
            return _error("the request body must be JSON")
        try:
            served, session = await service.open(body)
        except REFUSALS as exc:
            metrics.refused()
            return _error(*refusal(exc))
        req = served.speech
        headers = service.headers(session, served)
        if req.mode != "none":
            media = "text/event-stream" if req.mode == "sse" else FORMATS_MEDIA[req.response_format]
            return SessionStream(session, _stream_body(session, req, metrics, aligner), media_type=media,
                                 headers={**headers, "X-Accel-Buffering": "no"})
        return await _whole(request, session, req, headers, metrics, aligner)

    return app


async def _whole(request: Request, session: SynthesisSession, req: SpeechRequest, headers: dict,
                 metrics: ServerMetrics, aligner: Aligner | None) -> Response:
    """The whole utterance in one answer, how it ended in its headers; a hang-up stops it."""
    watcher = asyncio.create_task(_wait_for_hangup(request, session))
    try:
        audio = await anyio.to_thread.run_sync(session.run)
    except Exception as exc:  # noqa: BLE001  answered here: the app-wide handler's re-raise drops the connection
        log.exception("speech request failed")
        metrics.ended(session, failed=True)
        return _error(fault_message(exc), 500)
    finally:
        watcher.cancel()
    metrics.ended(session)
    if session.cancelled:  # the client is gone: nobody reads this
        return Response(status_code=499)
    headers = {**headers, **report_headers(run_report(session.stats))}
    if req.word_timestamps:  # after the audio is made: nothing a Stop or hang-up waits on
        assert aligner is not None  # word_timestamps without one is refused (timestamps.py's field rule)
        alignment = await anyio.to_thread.run_sync(timestamps.align_session, aligner, session)
        headers.update(timestamp_headers(alignment) if alignment is not None else timestamps.failed_headers())
    data, media = encode_audio(audio, req.response_format)
    return Response(data, media_type=media, headers=headers)


FORMATS_MEDIA = {"pcm": "audio/pcm", "wav": "audio/wav"}


async def _stream_body(session: SynthesisSession, req: SpeechRequest, metrics: ServerMetrics,
                       aligner: Aligner | None = None) -> AsyncIterator[bytes]:
    """Chunks as the session makes them: raw bytes or SSE events; a streamed WAV starts with
    a header whose sizes are unknown. The session starts only once the body is iterated, so a
    response that is never sent takes no place in the batch."""
    sse = req.mode == "sse"

    def out(data: bytes) -> bytes:
        return delta_event(data, req.response_format) if sse else data

    it, failed = iter(session), False
    try:
        first = True
        while True:
            chunk = await anyio.to_thread.run_sync(next, it, None)
            if chunk is None:
                break
            if not len(chunk.samples):
                continue
            if first and req.response_format == "wav":
                yield out(streaming_wav_header())
            first = False
            yield out(pcm16(chunk.samples))
        if sse and req.word_timestamps and session.stats.complete:  # after every audio delta
            assert aligner is not None  # as in _whole
            alignment = await anyio.to_thread.run_sync(timestamps.align_session, aligner, session)
            yield timestamps.timestamps_event(alignment)
        if sse:
            yield sse_event("speech.audio.done", {"gepard": run_report(session.stats)})
    except Exception as exc:  # mid-stream the status is already sent: end the stream loudly
        log.exception("speech stream failed")
        failed = True
        if sse:
            yield sse_event("speech.audio.error", {"error": error_body(fault_message(exc), 500)["error"]})
        else:
            raise
    finally:
        # A client that goes away cancels this generator: its row leaves the batch (the session
        # waits for the step in flight in its worker thread).
        try:
            await close_session(session)
        finally:  # counted even when a cancel cuts the wait short
            metrics.ended(session, failed)
