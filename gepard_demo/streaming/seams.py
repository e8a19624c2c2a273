"""The session and host seams: one Generate's request as every host takes it, what a host hands
back, and what the page's controller asks of a host.

`SessionRequest` is built once, where a request enters (the controller, from the page's controls
and limits), and every host's `new_session(request)` takes it whole: the model here
(ui/hosts/model_host.py), behind ZeroGPU's calls (ui/hosts/gpu_host.py), in front of a server (ui/hosts/served.py).
`Session` is what each returns (streaming/session.SynthesisSession, zerogpu/session.GpuSession,
serving/served_session.ServedSession): iterate once for AudioChunks, read its stats, cancel it from any
thread. What the page asks of a host is ui/hosts/page_host.PageHost; here are the `Voices` a host
hands it, which turn a reference clip into what `SessionRequest.speaker` carries, and the
`TurnLock` a Generate takes unless the host lines its sessions up itself.

Nothing here imports torch at run time: the served page imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol, Union, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    import torch

    from gepard_demo.codec.fsq import Codes
    from gepard_demo.settings import SamplingSettings, StreamSettings
    from gepard_demo.voice.reference_audio import PageAudio

    from .chunks import AudioChunk, SynthesisStats
    from .playback import Playback
    from .segments import Progress


@dataclass(frozen=True)
class ReferenceClip:
    """A reference voice as a server takes it: the `ref_audio` data URL of a 16-bit WAV, made and
    checked on the page (ui/hosts/served.ServedVoices); the server makes the prefix."""

    data_url: str

    def __post_init__(self) -> None:
        if not self.data_url.startswith("data:audio/"):
            raise ValueError("ReferenceClip.data_url must be an audio data URL")


# Who speaks: None is the model's default voice; a tensor is a (K, hidden) speaker prefix the host's
# compressor made (here or in a GPU call); a ReferenceClip is the clip itself, for a host whose
# server makes the prefix. Each host takes only its own kind and refuses the other, naming it.
Speaker = Union["torch.Tensor", ReferenceClip, None]


@dataclass(frozen=True)
class SessionRequest:
    """One Generate, checked settings in hand: what every host's `new_session` and every session
    take whole.

    speaker: see `Speaker`; the host's own `voices().speaker` made it from the reference clip.
    request_start: the clock the session's timings start from (perf_counter), None: its start.
    max_text_chars, max_ahead_s: the page's limits (TrafficSettings); None: the host's own.
    words_per_s: the text written word by word at this pace (FeedSettings); None: all at once."""

    text: str
    sampling: SamplingSettings
    stream: StreamSettings
    request_start: float | None = None
    speaker: Speaker = None
    max_text_chars: int | None = None
    max_ahead_s: float | None = None
    words_per_s: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"SessionRequest.text must be a str, got {type(self.text).__name__}")
        if self.max_text_chars is not None and self.max_text_chars < 1:
            raise ValueError("SessionRequest.max_text_chars must be at least 1")
        if self.max_ahead_s is not None and self.max_ahead_s <= 0:
            raise ValueError("SessionRequest.max_ahead_s must be positive")
        if self.words_per_s is not None and self.words_per_s <= 0:
            raise ValueError("SessionRequest.words_per_s must be positive")

    def prefix(self) -> torch.Tensor | None:
        """The speaker as prefix tokens, for a host that runs the model (a clip is a server's kind)."""
        if isinstance(self.speaker, ReferenceClip):
            raise TypeError("SessionRequest.speaker: a reference clip reaches only a served host; "
                            "this host takes the prefix its own voices() made")
        return self.speaker

    def clip(self) -> ReferenceClip | None:
        """The speaker as a reference clip, for a served host (prefix tokens never leave their process)."""
        if self.speaker is not None and not isinstance(self.speaker, ReferenceClip):
            raise TypeError("SessionRequest.speaker: a served host takes a ReferenceClip, not prefix tokens")
        return self.speaker

    def replace(self, **changes: object) -> SessionRequest:
        return replace(self, **changes)  # type: ignore[arg-type]


@runtime_checkable
class Session(Protocol):
    """One utterance for its caller (streaming/base.OnceIterableSession's surface): iterate it once
    for AudioChunks; `stats` fill as it goes. `stream` is None where a server decodes; `segments`
    None where the text is one request; `word_alignment` the words a server sent after the audio."""

    text: str
    sampling: SamplingSettings
    stats: SynthesisStats
    sample_rate: int
    keep_audio: bool

    # Read-only here: a session that always decodes (or always cuts its text) says so in its own type.
    @property
    def stream(self) -> StreamSettings | None: ...

    @property
    def segments(self) -> list[str] | None: ...

    @property
    def word_alignment(self) -> object: ...  # a served session's alignment.result.Alignment (a layer above)

    def __iter__(self) -> Iterator[AudioChunk]: ...

    def audio(self) -> np.ndarray: ...

    def run(self) -> np.ndarray: ...

    def cancel(self) -> None: ...

    @property
    def cancelled(self) -> bool: ...

    def wait_line(self) -> str | None: ...

    def progress(self) -> Progress | None: ...

    def stop_note(self) -> str | None: ...

    def codes(self) -> np.ndarray | None: ...


class Handover(Protocol):
    """Where one call of an utterance starts and ends, when several calls make it in turn
    (zerogpu/carry.CallBounds): the session asks it and hands it what the next call needs."""

    def resumed(self, stats: SynthesisStats) -> tuple[SynthesisStats, list[Codes]]: ...

    def start(self, playback: Playback) -> tuple[int, np.ndarray | None]: ...

    def ends_at_chunk(self, made: int) -> bool: ...

    def ends_after_segment(self, segment: int, segments: int) -> bool: ...

    def carry(self, segment: int, segment_codes: list[Codes] | None, playback: Playback,
              stats: SynthesisStats, codes: np.ndarray) -> object: ...


class Voices(Protocol):
    """A reference clip from the page -> what `SessionRequest.speaker` carries, for one host."""

    def speaker(self, ref_audio: PageAudio) -> Speaker: ...

    def prepare(self, ref_audio: PageAudio) -> str: ...


class TurnLock(Protocol):
    """The fair engine lock the page and the Eval tab share (ui/jobs/turns.FairLock)."""

    def acquire(self, blocking: bool = True, timeout: float = -1,
                abort: Callable[[], bool] | None = None) -> bool: ...

    def release(self) -> None: ...

    def locked(self) -> bool: ...
