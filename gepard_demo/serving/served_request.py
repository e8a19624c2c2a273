"""ServedRequest: one speech request as our server runs it, read once at the door (REST body or a
WebSocket sentence's body) and passed whole to the session.

The wheel's fields are decided as vLLM-Omni decides them (protocol.parse_speech_request); our
extension fields (cloning.EXTENSION_FIELDS) and the cloning fields are read beside them
(cloning.py); the server's fixed settings take the request's budget, seed and extensions here, once.
What the engine runs is `utterance`, a streaming SessionRequest; the speaker prefix joins it when
the reference clip or saved voice has been encoded (service.SpeechService.speaker).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gepard_demo.serving import cloning
from gepard_demo.serving.protocol import FieldRule, SpeechRequest, parse_speech_request
from gepard_demo.streaming.plan import plan
from gepard_demo.streaming.seams import SessionRequest

if TYPE_CHECKING:
    from gepard_demo.settings import SamplingSettings, StreamSettings


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
    ref_audio, ref_text_ignored = cloning.reference_fields(plain)  # plain: a dict once parsed
    base = fixed.replace(max_frames=speech.max_new_tokens or fixed.max_frames,
                         seed=speech.seed if speech.seed is not None else fixed.seed)
    sampling = cloning.with_extensions(base, extensions)
    plan(speech.text, sampling)  # the session's own checks of text and settings, before any cost
    return ServedRequest(speech, SessionRequest(speech.text, sampling, stream), ref_audio, ref_text_ignored)
