"""What a session records as it reads its frames: the stats' traces and every committed frame's codes.

The codes are kept in order: the current segment's frame by frame, each finished segment's as one
int16 block (64 bytes a frame: a chapter's hour is 5 MB), for a re-cut, a loop detector or the
next GPU call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from gepard_demo.model.guards.ending import STOP

from .breaks import pause_samples

if TYPE_CHECKING:
    from gepard_demo.codec.fsq import Codes
    from gepard_demo.model.generation import FrameStep

    from .chunks import SynthesisStats


class Record:
    def __init__(self, stats: SynthesisStats, codes: list[Codes]):
        self.stats, self._codes = stats, codes
        self.segment_ends: list[float] = []  # where each segment read so far ends in the audio, s

    def take(self, step: FrameStep) -> bool:
        """A step counted: its p_stop and entropy, and its frame when it committed one (True)."""
        st = self.stats
        st.p_stop.append(float(step.p_stop))
        st.entropy.append(float(step.entropy))
        if step.done == STOP:  # the stop head ended it: the utterance is the frames before this step
            st.stop_frame = st.frames
        if step.codes is None:
            return False
        st.nll.append(float(step.nll) if step.nll is not None else float("nan"))
        self._codes.append(step.codes)
        st.frames += 1
        return True

    def end_segment(self, ended_by: list[str], frames: int, samples_per_frame: int, sample_rate: int,
                    pause_s: float = 0.0) -> int:
        """The segment that just ended, with `frames` frames and pause_s of silence after it (a
        break; none after the text's last segment: breaks.py): how each so far ended, where it ends
        in the audio (frame f starts at sample samples_per_frame x f, after the silences before it),
        its codes as one block. Returns the silence's exact length in samples."""
        before, pause = sum(self.stats.segment_pauses), pause_samples(pause_s, sample_rate)
        self.stats.segment_frames.append(frames)
        self.stats.segment_pauses.append(pause)
        self.segment_ends.append((self.stats.frames * samples_per_frame + before) / sample_rate)
        self.stats.ended_by = list(ended_by)
        if frames:
            block = np.concatenate([np.atleast_2d(np.asarray(c, dtype=np.int16)) for c in self._codes[-frames:]])
            if len(block) == frames:
                self._codes[-frames:] = [block]
        return pause

    def complete(self) -> None:
        """The utterance ended: the flags (stop_fired, runaway) now follow from ended_by."""
        self.stats.complete = True
        if not self.stats.stop_fired:
            self.stats.stop_frame = None

    def codes(self) -> np.ndarray:
        """(frames, 32) codes committed so far (int16)."""
        if not self._codes:
            return np.zeros((0, 32), np.int16)
        return np.concatenate([np.atleast_2d(np.asarray(c, dtype=np.int16)) for c in self._codes])
