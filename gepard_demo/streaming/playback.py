"""One call's way from committed frames to audio chunks: the codec stream, the chunk cuts, the pace
a listener can follow, the end shaped, and the audio's figures in the stats.

A session adds each committed frame; `due` says when the pending frames make a chunk (the first
after `first_chunk_frames`, then a ramp: pacing.py, or the running batch's clock for a pooled
codec stream), `cut` decodes them through one codec stream (exact or lookback), `pause` puts a
break's silence in, and `final` decodes the rest with the end fade and silence. The last fade_ms
of samples is held back so the end fade can still reach them (SynthesisSession's docstring).
`hold_back` keeps the audio at most max_ahead_s ahead of real time since its first chunk: a
chapter on a fast engine must not pile its audio up unheard.

All of it can be handed to another process (`carry()`, `resume()`): an utterance made by several
GPU calls in turn (gepard_demo/zerogpu) decodes as one stream, and its chunks join without a
seam, exactly as if one call had made them. The audio's figures (chunks, first audio, decode
time, audio and wall seconds, real-time factor) are written here and nowhere else; the frames'
are the session's Record's.
"""

from __future__ import annotations

import math
import threading
import time
from typing import TYPE_CHECKING, Callable

import numpy as np

from .chunks import AudioChunk, SynthesisStats, stack_codes
from .pacing import next_chunk_frames

if TYPE_CHECKING:
    from gepard_demo.codec.fsq import Codes
    from gepard_demo.model.generation import FrameStep
    from gepard_demo.model.seams import AudioCodec
    from gepard_demo.settings import StreamSettings

# The end shaping (codec/tail.apply_end_of_speech): (samples, sample_rate, fade_ms, silence_ms) -> samples.
EndOfSpeech = Callable[[np.ndarray, int, float, float], np.ndarray]


