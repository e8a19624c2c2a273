"""One utterance over several GPU calls: where a call starts and ends, and what it hands the next.

ZeroGPU lends a GPU for one call at a time (budget.py sizes each), so a long utterance is made by
several calls in turn. `CallBounds` is what a call's SynthesisSession is told: the `SessionCarry`
it goes on from (None: the utterance's start), and where it must hand over: after `call_frames`
frames (at a chunk boundary) or at the end of its segment (`one_segment`), or where its frame
source pauses (batched.py: the call made all it may of that segment). The carry holds the playing
segment's frames, the codec's state (streaming/playback.Playback.carry), what was counted and
the later segments' frames made ahead (`SegmentFrames`), so the calls' chunks join without a seam:
every frame and sample is made exactly once, in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from gepard_demo.streaming.chunks import SynthesisStats, stack_codes

if TYPE_CHECKING:
    from gepard_demo.codec.fsq import Codes
    from gepard_demo.streaming.playback import Playback


@dataclass
class SegmentFrames:
    """A later segment's frames, made in a GPU call before its turn to play (the segments of a
    call decode as rows of one batch: gepard_demo/zerogpu/batched.py), not yet read by the
    session: what the next call decodes without making them again, or goes on from. Its steps'
    traces come with it, so the stats and the page's plot stay whole once they are read."""

    codes: np.ndarray  # (n, 32) int64 frames made so far; a resumed request's sampler skips n draws
    p_stop: list[float]  # one per step: n, plus the stop step when the stop head fired
    entropy: list[float]  # per step, as p_stop
    nll: list[float]  # per frame
    ended: str | None = None  # "stop", "budget" or "force_stop"; None: it goes on from its frames


@dataclass
class SessionCarry:
    """Where an utterance stopped at the end of one call, for the next call to go on from it
    (SynthesisSession(calls=CallBounds(resume=...))): the segment it is in and the frames that segment has, the
    codec side (playback.Playback.carry), and what the session had counted. Every frame and
    sample of the utterance is made exactly once, in order, across the calls."""

    segment: int  # the segment the next call works on
    segment_codes: np.ndarray | None  # (n, 32) frames of it the session has read (None: none yet)
    decoding: dict
    ended_by: list[str]  # how each earlier segment ended
    stats: SynthesisStats
    codes: np.ndarray  # (frames, 32) every frame committed so far, in order
    # Segments (from `segment` on) with frames made ahead that nobody has read yet (SegmentFrames)
    ahead: dict[int, SegmentFrames] = field(default_factory=dict)


@dataclass(frozen=True)
class CallBounds:
    """streaming.seams.Handover for one GPU call: it goes on from `resume` and hands over after
    `call_frames` frames (None: no bound) or at its segment's end (`one_segment`)."""

    resume: SessionCarry | None = None
    call_frames: int | None = None
    one_segment: bool = False

    def resumed(self, stats: SynthesisStats) -> tuple[SynthesisStats, list[Codes]]:
        """What the earlier calls counted and committed, carried on (the session's own speed kept)."""
        if self.resume is None:
            return stats, []
        carried = self.resume.stats.copy()
        carried.speed = stats.speed
        codes: list[Codes] = [np.asarray(self.resume.codes, np.int16)] if len(self.resume.codes) else []
        return carried, codes

    def start(self, playback: Playback) -> tuple[int, np.ndarray | None]:
        """Where this call starts: the segment, and the frames of it an earlier call made (None:
        from its start); the codec stream and the segments' ends go on from the carry."""
        if self.resume is None:
            return 0, None
        playback.resume(self.resume.decoding, self.resume.ended_by)
        return self.resume.segment, self.resume.segment_codes

    def ends_at_chunk(self, made: int) -> bool:
        return self.call_frames is not None and made >= self.call_frames

    def ends_after_segment(self, segment: int, segments: int) -> bool:
        return self.one_segment and segment < segments - 1

    def carry(self, segment: int, segment_codes: list[Codes] | None, playback: Playback,
              stats: SynthesisStats, codes: np.ndarray) -> SessionCarry:
        """What the next call goes on from: this call ends in `segment`, having read `segment_codes` of it."""
        frames = np.asarray(stack_codes(segment_codes), dtype=np.int64) if segment_codes else None
        return SessionCarry(segment, frames, playback.carry(), list(playback.ended_by), stats.copy(),
                            codes.astype(np.int64))


if TYPE_CHECKING:  # the type checker holds each class to its seam's Protocol (mypy.ini)
    from gepard_demo.streaming.seams import Handover

    _CallBounds_is_a_Handover: type[Handover] = CallBounds
