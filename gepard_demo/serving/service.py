"""What the speech routes share (server.py): one loaded engine + codec behind a BatchScheduler,
the server's fixed settings, and how a request body becomes a checked SynthesisSession.

A request is refused (a 400 naming its field) before it costs anything: text and settings are
checked before a reference clip is decoded, and the clip before the session is made. Every
route (the whole response, a raw or SSE stream) opens its session here, so they refuse alike.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING

import anyio

from gepard_demo.batching.codec_pool import CodecPool
from gepard_demo.batching.scheduler import BatchScheduler
from gepard_demo.serving import cloning, timestamps
from gepard_demo.serving.protocol import DEFAULT_VOICE, SAMPLE_RATE, RequestError, SpeechRequest, parse_speech_request
from gepard_demo.settings import EXTENSION_GROUPS, SamplingSettings, SettingsError, StreamSettings
from gepard_demo.host_settings import BatchingSettings
from gepard_demo.streaming.session import SynthesisSession
from gepard_demo.streaming.text_input import TextError
from gepard_demo.voice.library import VoiceError, voice_key
from gepard_demo.voice.reference_audio import ReferenceAudioError

if TYPE_CHECKING:
    import torch

    from gepard_demo.alignment.aligner import Aligner
    from gepard_demo.codec.base import Codec
    from gepard_demo.model.seams import Engine
    from gepard_demo.serving.voices import VoiceShelf
    from gepard_demo.voice.speaker_prefix import SpeakerPrefixer

# What `open` raises for a request it refuses; `refusal` words each as (message, status, param).
REFUSALS = (RequestError, cloning.CloningFieldError, ReferenceAudioError, TextError, SettingsError, VoiceError)


def refusal(exc: Exception) -> tuple[str, int, str | None]:
    """A refused request's error: its message, HTTP status and the field it names."""
    if isinstance(exc, RequestError):
        return str(exc), exc.status, exc.param
    if isinstance(exc, cloning.CloningFieldError):
        return str(exc), 400, exc.param
    if isinstance(exc, ReferenceAudioError):
        return f"ref_audio: {exc}", 400, "ref_audio"
    if isinstance(exc, TextError):
        return str(exc), 400, "input"
    if isinstance(exc, VoiceError):
        return str(exc), 400, exc.field
    return str(exc), 400, exc.field  # SettingsError