class Playback:
    def __init__(self, codec: AudioCodec, stream: StreamSettings, stats: SynthesisStats, *, t0: float | None = None,
                 end_of_speech: EndOfSpeech | None = None, note_decode: Callable[[float, int], None] | None = None):
        """t0: when the request started (the chunks' and stats' clock; None: now); end_of_speech:
        the end's shaping (None: the codec package's, codec/tail.py); note_decode: told each
        decode's cost (seconds, frames), for a scheduler's admission rule."""
        if end_of_speech is None:
            from gepard_demo.codec import apply_end_of_speech

            end_of_speech = apply_end_of_speech
        self.end_of_speech: EndOfSpeech = end_of_speech
        self.t0 = time.perf_counter() if t0 is None else t0
        self.stream, self.stats = stream, stats
        self.sample_rate = int(codec.sample_rate)
        self.decoder = codec.streamer(mode=stream.decode_mode, lookback=stream.lookback_frames)
        # Hold back at least the fade's sample count (+1 for any rounding in the codec).
        self.hold = int(math.ceil(stream.fade_ms * self.sample_rate / 1000.0)) + 1 if stream.fade_ms > 0 else 0
        self.held = np.zeros(0, dtype=np.float32)
        self.pending: list[Codes] = []  # codes committed but not yet decoded
        self.pending_start = 0  # utterance frame index of pending[0]
        self.emitted = 0  # samples sent so far
        self.ended_by: list[str] = []  # per segment ended so far: "stop", "budget", "force_stop" or "cancel"
        self.made = 0  # frames this call made
        self._note_decode = note_decode

    # -- frames in, chunks out --------------------------------------------------------------------

    def add(self, codes: Codes) -> None:
        self.pending.append(codes)
        self.made += 1

    def due(self, step: FrameStep) -> bool:
        """Whether the pending frames make a chunk now."""
        due = len(self.pending) >= next_chunk_frames(self.stream, self.pending_start)
        if self.stats.chunks > 0 and self.pending and self.decoder.aligned:
            # A pooled codec stream cuts at the batch's clock, so the streams of one running
            # batch push together (batching/codec_pool.py); exact decoding makes the cuts inaudible.
            due = due or (step.batch_step + 1) % self.stream.chunk_frames == 0
        return due

    def cut(self) -> tuple[np.ndarray, int]:
        """The pending frames decoded (all but the held-back tail), and the frame they start at."""
        frame_start = self.pending_start
        return self.decode_pending(), frame_start

    def pause(self, samples: int) -> tuple[np.ndarray, int]:
        """A break's silence (breaks.py): the frames pending and the held tail as they are (the
        speech goes on after it: no fade), then `samples` zeros; and the frame they start at."""
        frame_start = self.pending_start
        said = self.decode_pending() if self.pending else np.zeros(0, dtype=np.float32)
        held, self.held = self.held, np.zeros(0, dtype=np.float32)
        return np.concatenate([said, held, np.zeros(samples, dtype=np.float32)]), frame_start

    def final(self) -> tuple[np.ndarray, int]:
        """The utterance's last samples (what is pending, then the held tail faded and the
        silence), and the frame they start at."""
        frame_start = self.pending_start
        tail = self.decode_pending(last=True) if self.pending else np.zeros(0, dtype=np.float32)
        t = time.perf_counter()
        shaped = np.asarray(self.end_of_speech(self.held, self.sample_rate, self.stream.fade_ms,
                                               self.stream.silence_ms), dtype=np.float32).reshape(-1)
        self.stats.decode_time_s += time.perf_counter() - t
        self.held = np.zeros(0, dtype=np.float32)
        return np.concatenate([tail, shaped]), frame_start

    def decode_pending(self, last: bool = False) -> np.ndarray:
        """Decode what is pending; returns what may be sent now (all but the held-back tail).
        last: the utterance's last frames (a graphed codec stream may pad them: codec/graphed.py)."""
        t = time.perf_counter()
        push = self.decoder.push_last if last else self.decoder.push
        pcm = np.asarray(push(stack_codes(self.pending)), dtype=np.float32).reshape(-1)
        spent = time.perf_counter() - t
        self.stats.decode_time_s += spent
        if self._note_decode is not None:  # a pooled stream's share of its call, not the wait for the others
            self._note_decode(self.decoder.last_cost_s or spent, len(self.pending))
        self.pending_start += len(self.pending)
        self.pending = []
        self.held = np.concatenate([self.held, pcm])
        cut = max(0, len(self.held) - self.hold)
        out, self.held = self.held[:cut], self.held[cut:]
        return out

    def chunk(self, samples: np.ndarray, frame_start: int, final: bool) -> AudioChunk:
        """The next AudioChunk of these samples, counted."""
        st, wall_s = self.stats, time.perf_counter() - self.t0
        if st.ttfa_s is None and len(samples) > 0:
            st.ttfa_s = wall_s
        chunk = AudioChunk(samples, self.sample_rate, self.emitted, frame_start, self.pending_start, wall_s, final)
        self.emitted += len(samples)
        st.chunks += 1
        return chunk

    # -- the listener's pace ----------------------------------------------------------------------

    def hold_back(self, max_ahead_s: float | None, cancel: threading.Event) -> None:
        """Wait (until `cancel`) while the audio is more than max_ahead_s ahead of real time."""
        if max_ahead_s is None or self.stats.ttfa_s is None:
            return
        first = self.t0 + self.stats.ttfa_s
        while not cancel.is_set():
            over = self.emitted / self.sample_rate - (time.perf_counter() - first) - max_ahead_s
            if over <= 0:
                return
            cancel.wait(min(over, 0.5))

    def slower_rate(self, rate: float, samples_per_frame: int) -> float:
        """The slower of `rate` (audio s per s the frames are made at) and the codec's own (per s it decodes)."""
        if self.stats.decode_time_s <= 0:
            return rate
        decoded_s = self.pending_start * samples_per_frame / self.sample_rate
        return round(min(rate, decoded_s / self.stats.decode_time_s), 3)

    def count_end(self, samples_per_frame: int) -> None:
        """The run's figures once it ends: wall time, speech and audio seconds, the real-time factor."""
        st = self.stats
        st.wall_s = time.perf_counter() - self.t0
        st.speech_s = st.frames * samples_per_frame / self.sample_rate
        st.audio_s = self.emitted / self.sample_rate
        st.rtf = st.wall_s / st.speech_s if st.speech_s > 0 else None

    # -- another call goes on from here -----------------------------------------------------------

    def carry(self) -> dict:
        """The codec side as plain CPU values (picklable)."""
        pending = np.asarray(stack_codes(self.pending), dtype=np.int64) if self.pending else np.zeros((0, 32), np.int64)
        return {"decoder": self.decoder.carry(), "held": self.held, "pending": pending,
                "pending_start": self.pending_start, "emitted": self.emitted}

    def resume(self, carried: dict, ended_by: list[str]) -> Playback:
        """Go on from an earlier call's `carry()`, its segments ended as `ended_by` says."""
        self.decoder.resume(carried["decoder"])
        self.held = np.asarray(carried["held"], dtype=np.float32)
        self.pending = list(carried["pending"])
        self.pending_start, self.emitted = int(carried["pending_start"]), int(carried["emitted"])
        self.ended_by[:] = ended_by
        return self

    # -- the codec stream's own life ----------------------------------------------------------------

    def cancel(self) -> None:
        self.decoder.cancel()  # a pooled push that has not started is dropped

    def close(self) -> None:
        self.decoder.close()  # a pooled codec stream leaves its pool


def decode_frames(codec: AudioCodec, codes: np.ndarray, stream: StreamSettings,
                  pauses: dict[int, int] | None = None) -> np.ndarray:
    """A whole utterance's frames -> its audio, exactly as a session streams them: this playback's
    codec stream, chunk cuts (pacing.next_chunk_frames), breaks and end. pauses: after so many
    frames, so many samples of a break's silence (a take's segment ends and segment_pauses). The
    page's re-cut of a take plays this."""
    import torch

    play, pauses = Playback(codec, stream, SynthesisStats()), pauses or {}
    parts = []
    try:
        for n, frame in enumerate(torch.from_numpy(np.asarray(codes, dtype=np.int64)), start=1):
            play.add(frame)
            if len(play.pending) >= next_chunk_frames(stream, play.pending_start) or n == len(codes):
                parts.append(play.decode_pending())
            if pauses.get(n) and n < len(codes):
                parts.append(play.pause(pauses[n])[0])
        parts.append(play.final()[0])
    finally:
        play.close()
    return np.concatenate(parts).astype(np.float32, copy=False)
