"""The page's host when the GPU sits behind a process boundary (ZeroGPU, or its forked emulation).

`GpuHost` stands where `ModelHost` stands: the controller asks it for sessions (`GpuSession`,
one GPU call each), the voice group for speaker prefixes (`GpuVoices`, one GPU call per new
reference), the Eval tab for its batches (`host.gpu.call`, see eval/ui/common.py). The main
process keeps the engine and codec only for what needs no GPU (their config, the sample rate);
their forward passes are gated (zerogpu/resident.py). What the main process does keep is the
state the page needs between calls: the prefix cache, the lock, the job mailboxes.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from gepard_demo.bounded import Bounded
from gepard_demo.ui.hosts.gpu_refusals import explain
from gepard_demo.ui.hosts.model_host import EngineFacts, ModelHost
from gepard_demo.ui.jobs.turns import FairLock
from gepard_demo.ui.page.voice import PageVoices
from gepard_demo.units import SAMPLE_RATE
from gepard_demo.voice.reference_audio import (
    REFERENCE_WINDOW,
    PageAudio,
    ReferenceAudioError,
    page_audio,
    prepare_reference,
)
from gepard_demo.zerogpu import tasks
from gepard_demo.zerogpu.budget import GpuBudget, StartTimes
from gepard_demo.zerogpu.forked import Forked
from gepard_demo.zerogpu.resident import Resident
from gepard_demo.zerogpu.runners import GpuRunner, ZeroGpu
from gepard_demo.zerogpu.session import AS_WRITTEN_REASON, GpuSession

if TYPE_CHECKING:
    from gepard_demo.codec.base import Codec
    from gepard_demo.model.guards.stop_rule import Derived
    from gepard_demo.model.seams import Engine
    from gepard_demo.settings import StreamSettings
    from gepard_demo.streaming.seams import SessionRequest
    from gepard_demo.ui.takes import Take

# A GPU call plans its segments when it starts and pays for the time it holds the GPU: text that is
# still being written would hold it idle between sentences.

MODES = ("zerogpu", "emulate")


@dataclass
class GpuHost(EngineFacts):
    """concurrency: Generates at once, each its own GPU call (ZeroGPU schedules every visitor's call
    on its own, billed to that visitor: nothing is shared but the page). `own_turn`: a Generate
    does not wait for the lock; the Eval tab's runs still take turns among themselves."""

    gpu: GpuRunner  # ZeroGpu, or Forked (emulate)
    resident: Resident
    budget: GpuBudget
    requested: str
    fallback_reason: str | None = None
    notices: list[str] = field(default_factory=list)
    lock: FairLock = field(default_factory=FairLock)
    starts: StartTimes = field(default_factory=StartTimes)  # cold starts measured: the asks budget for them
    concurrency: int = 4
    own_turn = True
    # The resident's, for config and model info only: their forward passes are gated (resident.py).
    engine: Engine = field(init=False)
    codec: Codec = field(init=False)

    def __post_init__(self) -> None:
        self.engine, self.codec = self.resident.engine, self.resident.codec

    @classmethod
    def around(cls, host: ModelHost, mode: str, budget: GpuBudget = GpuBudget(), concurrency: int = 4,
               start_delay_s: float = 0.0) -> "GpuHost":
        """The loaded ModelHost's engine and codec placed behind the boundary `mode` (MODES).
        start_delay_s: an emulated worker's cold start (benchmarks)."""
        if mode not in MODES:
            raise ValueError(f"GPU boundary must be one of {MODES}, got {mode!r}")
        resident = Resident.place(host.engine, host.codec, guarded=True)
        gpu = ZeroGpu(resident) if mode == "zerogpu" else Forked(resident, concurrency, start_delay_s)
        what = ("ZeroGPU: a Generate is a few GPU calls, each making the text segment that plays and the next "
                "ones together and asking for what they are expected to take; each reference voice and evaluation "
                "batch is one call (a worker process holds the GPU only for that call)." if mode == "zerogpu" else
                "GPU calls run in forked worker processes, as on ZeroGPU (`--zerogpu emulate`).")
        return cls(gpu, resident, budget, host.requested, host.fallback_reason, [*host.notices, what],
                   concurrency=concurrency)

    # -- what needs no GPU ------------------------------------------------------------------------

    def __call__(self) -> Engine:
        return self.engine  # the Eval tab's engine provider; it sends batches through self.gpu

    def warm_up(self, stream: StreamSettings | None = None) -> float:
        return 0.0  # CUDA exists only inside a GPU call; a first call sets its kernels up itself

    # -- GPU calls --------------------------------------------------------------------------------

    def new_session(self, request: SessionRequest) -> GpuSession:
        """request.speaker: the tokens of a prefix GpuVoices made; max_ahead_s: unused (each GPU call
        is sized to its part, so no call runs far ahead)."""
        return GpuSession(self.gpu, request, sample_rate=self.sample_rate, speed=self.info.speed, budget=self.budget,
                          starts=self.starts)

    def recut(self, take: Take, threshold: float) -> tuple[np.ndarray, Derived]:
        """In a GPU call of its own: the codec runs where the GPU is."""
        from gepard_demo.ui.takes import recut_resident

        frames = len(take.codes) if take.codes is not None else 0
        ask = self.budget.decode_s(frames, self.starts.estimate())
        return self.gpu.call(recut_resident, take, threshold, duration_s=ask)

    @staticmethod
    def explain(exc: BaseException) -> str | None:
        """ZeroGPU's refusals and failures as one line for the page (gpu_refusals.py)."""
        return explain(exc)

    def voices(self) -> "GpuVoices":
        return GpuVoices(self)

    def locked_controls(self) -> dict[str, str]:
        return {"text_arrival": AS_WRITTEN_REASON, "words_per_s": AS_WRITTEN_REASON}


