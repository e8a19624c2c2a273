"""The demo in front of a served model: `python app.py --server-url URL`.

A vLLM-Omni server (or our `python -m gepard_demo serve`) does the synthesis; the page keeps
its player, stats and controls. `ServedHost` stands where `ModelHost` stands (the controller
asks it for a session): `ServedSession` (served_session.py) streams one request over SSE
(`serving/client.py`) with the interface of `SynthesisSession`, so the same player route, Stop
button and stats work; with the text written as it comes (FeedSettings), `ServedWrittenSession`
(served_written.py) sends it word by word over the server's speech WebSocket instead.

What a served model fixes (settings.fixed_by_server: sampling and all chunking / fade / silence)
is the server's (vLLM-Omni takes no `extra_params`); a request that asks for another sampling value
is refused naming the setting (`check_fixed`), not run at the server's without a word. Only the text, the seed and
the frame budget (max_new_tokens) go with a request, plus a reference voice (`ref_audio`) and
guidance and guardrails (our extension fields) where the server's /v1/models entry says it takes them
(ours does; vLLM-Omni 0.30's Gepard takes neither). The page disables the other controls and
says why, each with its own reason. The server reports no p_stop; frames and the stop come
from our server's `speech.audio.done` extension, or are inferred from the audio length (1024
samples a frame: shorter than the budget = the stop head fired).
"""

from __future__ import annotations

import html
import io
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import soundfile as sf

from gepard_demo.declare import served_as
from gepard_demo.model.seams import ModelInfo
from gepard_demo.serving.client import ServedFeatures, SpeechClient, SpeechServerError, bytes_data_url
from gepard_demo.serving.served_session import NO_CLONING_REASON, NO_EXTENSION_REASONS, ServedSession
from gepard_demo.settings import EXTENSION_GROUPS, SamplingSettings, SettingsError, StreamSettings, fixed_by_server
from gepard_demo.streaming.seams import ReferenceClip
from gepard_demo.ui.hosts.page_host import PageHost
from gepard_demo.ui.jobs.turns import FairLock
from gepard_demo.units import SAMPLE_RATE
from gepard_demo.voice.reference_audio import PageAudio, ReferenceAudioError, page_audio, prepare_reference

if TYPE_CHECKING:
    from gradio.components import Component

    from gepard_demo.streaming.seams import SessionRequest

# The page's controls a served model fixes (declare.SERVED), and why they are greyed out.
FIXED_BY_SERVER = served_as(SamplingSettings, "fixed") + served_as(StreamSettings, "fixed")
FIXED_REASON = ("Fixed by the server (vLLM-Omni reads it from gepard_config.json / env vars at start and refuses "
                "extra_params per request)")
NO_GUIDANCE_REASON, NO_GUARDRAILS_REASON = NO_EXTENSION_REASONS["guidance"], NO_EXTENSION_REASONS["guardrails"]


