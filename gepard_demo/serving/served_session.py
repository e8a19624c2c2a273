"""One utterance from a speech server for the page (served.py's host makes it): the text over
REST, the audio streamed back as SSE events (serving/client.py), with SynthesisSession's
interface so the page's player route, Stop button and stats work as for a local model.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Iterator

from gepard_demo.serving.client import (
    ServedEnd,
    ServedFeatures,
    SpeechClient,
    StreamResult,
    extension_fields,
    no_extension_reason,
    unserved_extension,
)
from gepard_demo.serving.protocol import pcm16_to_float
from gepard_demo.settings import EXTENSION_GROUPS, SettingsError
from gepard_demo.streaming.base import OnceIterableSession
from gepard_demo.streaming.session import AudioChunk, SynthesisStats
from gepard_demo.streaming.text_input import clean_text
from gepard_demo.units import SAMPLE_RATE, SAMPLES_PER_FRAME
from gepard_demo.voice.reference_audio import ReferenceAudioError

if TYPE_CHECKING:
    from gepard_demo.alignment.result import Alignment
    from gepard_demo.streaming.seams import SessionRequest

NO_CLONING_REASON = ("This server does not clone voices (vLLM-Omni 0.30's Gepard is zero-shot and refuses ref_audio; "
                     "`python -m gepard_demo serve` clones when its checkpoint has the voice compressor)")
NO_EXTENSION_REASONS = {group: f"This server {no_extension_reason(group)}" for group in EXTENSION_GROUPS}


class ServedSession(OnceIterableSession):
    """One utterance from the server, with SynthesisSession's interface (iterate, stats,
    audio(), cancel(), close())."""

    def __init__(self, client: SpeechClient, request: SessionRequest, *, features: ServedFeatures = ServedFeatures()):
        """request: the utterance, taken whole; its speaker a ReferenceClip (the server makes the
        prefix) or None. Its stream settings and max_ahead_s are the server's own; its text limit too
        (the server answers 400 past it)."""
        sampling, clip = request.sampling, request.clip()
        ref_audio = None if clip is None else clip.data_url
        if (unserved := unserved_extension(sampling, features)) is not None:  # dropped unread: refuse, don't ignore
            group, name, value = unserved
            raise SettingsError(f"{name} {value}: {NO_EXTENSION_REASONS[group]}", name)
        if ref_audio is not None and not features.voice_cloning:
            raise ReferenceAudioError(NO_CLONING_REASON)
        self.client = client
        self.text = clean_text(request.text)  # the page's own limits, checked before any request
        self.sampling = sampling.with_concrete_seed()  # sent, so the page can show and replay it
        self.ref_audio = ref_audio
        self.sample_rate = SAMPLE_RATE
        self.stats = SynthesisStats(text=self.text, seed=self.sampling.seed)
        self._request_start = request.request_start
        self._result = StreamResult()
        # vLLM-Omni's word_timestamps, only to a server that lists it (ServedFeatures): its words, after the audio
        self.word_timestamps = features.word_timestamps
        self.low_confidence = features.low_confidence
        self.word_alignment: Alignment | None = None
        super().__init__()

    def _extensions(self) -> dict:
        return {k: v for fields in extension_fields(self.sampling).values() for k, v in fields.items()}

    def cancel(self) -> None:
        """Any thread: the connection closes now, also while the server still holds the request
        in its queue (no chunk would come to notice the cancel at), so the server frees it."""
        self._cancel.set()
        self._result.hang_up()

    close = cancel

    def _generate(self) -> Iterator[AudioChunk]:
        t0 = self._request_start if self._request_start is not None else time.perf_counter()
        st, result, emitted = self.stats, self._result, 0
        done_info: dict = {}
        try:
            for pcm in self.client.stream(self.text, seed=self.sampling.seed, max_new_tokens=self.sampling.max_frames,
                                          mode="sse", result=result, cancel=self._cancel, done=done_info,
                                          ref_audio=self.ref_audio, guidance=self._extensions(),
                                          word_timestamps=self.word_timestamps):
                samples = pcm16_to_float(pcm)
                now = time.perf_counter() - t0
                if st.ttfa_s is None:
                    st.ttfa_s = now
                self._keep(samples)
                first = emitted // SAMPLES_PER_FRAME
                emitted += len(samples)
                st.chunks += 1
                st.frames = math.ceil(emitted / SAMPLES_PER_FRAME)
                yield AudioChunk(samples, SAMPLE_RATE, emitted - len(samples), first, st.frames, now)
        finally:
            st.cancelled = self.cancelled
            st.wall_s = st.gen_time_s = time.perf_counter() - t0
            st.audio_s = st.speech_s = emitted / SAMPLE_RATE
            st.rtf = st.wall_s / st.speech_s if st.speech_s else None
            if not st.cancelled and (emitted or "gepard" in done_info):
                end = ServedEnd.read(done_info, emitted, self.sampling.max_frames)
                st.frames, st.ended_by, st.stop_frame = end.frames, [end.ended_by], end.stop_frame
                st.entropy = [float("nan") if h is None else h for h in end.entropy or []]
                st.nll = [float("nan") if h is None else h for h in end.nll or []]
            st.complete = not st.cancelled
            if "word_timestamps" in done_info:
                from gepard_demo.alignment.result import from_wire

                ev = done_info["word_timestamps"]
                self.word_alignment = from_wire(ev.get("timestamps"), ev.get("confidence"), ev.get("note"),
                                                self.low_confidence)


if TYPE_CHECKING:  # the type checker holds each class to its seam's Protocol (mypy.ini)
    from gepard_demo.streaming.seams import Session

    _ServedSession_is_a_Session: type[Session] = ServedSession
