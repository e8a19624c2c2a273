"""One GPU call's segments made together, as rows of one batch (issue 34): the frame source the
worker's SynthesisSession reads from (tasks.stream).

A call covers the segment that plays and the next ones (budget.CallPlan). Each of them that has
not ended is a row of one DecodeBatch over the resident talker, going on from the frames it
already has (BatchRequest.replay, its sampler having skipped their noise: RowSampler.skip), and
makes at most the frames the plan gives it in this call. The session reads the playing segment's
frames as from any engine; the batch steps only when that segment needs its next frame, so the
later rows' frames are made alongside it and kept here (with their p_stop, entropy and nll) until
their turn. A later segment's turn reads what it has without a step, then steps on while it is
live. A segment whose frames for this call are all made, or one the call does not cover, ends its
iterator with `paused` set: the session hands over there (session.py) and `carry()` adds to its
SessionCarry what the later segments have (SegmentFrames), so the next call decodes the ended
ones without making them again and resumes the others.

Everything runs in the session's thread: no step is made unless the session asks for a frame, so
a Stop ends the call at its next step event, and `close()` drops every row of the batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import torch

from gepard_demo.model.batch import DecodeLoop
from gepard_demo.model.frames import FrameMaker, FrameSource
from gepard_demo.model.guards.ending import RUNAWAY_ENDS, STOP
from gepard_demo.model.generation import FrameStep
from gepard_demo.model.request import FrameRequest
from gepard_demo.model.seams import Engine, ModelInfo
from gepard_demo.settings import SamplingSettings
from gepard_demo.streaming.chunks import stack_codes
from gepard_demo.streaming.segments import segment_sampling

from .carry import SegmentFrames, SessionCarry


@dataclass
class _Segment:
    """One segment of the text, as this call has it."""

    steps: list[FrameStep] = field(default_factory=list)  # not read before this call: carried or made now
    read: int = 0  # of those, how many the session has read in this call
    replay: torch.Tensor | None = None  # every frame it had when the call began, for its row's prefill
    before: int = 0  # of those, the frames read in earlier calls (not in `steps`)
    ended: str | None = None
    frames_left: int = 0  # frames this call may still make for it
    handle: int | None = None  # its row in the batch while it makes frames


class CallBatch(FrameMaker):
    """An engine look-alike for one call of one text: `stream_frames` serves each segment's
    frames (see the module docstring)."""

    takes_look_ahead = True  # SynthesisSession opens the later segments ahead: their frames are made here anyway

    def __init__(self, engine: Engine, segments: list[str], sampling: SamplingSettings, speaker: torch.Tensor | None,
                 carry: SessionCarry | None, allotted: dict[int, int]):
        """allotted: segment -> frames this call may make for it (budget.CallPlan.allotted())."""
        self.engine, self.segments, self.speaker = engine, segments, speaker
        self.samplings = [segment_sampling(sampling, j) for j in range(len(segments))]
        # A segment's request is known by its text and its derived seed (segments.segment_seed).
        self._index = {(text, s.seed): j for j, (text, s) in enumerate(zip(segments, self.samplings, strict=True))}
        self.allotted = allotted
        self._segments: dict[int, _Segment] = {}
        for j, frames in (carry.ahead.items() if carry is not None else ()):
            self._segments[j] = _Segment(steps=_steps(frames), ended=frames.ended,
                                         replay=torch.as_tensor(np.asarray(frames.codes, dtype=np.int64)))
        if carry is not None and carry.segment_codes is not None:  # the playing segment, read so far
            codes = torch.as_tensor(np.asarray(carry.segment_codes, dtype=np.int64))
            self._segments[carry.segment] = _Segment(replay=codes, before=len(codes))
        for j, allowed in allotted.items():
            seg = self._segments.setdefault(j, _Segment())
            seg.frames_left = allowed if seg.ended is None else 0
        self.batch: DecodeLoop | None = None
        self._sampled = False  # the batch sampled and has not advanced
        self.closed = False

    @property
    def model_info(self) -> ModelInfo:
        return self.engine.model_info

    # -- what the session calls -------------------------------------------------------------------

    def stream_frames(self, request: FrameRequest) -> "SegmentIterator":
        """The planned row of this request's segment (found by its text and seed): the call's
        rows, their speaker and resume were fixed when the call was planned."""
        index = self._index.get((request.text, request.sampling.seed))
        if index is None:
            raise ValueError("a segment this call was not made for")
        return SegmentIterator(self, index)

    # -- the batch ---------------------------------------------------------------------------------

    def _admit(self) -> DecodeLoop:
        """Every row of the call joins: those going on from the same number of frames in one prefill."""
        batch = self.batch = self.engine.new_batch()
        e = self.engine
        groups: dict[int, list[tuple[int, _Segment]]] = {}
        for j, seg in sorted(self._segments.items()):
            if seg.frames_left > 0:
                groups.setdefault(0 if seg.replay is None else len(seg.replay), []).append((j, seg))
        for _, group in sorted(groups.items()):
            requests = [e.request(self.segments[j], self.samplings[j], self.speaker, seg.replay) for j, seg in group]
            for (_, seg), handle in zip(group, batch.admit(requests), strict=True):
                seg.handle = handle
        return batch

    def step(self) -> None:
        """One decode step of every live row; a row whose frames for this call are made leaves."""
        batch = self._admit() if self.batch is None else self.batch
        if self._sampled:
            batch.advance()
            self._sampled = False
        if not batch:
            return
        by_handle = {s.handle: s for _, s in self._segments.items() if s.handle is not None}
        for handle, step in batch.sample():
            seg = by_handle[handle]
            seg.steps.append(step)
            if step.codes is not None:
                seg.frames_left -= 1
            if step.done is not None:
                seg.ended, seg.handle, seg.frames_left = step.done, None, 0
            elif seg.frames_left <= 0:
                batch.cancel(handle)  # paused: it goes on in the next call
                seg.handle = None
        self._sampled = True

    def next_step(self, index: int) -> FrameStep | None:
        """Segment `index`'s next step: one it has, else one made now; None when this call has
        no more of it (`paused` tells whether it goes on), or does not cover it: then what it
        has waits for the call that does, whose ask counts their decoding."""
        seg = self._segments.get(index) if index in self.allotted else None
        while not self.closed and seg is not None:
            if seg.read < len(seg.steps):
                seg.read += 1
                return seg.steps[seg.read - 1]
            if seg.handle is None and (self.batch is not None or seg.frames_left <= 0):
                return None
            self.step()
        return None

    def goes_on(self, index: int) -> bool:
        """Segment `index` has more to read in a later call: this call does not cover it, or it has not ended."""
        seg = self._segments.get(index)
        return index not in self.allotted or seg is None or seg.ended is None

    def close(self) -> None:
        """Every row leaves (a Stop, or the call's end); what was made stays for `carry`."""
        self.closed = True
        if self.batch is not None:
            self.batch.close()  # the fixed-shape loop's buffers go back to the engine, for the next call
        self.batch, self._sampled = None, False
        for seg in self._segments.values():
            seg.handle = None

    # -- the next call ---------------------------------------------------------------------------------

    def carry(self, carry: SessionCarry) -> SessionCarry:
        """`carry` (where the session handed over) with the frames the segments from there on have
        that the session has not read: made in this call, or carried from an earlier one."""
        ahead = {}
        for j, seg in sorted(self._segments.items()):
            # A segment the session has read from (the playing one: in carry.segment_codes, read to
            # its last frame made, as a session hands over only then) or read through is not carried.
            if j >= carry.segment and not seg.read and not seg.before and seg.steps:
                ahead[j] = _frames(seg.steps, seg.ended)
        return replace(carry, ahead=ahead)


class SegmentIterator(FrameSource):
    """One segment's FrameSteps from its CallBatch (stream_frames' contract); `paused` once it ended
    because this call has no more of it."""

    def __init__(self, call: CallBatch, index: int):
        self.call, self.index = call, index
        self.paused = False
        self._closed = False

    def __iter__(self) -> "SegmentIterator":
        return self

    def __next__(self) -> FrameStep:
        step = None if self._closed else self.call.next_step(self.index)
        if step is None:
            self.paused = not self._closed and not self.call.closed and self.call.goes_on(self.index)
            raise StopIteration
        return step

    def promote(self) -> None:
        """Its turn to play: nothing changes here (every row of the call is made alike)."""

    @property
    def made(self) -> int:
        seg = self.call._segments.get(self.index)
        return 0 if seg is None else _frame_count(seg)

    @property
    def finished(self) -> bool:
        seg = self.call._segments.get(self.index)
        return seg is not None and seg.ended is not None

    def cancel(self) -> None:
        self._closed = True

    close = cancel


def _frame_count(seg: _Segment) -> int:
    """Every frame a segment has: read in earlier calls, and in its steps."""
    return seg.before + sum(1 for s in seg.steps if s.codes is not None)


def _steps(frames: SegmentFrames) -> list[FrameStep]:
    """A carried segment's steps, as its row made them."""
    n = len(frames.codes)
    steps = []
    for k in range(n):
        done = frames.ended if k == n - 1 and frames.ended in RUNAWAY_ENDS else None
        steps.append(FrameStep(k, torch.as_tensor(np.asarray(frames.codes[k], dtype=np.int64)), frames.p_stop[k], 0.0,
                               done, 0, frames.entropy[k], frames.nll[k]))
    if frames.ended == STOP:
        steps.append(FrameStep(n, None, frames.p_stop[n], 0.0, STOP, 0, frames.entropy[n], None))
    return steps


def _frames(steps: list[FrameStep], ended: str | None) -> SegmentFrames:
    codes = [s.codes for s in steps if s.codes is not None]
    return SegmentFrames(np.asarray(stack_codes(codes), dtype=np.int64) if codes else np.zeros((0, 32), np.int64),
                         [float(s.p_stop) for s in steps], [float(s.entropy) for s in steps],
                         [float("nan") if s.nll is None else float(s.nll) for s in steps if s.codes is not None],
                         ended)


if TYPE_CHECKING:  # the type checker holds each class to its seam's Protocol (mypy.ini)
    from gepard_demo.model.seams import FrameEngine

    _CallBatch_is_a_FrameEngine: type[FrameEngine] = CallBatch