class GpuVoices(PageVoices):
    """Reference audio from the page -> a speaker prefix made in a GPU call, cached here by content
    (the worker's own cache goes with the worker). The reference is decoded and checked against
    the 3-15 s window here, so a bad one costs no GPU time."""

    made_where = " on the GPU"

    def __init__(self, host: GpuHost, cache_size: int = 32):
        self.host = host
        self._cache: Bounded[str, tasks.Prefix] = Bounded(cache_size)
        self._lock = threading.Lock()

    def prefix(self, ref_audio: PageAudio) -> tasks.Prefix | None:
        if ref_audio is None:
            return None
        if self.host.resident.prefixer is None:
            raise ReferenceAudioError(self.host.resident.no_cloning)
        samples, rate = page_audio(ref_audio)
        key = hashlib.sha256(f"{rate}|{samples.shape}|".encode() + np.ascontiguousarray(samples).tobytes()).hexdigest()
        with self._lock:
            if (hit := self._cache.touch(key)) is not None:
                return hit
        seconds = len(prepare_reference(samples, rate, REFERENCE_WINDOW)) / SAMPLE_RATE  # raises with the reason
        try:  # its own GPU call, as a Generate's: no turn to wait for
            prefix = self.host.gpu.call(tasks.speaker_prefix, samples, rate,
                                        duration_s=self.host.budget.prefix_s(seconds, self.host.starts.estimate()))
        except Exception as exc:
            line = explain(exc) or (str(exc) if isinstance(exc, tasks.GpuCallError) else None)
            if line is None:
                raise
            raise ReferenceAudioError(f"the GPU could not make its prefix: {line}") from exc
        with self._lock:
            self._cache[key] = prefix
        return prefix


if TYPE_CHECKING:  # the type checker holds each class to its seam's Protocol (mypy.ini)
    from gepard_demo.streaming.seams import Voices

    _GpuVoices_is_a_Voices: type[Voices] = GpuVoices