@dataclass
class ServedHost(PageHost):
    """What the page serves when a server synthesizes: the client, the server's model entry,
    and the lock the controller takes around each request (one at a time, as locally)."""

    client: SpeechClient
    entry: dict  # GET /v1/models' first entry
    requested: str = ""
    fallback_reason: str | None = None
    lock: FairLock = field(default_factory=FairLock)
    gpu = None  # the server runs the model

    @property
    def url(self) -> str:
        return self.client.url

    @property
    def features(self) -> ServedFeatures:
        return ServedFeatures.of(self.entry)

    def locked_controls(self) -> dict[str, str]:
        """The page controls this server cannot honour -> why (their info line)."""
        locked = dict.fromkeys(FIXED_BY_SERVER, FIXED_REASON)
        if not self.features.voice_cloning:
            locked["ref_audio"] = NO_CLONING_REASON
        for group, names in EXTENSION_GROUPS.items():
            if not self.features.takes(group):
                locked.update(dict.fromkeys(names, NO_EXTENSION_REASONS[group]))
        return locked

    def voices(self) -> "ServedVoices":
        return ServedVoices(self)

    @property
    def info(self) -> ModelInfo:
        e = self.entry
        return ModelInfo(name=str(e.get("id") or ""), path=self.url, revision=e.get("revision"),
                         random_weights=bool(e.get("random_weights", False)),
                         device=e.get("device", "server"), dtype=e.get("dtype", "?"))

    @property
    def sample_rate(self) -> int:
        return SAMPLE_RATE

    def __call__(self) -> None:
        return None  # no local engine (the Eval tab is left out in served mode)

    def warm_up(self, stream: StreamSettings | None = None) -> float:
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

    def default_sampling(self) -> SamplingSettings:
        """The server's fixed sampling where it says it, else the declared defaults (what
        vLLM-Omni's gepard_config.json ships)."""
        fixed = self.fixed_settings()
        return fixed[0] if fixed else SamplingSettings()

    def check_fixed(self, sampling: SamplingSettings) -> None:
        """A sampling setting the server fixes, asked at another value than the server's: a
        SettingsError naming it. The server's value is what its /v1/models reports (ours), else the
        declared default, which the page shows and vLLM-Omni's gepard_config.json ships. (The fixed
        stream settings only shape how the server hands its audio out: the page keeps its own.)"""
        fixed = self.fixed_settings()
        server = fixed[0] if fixed else SamplingSettings()
        for name in served_as(SamplingSettings, "fixed"):
            asked, runs = getattr(sampling, name), getattr(server, name)
            if asked != runs:
                where = (f"this server runs {name} {runs}" if fixed else
                         f"the server reads {name} from gepard_config.json / its env vars at start, not per request; "
                         f"the page sends {runs}")
                raise SettingsError(f"{name} is fixed by the server ({where}): send {runs} or leave it out, got {asked}",
                                    name)

    def new_session(self, request: SessionRequest) -> ServedSession:
        """request.speaker: a reference voice as ServedVoices makes it (a `ref_audio` data URL). The
        text limit is the server's own (it answers 400 past it); max_ahead_s: the server paces itself.
        words_per_s: the text written word by word to the server's speech WebSocket (served_written.py).
        A fixed sampling setting at another value than the server's is refused (check_fixed)."""
        self.check_fixed(request.sampling)
        if request.words_per_s is not None:
            from gepard_demo.serving.served_written import ServedWrittenSession

            return ServedWrittenSession(self.client, request, features=self.features)
        return ServedSession(self.client, request, features=self.features)

    def banner_markdown(self) -> str:
        name = html.escape(str(self.entry.get("id")))
        url = html.escape(self.url)
        lines = [f"**Served model:** `{name}` from the speech server at `{url}` (vLLM-Omni or "
                 "`python -m gepard_demo serve`); audio streams from it as SSE events."]
        if self.entry.get("random_weights"):
            lines.append("⚠️ **The server runs a model with random weights: it makes noise, not speech.**")
        fixed = self.fixed_settings()
        if fixed:
            what = fixed_by_server(*fixed)
        else:  # vLLM-Omni reads them from gepard_config.json and its VLLM_GEPARD_* env vars
            what = f"{fixed_by_server()} (gepard_config.json, the VLLM_GEPARD_* env vars); it does not report their values"
        extras = [name for name, on in (("a reference voice", self.features.voice_cloning),
                                        ("CFG", self.features.guidance)) if on]
        sent = "the text, the seed and max frames" + "".join(f", {x}" for x in extras)
        lines.append(f"**The server fixes:** {html.escape(what)}. Only {sent} go with a request: the other "
                     "controls are disabled. No p_stop over the protocol, so the plot stays empty.")
        return "\n\n".join(lines)


class ServedVoices:
    """The page's reference voice for a served model: checked here against the same rules the
    server applies (readable, 3-15 s of sound), so the line under the upload answers at once,
    and sent as the `ref_audio` data URL of a 16-bit WAV (the server makes the prefix)."""

    def __init__(self, host: ServedHost):
        self.host = host

    def speaker(self, ref_audio: PageAudio) -> ReferenceClip | None:
        """Gradio Audio value -> the `ref_audio` data URL to send (None: the default voice)."""
        if ref_audio is None:
            return None
        if not self.host.features.voice_cloning:
            raise ReferenceAudioError(NO_CLONING_REASON)
        samples, rate = page_audio(ref_audio)
        prepare_reference(samples, rate)  # raises with the reason the server would give
        buf = io.BytesIO()
        sf.write(buf, np.clip(samples, -1.0, 1.0), rate, format="WAV", subtype="PCM_16")
        return ReferenceClip(bytes_data_url(buf.getvalue(), "audio/wav"))

    def prepare(self, ref_audio: PageAudio) -> str:
        if ref_audio is None:
            return ""
        try:
            self.speaker(ref_audio)
        except ReferenceAudioError as exc:
            return f"**Reference voice not usable:** {exc}"
        return "Reference ready: it goes to the server with each request, which clones the voice from it."


def load_served_host(url: str, timeout: float = 60.0) -> ServedHost:
    """Connect to the server and read its model entry; raises SpeechServerError if it does not answer."""
    client = SpeechClient(url, timeout)
    return ServedHost(client, client.model(), requested=url)


def lock_controls(host: PageHost, controls: dict[str, Component]) -> None:
    """Grey out the page controls a served model cannot honour, with the reason as their info
    line. A no-op for a local model."""
    for name, reason in host.locked_controls().items():
        if name in controls:
            controls[name].interactive = False
            controls[name].info = reason


__all__ = ["ServedHost", "ServedSession", "ServedVoices", "SpeechServerError", "load_served_host", "lock_controls"]


if TYPE_CHECKING:  # the type checker holds each class to its seam's Protocol (mypy.ini)
    from gepard_demo.streaming.seams import Voices

    _ServedVoices_is_a_Voices: type[Voices] = ServedVoices
