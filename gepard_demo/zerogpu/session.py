"""`GpuSession`: one utterance made by GPU calls, with SynthesisSession's interface (iterate for
AudioChunks, `stats`, `audio()`, `cancel()`, `close()`), so the page's PCM route, player, wait
line and Stop work as they do in-process.

The request is checked here, in the main process, before anything is scheduled: the text, the
settings, the seed (fixed now, so the page can show it while the GPU works). Then the utterance
is made call by call (budget.py): each call makes the segment that plays and the next ones
together, as rows of one batch (batched.py), and asks ZeroGPU for what that batch is expected to
take; what a call did not finish goes on in the next one from the carry it handed back (the
playing segment's frames and the codec's state, the later segments' frames made ahead), so the
chunks join without a seam. Every call's ask is in `stats.gpu_asks_s`.

The calls' per-step events keep `stats.frames` and `stats.p_stop` current and give a Stop its
chance: the consumer closes the call's iterator at the next event, within a frame, which ends
the GPU call (ZeroGPU's worker, or the forked one, sees the stop between two items), and no
further call is made. While ZeroGPU still queues the call or its worker starts, there is no
event: the stop then takes effect at the call's first one. Time to first audio and wall time are
measured here, from the request start: what the visitor waits for, GPU queueing included;
generation and decode time are the workers'.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Iterator

from gepard_demo.declare import values_of
from gepard_demo.settings import SettingsError
from gepard_demo.streaming.base import OnceIterableSession
from gepard_demo.streaming.plan import plan
from gepard_demo.streaming.seams import SessionRequest
from gepard_demo.streaming.session import AudioChunk, StepEvent, SynthesisStats
from gepard_demo.streaming.text_input import MAX_TEXT_CHARS

from .budget import GpuBudget, Made, StartTimes
from .carry import SessionCarry
from .tasks import CallStart, Failure, FrameCodes, StreamRequest

if TYPE_CHECKING:
    import numpy as np

    from .runners import GpuRunner

AS_WRITTEN_REASON = "not behind ZeroGPU: a GPU call would wait, paid for, between the sentences as they are written"

# What the worker's own stats say that the main process cannot see for itself.
WORKER_FIELDS = ("frames", "stop_frame", "p_stop", "gen_time_s", "decode_time_s",
                 "speech_s", "segments", "chunks", "ended_by", "segment_frames", "segment_pauses", "entropy", "nll")  # the flags: from ended_by


class GpuSession(OnceIterableSession):
    segments: list[str]  # its text's segments, each planned into the GPU calls
    def __init__(self, runner: GpuRunner, request: SessionRequest, *, sample_rate: int, speed: str | None = None,
                 budget: GpuBudget = GpuBudget(), starts: StartTimes | None = None):
        """request: the utterance, taken whole (its speaker a (K, hidden) CPU prefix or None; its
        max_text_chars the page's limit, default MAX_TEXT_CHARS). budget, starts: how each call is
        sized (budget.py) and the cold starts measured so far."""
        if request.words_per_s is not None:  # each call is sized to text it already has
            raise SettingsError(f"text_arrival as written: {AS_WRITTEN_REASON}", "text_arrival")
        planned = plan(request.text, request.sampling, max_text_chars=request.max_text_chars or MAX_TEXT_CHARS)
        self.runner = runner
        self.text, self.sampling = planned.text, planned.sampling
        self.segments = planned.segments  # as the worker's SynthesisSession plans it
        self.stream = request.stream
        self.speaker = request.prefix()
        # What each call sends: the planned text and concrete seed, so every call plans the same
        # segments; the page's clock and pacing stay here (max_ahead_s: each call is sized to its part).
        self.utterance = SessionRequest(self.text, self.sampling, self.stream, speaker=self.speaker)
        request_start = request.request_start
        self.sample_rate = int(sample_rate)
        self.budget, self.starts = budget, starts if starts is not None else StartTimes()
        self.stats = SynthesisStats(text=self.text, seed=self.sampling.seed, speed=speed,
                                    segments=len(self.segments))
        self._request_start = request_start
        self._codes: np.ndarray | None = None
        self._in_call = False  # a call is open: queued, starting, or running
        self._carried: SessionCarry | None = None  # what the last call handed over
        super().__init__()

    def codes(self) -> np.ndarray | None:
        """The committed frames' codes the last call sent at its end (None before, or if it was stopped)."""
        return self._codes

    def close(self) -> None:
        self._cancel.set()  # the iterating thread closes the call at its next event

    def stop_note(self) -> str | None:
        """After a Stop, what is still winding down, in words for the page (None: nothing)."""
        if self._in_call and self.cancelled:
            return "the GPU call ends at its first step, as soon as ZeroGPU starts it"
        return None

    def request(self, carry: SessionCarry | None = None) -> StreamRequest:
        """The next call's part: from `carry`, the segments its plan covers (budget.GpuBudget.plan)."""
        first = 0 if carry is None else carry.segment
        made: dict[int, Made] = {}
        if carry is not None:
            made = {j: Made(len(f.codes), f.ended is not None) for j, f in carry.ahead.items()}
            if carry.segment_codes is not None:  # the playing segment: what it has is decoded already
                made[first] = Made(len(carry.segment_codes), False, len(carry.segment_codes))
        plan = self.budget.plan(self.segments, self.sampling, first, made, self.starts.estimate())
        return StreamRequest(self.utterance, carry, plan, plan.ask_s)

    def _generate(self) -> Iterator[AudioChunk]:
        t0 = self._request_start if self._request_start is not None else time.perf_counter()
        st = self.stats
        carry: SessionCarry | None = None
        try:
            while not self._cancel.is_set():
                request = self.request(carry)
                assert request.ask_s is not None  # request() sizes every call it makes
                st.gpu_asks_s.append(request.ask_s)
                yield from self._call(request, t0)
                carry = self._carried
                if carry is None:
                    break
        finally:
            st.cancelled = self._cancel.is_set() and not st.complete
            st.wall_s = time.perf_counter() - t0
            st.audio_s = self.emitted_samples / self.sample_rate
            st.rtf = st.wall_s / st.speech_s if st.speech_s else None

    def _call(self, request: StreamRequest, t0: float) -> Iterator[AudioChunk]:
        """One GPU call's items; sets `_carried` when the utterance goes on in the next call."""
        st = self.stats
        self._carried = None
        self._in_call = True
        items = self.runner.stream(request)
        try:
            for item in items:
                if self._cancel.is_set():
                    break
                if isinstance(item, StepEvent):
                    st.frames = item.frames
                    st.p_stop.append(item.p_stop)
                    st.entropy.append(item.entropy)  # the page's live plot draws the probe beside p_stop
                elif isinstance(item, AudioChunk):
                    now = time.perf_counter() - t0
                    if st.ttfa_s is None and len(item.samples):
                        st.ttfa_s = now
                    self._keep(item.samples)
                    st.chunks += 1
                    yield item
                elif isinstance(item, CallStart):
                    if item.cold_start_s is not None:
                        self.starts.note(item.cold_start_s)
                elif isinstance(item, SessionCarry):
                    self._carried = item
                elif isinstance(item, FrameCodes):
                    self._codes = item.codes
                elif isinstance(item, SynthesisStats):
                    for name, value in values_of(item, WORKER_FIELDS).items():
                        setattr(st, name, value)
                    st.complete = item.complete
                elif isinstance(item, Failure):
                    raise item.error()
        finally:
            items.close()  # a Stop (or the page going away) ends the GPU call here
            self._in_call = False


if TYPE_CHECKING:  # the type checker holds each class to its seam's Protocol (mypy.ini)
    from gepard_demo.streaming.seams import Session

    _GpuSession_is_a_Session: type[Session] = GpuSession
