"""`GpuSession`: one utterance made by a GPU call, with SynthesisSession's interface (iterate for
AudioChunks, `stats`, `audio()`, `cancel()`, `close()`), so the page's PCM route, player, wait
line and Stop work as they do in-process.

The request is checked here, in the main process, before anything is scheduled: the text, the
settings, the seed (fixed now, so the page can show it while the GPU works). The call's
per-step events keep `stats.frames` and `stats.p_stop` current and give a Stop its chance: the
consumer closes the call's iterator at the next event, within a frame, which ends the GPU call
(ZeroGPU's worker, or the forked one, sees the stop between two items). Time to first audio and
wall time are measured here, from the request start: what the visitor waits for, GPU queueing
included; generation and decode time are the worker's.
"""

from __future__ import annotations

import time
from typing import Any, Iterator

from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.streaming.base import OnceIterableSession
from gepard_demo.streaming.session import AudioChunk, StepEvent, SynthesisStats
from gepard_demo.streaming.text_input import clean_text

from .tasks import Failure, FrameCodes, StreamRequest

# What the worker's own stats say that the main process cannot see for itself.
WORKER_FIELDS = ("frames", "stop_fired", "runaway", "stop_frame", "p_stop", "gen_time_s", "decode_time_s",
                 "speech_s", "segments", "chunks")


class GpuSession(OnceIterableSession):
    def __init__(self, runner: Any, text: str, sampling: SamplingSettings, stream: StreamSettings, *,
                 sample_rate: int, request_start: float | None = None, speaker: Any = None, speed: str | None = None):
        sampling.validate()
        stream.validate()
        self.runner = runner
        self.text = clean_text(text)
        self.sampling = sampling.with_concrete_seed()
        self.stream = stream
        self.speaker = speaker
        self.sample_rate = int(sample_rate)
        self.stats = SynthesisStats(text=self.text, seed=self.sampling.seed, speed=speed)
        self._request_start = request_start
        self._codes = None
        super().__init__()

    def codes(self):
        """The committed frames' codes the call sent at its end (None before, or if it was stopped)."""
        return self._codes

    def close(self) -> None:
        self._cancel.set()  # the iterating thread closes the call at its next event

    def request(self) -> StreamRequest:
        return StreamRequest(self.text, self.sampling, self.stream, self.speaker)

    def _generate(self) -> Iterator[AudioChunk]:
        t0 = self._request_start if self._request_start is not None else time.perf_counter()
        st = self.stats
        items = self.runner.stream(self.request())
        try:
            for item in items:
                if self._cancel.is_set():
                    break
                if isinstance(item, StepEvent):
                    st.frames = item.frames
                    st.p_stop.append(item.p_stop)
                elif isinstance(item, AudioChunk):
                    now = time.perf_counter() - t0
                    if st.ttfa_s is None and len(item.samples):
                        st.ttfa_s = now
                    self._chunks.append(item.samples)
                    st.chunks += 1
                    yield item
                elif isinstance(item, FrameCodes):
                    self._codes = item.codes
                elif isinstance(item, SynthesisStats):
                    for name in WORKER_FIELDS:
                        setattr(st, name, getattr(item, name))
                    st.complete = item.complete
                elif isinstance(item, Failure):
                    raise item.error()
        finally:
            items.close()  # a Stop (or the page going away) ends the GPU call here
            st.cancelled = self._cancel.is_set() and not st.complete
            st.wall_s = time.perf_counter() - t0
            st.audio_s = sum(len(c) for c in self._chunks) / self.sample_rate
            st.rtf = st.wall_s / st.speech_s if st.speech_s else None
