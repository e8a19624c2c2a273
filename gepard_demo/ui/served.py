"""The demo in front of a served model: `python app.py --server-url URL`.

A vLLM-Omni server (or our `python -m gepard_demo serve`) does the synthesis; the page keeps
its player, stats and controls. `ServedHost` stands where `ModelHost` stands (the controller
asks it for a session), and `ServedSession` streams one request over SSE (`speech_client`)
with the interface of `SynthesisSession`, so the same player route, Stop button and stats work.

What a served model fixes: temperature, top-k, greedy, stop threshold and all chunking / fade
/ silence are the server's (vLLM-Omni takes no `extra_params`); only the text, the seed and
the frame budget (max_new_tokens) go with a request. The page disables the other controls
and says why. The server reports no p_stop; frames and the stop come from our server's
`speech.audio.done` extension, or are inferred from the audio length (1024 samples a frame:
shorter than the budget = the stop head fired).
"""

from __future__ import annotations

import html
import math
import threading
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Iterator

from gepard_demo.session_base import OnceIterableSession
from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.speech_api import SAMPLE_RATE, pcm16_to_float
from gepard_demo.speech_client import SpeechClient, SpeechServerError, StreamResult
from gepard_demo.streaming import AudioChunk, SynthesisStats
from gepard_demo.text_input import clean_text

SAMPLES_PER_FRAME = 1024
# The page's controls a served model fixes, and why they are greyed out.
FIXED_BY_SERVER = ("temperature", "top_k", "greedy", "stop_threshold", "first_chunk_frames", "chunk_frames",
                   "decode_mode", "lookback_frames", "fade_ms", "silence_ms")
FIXED_REASON = ("Fixed by the server (vLLM-Omni reads it from gepard_config.json / env vars at start and refuses "
                "extra_params per request)")


class ServedSession(OnceIterableSession):
    """One utterance from the server, with SynthesisSession's interface (iterate, stats,
    audio(), cancel(), close())."""

    def __init__(self, client: SpeechClient, text: str, sampling: SamplingSettings, *,
                 request_start: float | None = None):
        sampling.validate()
        self.client = client
        self.text = clean_text(text)  # the page's own limits, checked before any request
        self.sampling = sampling.with_concrete_seed()  # sent, so the page can show and replay it
        self.sample_rate = SAMPLE_RATE
        self.stats = SynthesisStats(text=self.text, seed=self.sampling.seed)
        self._request_start = request_start
        super().__init__()

    def close(self) -> None:
        self._cancel.set()  # the client closes the connection at the next chunk

    def _generate(self) -> Iterator[AudioChunk]:
        t0 = self._request_start if self._request_start is not None else time.perf_counter()
        st, result, emitted = self.stats, StreamResult(), 0
        done_info: dict = {}
        try:
            for pcm in self.client.stream(self.text, seed=self.sampling.seed, max_new_tokens=self.sampling.max_frames,
                                          mode="sse", result=result, cancel=self._cancel, done=done_info):
                samples = pcm16_to_float(pcm)
                now = time.perf_counter() - t0
                if st.ttfa_s is None:
                    st.ttfa_s = now
                self._chunks.append(samples)
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
            ours = done_info.get("gepard") or {}
            if "frames" in ours:  # our server says exactly what happened
                st.frames, st.stop_fired, st.runaway = ours["frames"], ours["stop_fired"], ours["runaway"]
            elif not st.cancelled and emitted:  # vLLM-Omni: ends on the stop head or the budget
                st.runaway = st.frames >= self.sampling.max_frames
                st.stop_fired = not st.runaway
            st.stop_frame = st.frames if st.stop_fired else None
            st.complete = not st.cancelled


@dataclass
class ServedHost:
    """What the page serves when a server synthesizes: the client, the server's model entry,
    and the lock the controller takes around each request (one at a time, as locally)."""

    client: SpeechClient
    entry: dict  # GET /v1/models' first entry
    requested: str = ""
    fallback_reason: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    fixed_controls: tuple[str, ...] = FIXED_BY_SERVER
    fixed_reason: str = FIXED_REASON

    @property
    def url(self) -> str:
        return self.client.url

    @property
    def info(self) -> Any:
        e = self.entry
        return SimpleNamespace(name=e.get("id"), path=self.url, revision=e.get("revision"),
                               random_weights=bool(e.get("random_weights", False)),
                               device=e.get("device", "server"), dtype=e.get("dtype", "?"))

    @property
    def sample_rate(self) -> int:
        return SAMPLE_RATE

    def __call__(self) -> Any:
        return None  # no local engine (the Eval tab is left out in served mode)

    def warm_up(self, stream: Any = None) -> float:
        t0 = time.perf_counter()
        self.entry = self.client.model()
        return time.perf_counter() - t0

    def fixed_settings(self) -> tuple[SamplingSettings, StreamSettings] | None:
        """The server's own settings when it says them (ours does in /v1/models)."""
        fixed = self.entry.get("fixed_settings")
        if not isinstance(fixed, dict):
            return None
        try:
            return SamplingSettings(**fixed["sampling"]), StreamSettings(**fixed["stream"])
        except (KeyError, TypeError, ValueError):
            return None

    def new_session(self, text: str, sampling: SamplingSettings, stream: StreamSettings, *,
                    request_start: float | None = None) -> ServedSession:
        return ServedSession(self.client, text, sampling, request_start=request_start)

    def banner_markdown(self) -> str:
        name = html.escape(str(self.entry.get("id")))
        url = html.escape(self.url)
        lines = [f"**Served model:** `{name}` from the speech server at `{url}` (vLLM-Omni or "
                 "`python -m gepard_demo serve`); audio streams from it as SSE events."]
        if self.entry.get("random_weights"):
            lines.append("⚠️ **The server runs a model with random weights: it makes noise, not speech.**")
        fixed = self.fixed_settings()
        if fixed:
            s, st = fixed
            what = (f"temperature {s.temperature:g}, top-k {s.top_k}, greedy {str(s.greedy).lower()}, stop threshold "
                    f"{s.stop_threshold:g}; chunks {st.first_chunk_frames} then {st.chunk_frames} frames, "
                    f"{st.decode_mode} decode, fade {st.fade_ms:g} ms, silence {st.silence_ms:g} ms")
        else:
            what = ("temperature, stop threshold (gepard_config.json), chunking, lookback and fade (the "
                    "VLLM_GEPARD_* env vars); it does not report their values")
        lines.append(f"**The server fixes:** {html.escape(what)}. Only the text, the seed and max frames go with a "
                     "request: the other controls are disabled. No p_stop over the protocol, so the plot stays empty.")
        return "\n\n".join(lines)


def load_served_host(url: str, timeout: float = 60.0) -> ServedHost:
    """Connect to the server and read its model entry; raises SpeechServerError if it does not answer."""
    client = SpeechClient(url, timeout)
    return ServedHost(client, client.model(), requested=url)


def lock_controls(host: Any, controls: dict[str, Any]) -> None:
    """Grey out the page controls a served model fixes, with the reason as their info line.
    A no-op for a local model."""
    for name in getattr(host, "fixed_controls", ()):
        if name in controls:
            controls[name].interactive = False
            controls[name].info = getattr(host, "fixed_reason", "")


__all__ = ["ServedHost", "ServedSession", "SpeechServerError", "load_served_host", "lock_controls"]
