"""What the page asks of whatever makes its audio: the model in this process
(model_host.ModelHost), ZeroGPU's calls (gpu_host.GpuHost) or a speech server (served.ServedHost).
`PageHost` is the page's one seam to them: every host subclasses it, the type checker holds each
to it, and a default here is the answer of a host with nothing more to say, so the page asks
every host the same questions instead of probing which kind it has.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

    from gepard_demo.model.guards.stop_rule import Derived
    from gepard_demo.model.seams import ModelInfo
    from gepard_demo.serving.client import ServedFeatures
    from gepard_demo.settings import SamplingSettings, StreamSettings
    from gepard_demo.streaming.seams import Session, SessionRequest, Voices
    from gepard_demo.ui.jobs.turns import FairLock
    from gepard_demo.ui.takes import Take
    from gepard_demo.zerogpu.runners import GpuRunner


@runtime_checkable
class PageHost(Protocol):
    # Declared without a value where a dataclass host has the field without a default (a value
    # here would become that field's default): `requested`, `gpu`.
    requested: str  # the model the app asked for (a name, a path, a hub id, a server's)
    gpu: GpuRunner | None  # the runner of ZeroGPU's calls where the model runs behind them (gpu_host.py); else None
    fallback_reason: str | None = None  # why `requested` did not load and tiny runs instead
    notices: tuple[str, ...] | list[str] = ()  # banner lines about the hardware
    warm_rate: float | None = None  # audio s per wall s of the warm-up synthesis, once measured

    lock: FairLock  # taken around a Generate unless `own_turn`, and by the Eval tab's runs

    @property
    def info(self) -> ModelInfo:
        """The model's facts."""
        raise NotImplementedError

    @property
    def sample_rate(self) -> int:
        raise NotImplementedError

    @property
    def concurrency(self) -> int:
        """Generates the page runs at once."""
        return 1

    @property
    def url(self) -> str | None:
        """The speech server the page stands in front of; None where the model runs here."""
        return None

    def default_sampling(self) -> SamplingSettings:
        """The sampling a fresh page shows (the checkpoint's, or the server's fixed ones)."""
        raise NotImplementedError

    def recut(self, take: Take, threshold: float) -> tuple[np.ndarray, Derived]:
        """A take's audio at another stop threshold from its own frames (ui/takes.recut_take), and
        what that take would have been; ValueError where this host keeps no frames to re-cut."""
        raise ValueError("this page keeps no frames to re-cut: a speech server made the audio")

    def new_session(self, request: SessionRequest) -> Session:
        """A session for one Generate (streaming.base.OnceIterableSession); raises SettingsError,
        TextError or ReferenceAudioError for what it refuses, before any work."""
        raise NotImplementedError

    def voices(self) -> Voices:
        """What turns the page's reference clip into a voice (voice.PageVoices or ServedVoices)."""
        raise NotImplementedError

    def warm_up(self, stream: StreamSettings | None = None) -> float:
        """One short synthesis before the first visitor; its wall time in s."""
        raise NotImplementedError

    @property
    def own_turn(self) -> bool:
        """Whether a Generate runs without taking the host's lock: something else lines the
        requests up (a batch scheduler, or ZeroGPU's calls, each its own)."""
        return False

    @property
    def features(self) -> ServedFeatures | None:
        """What a speech server takes beyond vLLM-Omni's protocol (client.ServedFeatures); None here."""
        return None

    def explain(self, exc: BaseException) -> str | None:
        """A failed Generate's cause in one line for the page (ZeroGPU's refusals), or None."""
        return None

    def locked_controls(self) -> dict[str, str]:
        """The page controls this host cannot honour -> why (greyed out with it)."""
        return {}

    def banner_markdown(self) -> str | None:
        """A banner of the host's own (a server says what it fixes), or None for the model's."""
        return None
