"""What the speech routes share (server.py): one loaded engine + codec behind a BatchScheduler,
the server's fixed settings, and how a request body becomes a SynthesisSession: read once at the
door into a ServedRequest (the wheel's fields, our extensions, the reference), which carries the
streaming SessionRequest it runs; the speaker prefix joins it once encoded.

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
from gepard_demo.serving.protocol import DEFAULT_VOICE, SAMPLE_RATE, FieldRule, RequestError, SpeechRequest, parse_speech_request
from gepard_demo.settings import EXTENSION_GROUPS, SamplingSettings, SettingsError, StreamSettings
from gepard_demo.host_settings import BatchingSettings
from gepard_demo.streaming.plan import plan
from gepard_demo.streaming.seams import SessionRequest
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


@dataclass(frozen=True)
class ServedRequest:
    """speech: the wheel's fields as accepted. utterance: the text with the settings that run it
    (the server's fixed ones, this request's max_new_tokens and seed, our extension fields); its
    speaker None until encoded. ref_audio: the reference clip's bytes, not yet decoded.
    voice: a saved voice's name, where the request speaks in one (set by the service)."""

    speech: SpeechRequest
    utterance: SessionRequest
    ref_audio: bytes | None = None
    ref_text_ignored: bool = False
    voice: str | None = None


def read_request(body: object, model_id: str, rules: tuple[FieldRule, ...], fixed: SamplingSettings,
                 stream: StreamSettings) -> ServedRequest:
    """A JSON body -> its ServedRequest, every field checked but the reference clip's audio (raises
    protocol.RequestError, cloning.CloningFieldError, TextError or SettingsError, each naming its
    field). The text is planned here, so a bad one is refused before anything is decoded."""
    plain, extensions = cloning.split_extensions(body)
    speech = parse_speech_request(plain, model_id, rules)
    assert isinstance(plain, dict)  # parse_speech_request refuses any other body
    ref_audio, ref_text_ignored = cloning.reference_fields(plain)
    base = fixed.replace(max_frames=speech.max_new_tokens or fixed.max_frames,
                         seed=speech.seed if speech.seed is not None else fixed.seed)
    sampling = cloning.with_extensions(base, extensions)
    plan(speech.text, sampling)  # the session's own checks of text and settings, before any cost
    return ServedRequest(speech, SessionRequest(speech.text, sampling, stream), ref_audio, ref_text_ignored)


async def close_session(session: SynthesisSession) -> None:
    """Close a session on a worker thread (it waits for the decode step in flight, then frees its
    rows and its pooled codec stream). anyio's cancel (a client gone from a REST stream) waits for
    it; a native one (a WebSocket hang-up cancels the unit's task), which no anyio shield holds off,
    ends the wait only: the close is a task of its own and goes on."""
    closing = asyncio.ensure_future(anyio.to_thread.run_sync(session.close))
    with anyio.CancelScope(shield=True):
        await asyncio.shield(closing)


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
    if isinstance(exc, (VoiceError, SettingsError)):
        return str(exc), 400, exc.field
    raise TypeError(f"not a refusal: {exc!r}") from exc


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

    async def open(self, body: dict) -> tuple[ServedRequest, SynthesisSession]:
        """A JSON body -> its request and session (not started: it starts when iterated). Raises
        one of REFUSALS for a request it refuses."""
        served = self.check(body)  # text and settings checked before any reference audio is decoded
        return served, self.session(served, await self.speaker(served))

    def check(self, body: dict, *, voice_held: bool = False) -> ServedRequest:
        """The body's request, every check made but the reference clip's decoding (raises one of
        REFUSALS). voice_held: the caller holds the voice's prefix already (a WebSocket session
        read it at its config), so a voice deleted since is not looked up."""
        served = read_request(body, self.model_id, self.rules, self.sampling, self.stream)
        voice = served.speech.voice
        # A saved voice, unless ref_audio is sent too: the wheel's rule, ref_audio wins.
        if voice is not None and voice_key(voice) != DEFAULT_VOICE and served.ref_audio is None:
            assert self.voices is not None  # the rules refuse a named voice where the server keeps none
            if not voice_held and not self.voices.knows(voice):
                raise self.voices.unknown(voice)
            served = replace(served, voice=voice)
        return served

    async def speaker(self, served: ServedRequest) -> torch.Tensor | None:
        """The speaker prefix of the request's reference clip or saved voice (None: the default
        voice); one encode at a time, off the event loop. Raises ReferenceAudioError for a bad clip,
        VoiceError for a voice deleted since the request was checked."""
        if served.voice is not None:
            assert self.voices is not None  # check() names a voice only where the server keeps voices
            return await anyio.to_thread.run_sync(self.voices.prefix, served.voice)
        if served.ref_audio is None:
            return None
        assert self.prefixer is not None  # the rules refuse ref_audio where the model cannot clone
        async with self.encoder_lock:
            return (await anyio.to_thread.run_sync(self.prefixer.from_bytes, served.ref_audio)).tokens

    def session(self, served: ServedRequest, speaker: torch.Tensor | None = None) -> SynthesisSession:
        """The request's session on the running batch, in the speaker's voice (None: the default)."""
        return SynthesisSession(self.scheduler, self.stream_codec, served.utterance.replace(speaker=speaker),
                                look_ahead=self.batching.look_ahead)

    def headers(self, session: SynthesisSession, served: ServedRequest) -> dict[str, str]:
        """The headers every answer carries, known before the first frame."""
        headers = {"X-Gepard-Seed": str(session.sampling.seed), "X-Gepard-Sample-Rate": str(SAMPLE_RATE),
                   "Cache-Control": "no-store"}
        if served.ref_text_ignored:
            headers["X-Gepard-Ref-Text"] = "ignored"
        return headers
