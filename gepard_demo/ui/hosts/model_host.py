"""The one loaded model (engine + codec) the app serves, and why it is the one it is.

app.py's entry point decides which model to ask for; this module loads it and, when that
fails (no weights on an offline machine), falls back to the tiny random-weight model so the
demo still starts, remembering the reason for the banner.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from gepard_demo.ui.hosts.page_host import PageHost
from gepard_demo.ui.jobs.turns import FairLock

if TYPE_CHECKING:
    import numpy as np

    from gepard_demo.batching.codec_pool import CodecPool
    from gepard_demo.batching.scheduler import BatchScheduler
    from gepard_demo.codec.base import Codec
    from gepard_demo.host_settings import BatchingSettings
    from gepard_demo.model.engine import GepardEngine
    from gepard_demo.model.guards.stop_rule import Derived
    from gepard_demo.model.seams import Engine, ModelInfo
    from gepard_demo.settings import SamplingSettings, StreamSettings
    from gepard_demo.streaming.seams import SessionRequest
    from gepard_demo.streaming.session import SynthesisSession
    from gepard_demo.ui.page.voice import VoiceCloning
    from gepard_demo.ui.takes import Take

# What loads an engine: (model, cache_dir) -> the engine; and its codec: engine -> codec.
EngineLoader = Callable[[str, "str | None"], "Engine"]
CodecLoader = Callable[["Engine"], "Codec"]

FALLBACK_MODEL = "tiny"


class EngineFacts(PageHost):
    """What a host says about the model it serves, from its `engine` and `codec` (no GPU needed).
    Calling it gives what the Eval tab runs on (its engine provider)."""

    engine: Engine
    codec: Codec

    def __call__(self) -> Engine:
        raise NotImplementedError

    @property
    def info(self) -> ModelInfo:
        return self.engine.model_info

    @property
    def sample_rate(self) -> int:
        return int(self.codec.sample_rate)

    def default_sampling(self) -> SamplingSettings:
        return self.engine.default_sampling()

    def recut(self, take: Take, threshold: float) -> tuple[np.ndarray, Derived]:
        from gepard_demo.ui.takes import recut_take

        return recut_take(take, threshold, self.codec)


@dataclass
class ModelHost(EngineFacts):
    """engine + codec, and how callers share them.

    With `batch()` (app.py does it) a BatchScheduler drives the engine: visitors' sessions and
    the Eval tab's batches decode together in one running batch, up to its max_batch, and the
    page runs that many Generates at once. Without it, `lock` serializes every use (one
    visitor at a time). Calling the host returns what to run on (the scheduler, else the
    engine): it is the `engine_provider` handed to the Eval tab, whose runs hold `lock` so
    that two of them take turns.
    """

    engine: Engine
    codec: Codec
    requested: str
    fallback_reason: str | None = None
    lock: FairLock = field(default_factory=FairLock)
    notices: list[str] = field(default_factory=list)  # banner lines about the hardware (speed/cuda_check.py)
    scheduler: BatchScheduler | None = None  # once batch() ran
    codec_pool: CodecPool | None = None  # and its CodecPool, when the streams' codec chunks decode together
    warm_rate: float | None = None  # audio s per wall s of the warm-up synthesis (warm_up)
    gpu = None  # the model runs here, not in GPU calls

    def __call__(self) -> Engine:
        return self.scheduler or self.engine

    @property
    def own_turn(self) -> bool:
        return self.scheduler is not None  # the scheduler lines the sessions up

    def batch(self, settings: BatchingSettings) -> "ModelHost":
        """Serve several visitors at once through one running batch (BatchingSettings)."""
        from gepard_demo.batching.codec_pool import CodecPool
        from gepard_demo.batching.scheduler import BatchScheduler

        self.scheduler = BatchScheduler(self.engine, settings)
        self.codec_pool = CodecPool(self.codec) if settings.codec_batching else None
        return self

    @property
    def concurrency(self) -> int:
        """How many Generates the page runs at once (the rest wait in Gradio's queue)."""
        return self.scheduler.settings.max_batch if self.scheduler is not None else 1

    def warm_up(self, stream: StreamSettings | None = None) -> float:
        """One short synthesis, so the first visitor does not pay for lazy initialisation
        (first-call kernel setup made the first request's time to audio ~4x slower here).
        Returns the seconds it took."""
        from gepard_demo.settings import StreamSettings
        from gepard_demo.streaming.seams import SessionRequest
        from gepard_demo.streaming.session import SynthesisSession

        t0 = time.perf_counter()
        sampling = self.engine.default_sampling().replace(max_frames=12, seed=0)
        with self.lock:
            session = SynthesisSession(
                self.engine, self.codec, SessionRequest("Warm up.", sampling, stream or StreamSettings())
            )
            session.run()
        st = session.stats
        # Audio seconds made per wall second, prefill included (so on the low side): the page's
        # player sizes its start buffer from it until real requests have been measured.
        self.warm_rate = st.speech_s / st.wall_s if st.wall_s > 0 else None
        return time.perf_counter() - t0

    def new_session(self, request: SessionRequest) -> SynthesisSession:
        """A SynthesisSession on this engine + codec (ui/hosts/served.py's host streams from a server instead).
        request.speaker: a reference voice's prefix tokens (ui/page/voice.py), None = the default voice."""
        from gepard_demo.streaming.session import SynthesisSession

        look_ahead = self.scheduler.settings.look_ahead if self.scheduler is not None else 0
        return SynthesisSession(self(), self.codec_pool or self.codec, request, look_ahead=look_ahead)

    def voices(self) -> VoiceCloning:
        """Reference audio -> speaker prefix for this engine (ui/page/voice.py; a served host sends it instead)."""
        from gepard_demo.ui.page.voice import VoiceCloning

        return VoiceCloning(self)



def engine_loader_for(device: str = "cpu", dtype: str = "float32") -> EngineLoader:
    def load(model: str, cache_dir: str | None) -> GepardEngine:
        from gepard_demo.model.engine import GepardEngine

        return GepardEngine.load(model, device=device, dtype=dtype, cache_dir=cache_dir)

    return load


def _default_codec_loader(engine: Engine) -> Codec:
    from gepard_demo.codec import load_codec

    # The codec runs where the talker runs; it decodes in fp32 whatever the talker's dtype.
    return load_codec(engine.codec_source(), device=str(engine.device))


def _load_pair(model: str, cache_dir: str | None, engine_loader: EngineLoader,
               codec_loader: CodecLoader) -> tuple[Engine, Codec]:
    engine = engine_loader(model, cache_dir)
    return engine, codec_loader(engine)


def load_model_host(
    requested: str,
    cache_dir: str | None = None,
    *,
    fallback: str | None = FALLBACK_MODEL,
    engine_loader: EngineLoader | None = None,
    codec_loader: CodecLoader = _default_codec_loader,
) -> ModelHost:
    """Load `requested`; on any failure load `fallback` instead and keep the reason.

    engine_loader defaults to `engine_loader_for()` (CPU, fp32).
    """
    engine_loader = engine_loader or engine_loader_for()
    try:
        engine, codec = _load_pair(requested, cache_dir, engine_loader, codec_loader)
        return ModelHost(engine, codec, requested)
    except Exception as exc:  # the banner shows the reason; the fallback keeps the demo up
        if fallback is None or requested == fallback:
            raise
        reason = f"{type(exc).__name__}: {exc}"
    engine, codec = _load_pair(fallback, cache_dir, engine_loader, codec_loader)
    return ModelHost(engine, codec, requested, fallback_reason=reason)

