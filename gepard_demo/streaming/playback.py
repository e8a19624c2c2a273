"""One call's way from committed frames to audio chunks: the decoder, the chunk cuts, the pace
a listener can follow, the end shaped, and the figures the stats keep of it.

A session adds each committed frame; `due` says when the pending frames make a chunk (the first
after `first_chunk_frames`, then a ramp: pacing.py, or the running batch's clock for a pooled
codec stream), `cut` decodes them, and `final` decodes the rest with the end fade and silence.
`hold_back` keeps the audio at most max_ahead_s ahead of real time since its first chunk: a
chapter on a fast engine must not pile its audio up unheard.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

import numpy as np

from .decoding import ChunkDecoder, EndOfSpeech
from .pacing import next_chunk_frames

if TYPE_CHECKING:
    from gepard_demo.codec.fsq import Codes
    from gepard_demo.model.generation import FrameStep
    from gepard_demo.settings import StreamSettings

    from .chunks import AudioChunk, SynthesisStats


class Playback:
    def __init__(self, t0: float, dec: ChunkDecoder, stream: StreamSettings, stats: SynthesisStats,
                 end_of_speech: EndOfSpeech | None = None):
        """t0: when the request started (the chunks' and stats' clock); end_of_speech: the end's
        shaping (None: the codec package's, codec/tail.py)."""
        if end_of_speech is None:
            from gepard_demo.codec import apply_end_of_speech

            end_of_speech = apply_end_of_speech
        self.end_of_speech: EndOfSpeech = end_of_speech
        self.t0, self.dec, self.stream, self.stats = t0, dec, stream, stats
        self.sample_rate = dec.sample_rate
        self.ended_by: list[str] = []  # per segment ended so far: "stop", "budget", "force_stop" or "cancel"
        self.made = 0  # frames this call made

    def add(self, codes: Codes) -> None:
        self.dec.add(codes)
        self.made += 1

    def hold_back(self, max_ahead_s: float | None, cancel: threading.Event) -> None:
        """Wait (until `cancel`) while the audio is more than max_ahead_s ahead of real time."""
        if max_ahead_s is None or self.stats.ttfa_s is None:
            return
        first = self.t0 + self.stats.ttfa_s
        while not cancel.is_set():
            over = self.dec.emitted / self.sample_rate - (time.perf_counter() - first) - max_ahead_s
            if over <= 0:
                return
            cancel.wait(min(over, 0.5))

    def due(self, step: FrameStep) -> bool:
        """Whether the frames pending make a chunk now."""
        dec = self.dec
        due = len(dec.pending) >= next_chunk_frames(self.stream, dec.pending_start)
        if self.stats.chunks > 0 and dec.pending and dec.aligned:
            # A pooled codec stream cuts at the batch's clock, so the streams of one running
            # batch push together (batching/codec_pool.py); exact decoding makes the cuts inaudible.
            due = due or (step.batch_step + 1) % self.stream.chunk_frames == 0
        return due

    def cut(self) -> tuple[np.ndarray, int]:
        """The pending frames decoded (all but the held-back tail), and the frame they start at."""
        frame_start = self.dec.pending_start
        return self.dec.decode_pending(), frame_start

    def pause(self, samples: int) -> tuple[np.ndarray, int]:
        """A break's silence (breaks.py): the frames pending and the held tail as they are (the
        speech goes on after it: no fade), then `samples` zeros; and the frame they start at."""
        frame_start = self.dec.pending_start
        return self.dec.pause(samples), frame_start

    def final(self) -> tuple[np.ndarray, int]:
        """The frames that did not fill a chunk and the held tail, with the end shaped."""
        frame_start = self.dec.pending_start
        return self.dec.finish(self.end_of_speech), frame_start

    def chunk(self, samples: np.ndarray, frame_start: int, final: bool) -> AudioChunk:
        return self.dec.chunk(samples, frame_start, self.dec.pending_start, final, time.perf_counter() - self.t0)

    def slower_rate(self, rate: float, samples_per_frame: int) -> float:
        """The slower of `rate` (audio s per s the frames are made at) and the codec's own (per s it decodes)."""
        if self.stats.decode_time_s <= 0:
            return rate
        decoded_s = self.dec.pending_start * samples_per_frame / self.sample_rate
        return round(min(rate, decoded_s / self.stats.decode_time_s), 3)

    def finish(self, samples_per_frame: int) -> None:
        """The run's figures: wall time, speech and audio seconds, the real-time factor."""
        st = self.stats
        st.wall_s = time.perf_counter() - self.t0
        st.speech_s = st.frames * samples_per_frame / self.sample_rate
        st.audio_s = self.dec.emitted / self.sample_rate
        st.rtf = st.wall_s / st.speech_s if st.speech_s > 0 else None