@dataclass
class SpeechService:
    """engine, codec: loaded. sampling, stream: what the server fixes (settings.fixed_by_server);
    sampling's max_frames is the default max_new_tokens and its seed, if any, the default seed. prefixer: a SpeakerPrefixer for
    `ref_audio` (None: the cloning fields are refused). aligner: for `word_timestamps` (None:
    refused, as vLLM-Omni refuses it without --forced-aligner). voices: the saved voices a request may
    name (voices.py; None: only "default", as vLLM-Omni's Gepard). served_name: the model id
    requests name (vLLM's --served-model-name; None: the engine's own name)."""

    engine: Engine
    codec: Codec
    sampling: SamplingSettings
    stream: StreamSettings
    batching: BatchingSettings = field(default_factory=BatchingSettings)
    prefixer: SpeakerPrefixer | None = None
    aligner: Aligner | None = None
    voices: VoiceShelf | None = None
    served_name: str | None = None  # --served-model-name: the model id instead of the checkpoint's name

    def __post_init__(self) -> None:
        self.sampling.validate()
        self.stream.validate()
        if int(self.codec.sample_rate) != SAMPLE_RATE:
            raise ValueError(f"the codec runs at {self.codec.sample_rate} Hz; the speech API's pcm is {SAMPLE_RATE} Hz")
        self.model_id = self.served_name or self.engine.model_info.name
        self.scheduler = BatchScheduler(self.engine, self.batching)
        # Sessions share the codec's calls where their chunks line up (batching/codec_pool.py).
        self.stream_codec = CodecPool(self.codec) if self.batching.codec_batching else self.codec
        self.encoder_lock = asyncio.Lock()  # reference voices: one encode at a time
        self.rules = timestamps.request_rules(cloning.request_rules(self.prefixer is not None, self.voices is not None),
                                              self.aligner is not None)

    def models_entry(self) -> dict:
        """The served model's /v1/models entry, with what a client may send beyond vLLM-Omni's
        protocol (client.ServedFeatures)."""
        info = self.engine.model_info
        return {
            "id": self.model_id, "object": "model", "owned_by": "gepard-demo", "root": info.path,
            "revision": info.revision, "random_weights": info.random_weights,
            "device": info.device, "dtype": info.dtype, "sample_rate": SAMPLE_RATE, "speed": info.speed,
            "fixed_settings": {"sampling": asdict(self.sampling), "stream": asdict(self.stream)},
            "voice_cloning": self.prefixer is not None, "voices": self.voices is not None,
            **dict.fromkeys(EXTENSION_GROUPS, True), "probe": True,
            "extension_fields": list(cloning.EXTENSION_FIELDS),
            "batching": asdict(self.batching), "load": self.scheduler.load(), **timestamps.models_entry(self.aligner),
        }

    async def open(self, body: dict) -> tuple[SpeechRequest, cloning.CloningFields, SynthesisSession]:
        """A JSON body -> its request, cloning fields and session (not started: it starts when
        iterated). Raises one of REFUSALS for a request it refuses."""
        req, clone = self.check(body)  # text and settings checked before any reference audio is decoded
        return req, clone, self.session(req, clone, await self.speaker(clone))

    def check(self, body: dict, *, voice_held: bool = False) -> tuple[SpeechRequest, cloning.CloningFields]:
        """The body's request and cloning fields, every check made but the reference clip's
        decoding (raises one of REFUSALS). voice_held: the caller holds the voice's prefix already
        (a WebSocket session read it at its config), so a voice deleted since is not looked up."""
        plain, extensions = cloning.split_extensions(body)
        req = parse_speech_request(plain, self.model_id, self.rules)
        clone = cloning.parse_cloning_fields({**plain, **extensions}, self._settings(req))
        # A saved voice, unless ref_audio is sent too: the wheel's rule, ref_audio wins.
        if req.voice is not None and voice_key(req.voice) != DEFAULT_VOICE and clone.ref_audio is None:
            if not voice_held and not self.voices.knows(req.voice):
                raise self.voices.unknown(req.voice)
            clone = replace(clone, voice=req.voice)
        self.session(req, clone)
        return req, clone

    async def speaker(self, clone: cloning.CloningFields) -> torch.Tensor | None:
        """The speaker prefix of the request's reference clip or saved voice (None: the default
        voice); one encode at a time, off the event loop. Raises ReferenceAudioError for a bad clip,
        VoiceError for a voice deleted since the request was checked."""
        if clone.voice is not None:
            return await anyio.to_thread.run_sync(self.voices.prefix, clone.voice)
        if clone.ref_audio is None:
            return None
        async with self.encoder_lock:
            return (await anyio.to_thread.run_sync(self.prefixer.from_bytes, clone.ref_audio)).tokens

    def session(self, req: SpeechRequest, clone: cloning.CloningFields,
                speaker: torch.Tensor | None = None) -> SynthesisSession:
        """The request's session (checks its text and settings up front, without the engine)."""
        settings = self._settings(req).replace(seed=req.seed if req.seed is not None else self.sampling.seed,
                                               **clone.cfg)
        return SynthesisSession(self.scheduler, self.stream_codec, req.text, settings, self.stream, speaker=speaker,
                                look_ahead=self.batching.look_ahead)

    def headers(self, session: SynthesisSession, clone: cloning.CloningFields) -> dict[str, str]:
        """The headers every answer carries, known before the first frame."""
        headers = {"X-Gepard-Seed": str(session.sampling.seed), "X-Gepard-Sample-Rate": str(SAMPLE_RATE),
                   "Cache-Control": "no-store"}
        if clone.ref_text_ignored:
            headers["X-Gepard-Ref-Text"] = "ignored"
        return headers

    def _settings(self, req: SpeechRequest) -> SamplingSettings:
        return self.sampling.replace(max_frames=req.max_new_tokens or self.sampling.max_frames)
