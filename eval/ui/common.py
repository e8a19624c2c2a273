"""What the Eval tab's sections share: the app's engine as an eval engine (holding the app's lock
for each batch, so a visitor's Generate gets the engine between two batches), the bounds a public
page puts on a run, and charts as images for a Gallery.

Behind a GPU boundary (a ZeroGPU Space, or `--zerogpu emulate`) the provider has a `gpu` runner,
and every batch is one GPU call (`GpuBatchEngine`) that runs eval.engines.local's batch on the
engine the GPU holds; Whisper scoring, speaker similarity and the report stay on the CPU.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from eval.engines.base import EvalEngine, SpeechEngine, Synthesis
from eval.engines.request import SynthesisItem, VoiceRef, refs_of
from eval.runs.run import RunError
from gepard_demo.settings import SamplingSettings, StreamSettings

if TYPE_CHECKING:
    from gepard_demo.model.seams import Engine
    from gepard_demo.streaming.seams import TurnLock
    from gepard_demo.ui.hosts.gpu_host import GpuHost
    from gepard_demo.ui.hosts.model_host import EngineFacts

log = logging.getLogger("eval.ui")


@dataclass(frozen=True)
class EvalLimits:
    """What one Eval-tab run may ask for (None: no bound). On a public Space a visitor shares the
    engine (and on ZeroGPU their own GPU quota) with everyone: a run is a few dozen utterances of
    at most a thousand frames, in batches that give the engine back between them."""

    max_utterances: int | None = None
    max_frames: int | None = None
    max_batch: int | None = None
    max_sweep_rows: int | None = None  # points x utterances of one sweep

    @classmethod
    def public(cls) -> "EvalLimits":
        return cls(max_utterances=30, max_frames=1000, max_batch=8, max_sweep_rows=120)

    def check(self, utterances: int, max_frames: int, batch_size: int, points: int = 1) -> None:
        """Refuse, naming the field and the bound, what this page does not run."""
        bounds = [("the set (after the limit)", utterances, self.max_utterances, "utterances"),
                  ("max_frames", max_frames, self.max_frames, "frames"),
                  ("batch_size", batch_size, self.max_batch, "rows")]
        if points > 1:
            bounds.append(("the sweep", points * utterances, self.max_sweep_rows, "rows (points x utterances)"))
        for name, value, bound, unit in bounds:
            if bound is not None and value > bound:
                raise RunError(f"{name}: {value} {unit} is more than this public page runs ({bound}); lower it, or run "
                               "`python -m eval` on your own machine for bigger runs")


class LockedEngine(EvalEngine):
    """An eval engine that holds the app's engine lock while it synthesizes a batch."""

    def __init__(self, inner: SpeechEngine, lock: TurnLock | None):
        self.inner, self.lock, self.name = inner, lock, inner.name

    def describe(self) -> dict:
        return self.inner.describe()

    def gepard(self) -> Engine | None:
        return self.inner.gepard()

    def trace_source(self) -> tuple[SpeechEngine, TurnLock | None] | None:
        return self.inner, self.lock

    def synthesize(self, items: list[SynthesisItem], sampling: SamplingSettings,
                   stream: StreamSettings) -> list[Synthesis]:
        if self.lock is None:
            return self.inner.synthesize(items, sampling, stream)
        self.lock.acquire()
        try:
            return self.inner.synthesize(items, sampling, stream)
        finally:
            self.lock.release()


class GpuBatchEngine(EvalEngine):
    """Each batch is one GPU call on the provider's runner (a GpuHost: gepard_demo/ui/hosts/gpu_host.py),
    asking for the duration its rows and frames need."""

    name = "local"

    def __init__(self, host: GpuHost):
        self.host = host

    def describe(self) -> dict:
        info = self.host.info
        return {"engine": self.name, "model": info.name, "model_path": info.path, "revision": info.revision,
                "random_weights": info.random_weights, "device": info.device, "dtype": info.dtype,
                "codec_source": self.host.engine.codec_source(), "gpu_calls": self.host.gpu.name}

    def gepard(self) -> Engine | None:
        return self.host.engine  # config and tokenizer only: its forward passes run in GPU calls

    def synthesize(self, items: list[SynthesisItem], sampling: SamplingSettings,
                   stream: StreamSettings) -> list[Synthesis]:
        from eval.engines.local import synthesize_resident

        voices = self.host.voices()
        refs = refs_of(items)
        # A saved voice's prefix is read from its folder here, as GepardLocal does; a recording's is made
        # by the host's voices (its compressor, in a GPU call where it has one).
        speakers = None if refs is None else [None if r is None else r.prefix() if isinstance(r, VoiceRef)
                                              else voices.speaker(r) for r in refs]
        guided = len(items) if sampling.guided else 0
        duration_s = self.host.budget.batch_s(len(items), sampling.max_frames, guided, self.host.starts.estimate())
        with self.host.lock:  # the Eval tab's runs take turns among themselves (a visitor's Generate does not wait)
            try:
                return self.host.gpu.call(synthesize_resident, items, sampling, stream, speakers,
                                          duration_s=duration_s)
            except Exception as exc:
                line = self.host.explain(exc)
                if line is None:
                    raise
                raise RunError(line) from exc


def eval_engine_from_provider(engine_provider: EngineFacts, engine_name: str = "local"):
    if engine_name == "piper":
        from eval.engines.piper import PiperReference

        return PiperReference.load()
    if engine_provider.gpu is not None:
        from gepard_demo.ui.hosts.gpu_host import GpuHost  # loaded already: the provider is one

        assert isinstance(engine_provider, GpuHost)  # the one host with a GPU runner (PageHost.gpu)
        return GpuBatchEngine(engine_provider)
    from eval.engines.local import GepardLocal

    engine = engine_provider()
    codec = engine_provider.codec
    if codec is None:
        from gepard_demo.codec import load_codec

        codec = load_codec(engine.codec_source())
    return LockedEngine(GepardLocal(engine, codec), engine_provider.lock)


def tab_error(exc: Exception):
    """The gr.Error a tab handler raises for `exc`: a refusal (bad input, a bound, a missing run) is
    one log line and a message naming what is wrong; anything else is a fault and keeps its
    traceback in the log."""
    import gradio as gr

    from eval.engines.base import EngineError
    from eval.compare.table import CompareError
    from eval.load.client import LoadError
    from eval.runs.sets import SetError
    from gepard_demo.settings import SettingsError

    refused = isinstance(exc, (RunError, EngineError, SetError, CompareError, SettingsError, LoadError, ValueError,
                               FileNotFoundError))
    if refused:
        log.warning("eval tab refused a request: %s: %s", type(exc).__name__, exc)
    else:
        log.error("eval tab request failed", exc_info=exc)
    return gr.Error(f"{type(exc).__name__}: {exc}", print_exception=not refused)


def chart_images(paths) -> list:
    """Charts as in-memory images with their names, for a Gallery.

    Gradio serves in-memory images from its cache wherever runs_dir lives (file paths outside
    the app's allowed folders would be refused).
    """
    from PIL import Image

    out = []
    for p in paths:
        with Image.open(p) as im:
            out.append((im.copy(), Path(p).stem))
    return out


if TYPE_CHECKING:
    _LockedEngine_is_a_SpeechEngine: type[SpeechEngine] = LockedEngine
    _GpuBatchEngine_is_a_SpeechEngine: type[SpeechEngine] = GpuBatchEngine
