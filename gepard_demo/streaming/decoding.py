"""The codec side of a streaming session: committed frames in, audio chunks out.

`ChunkDecoder` keeps the frames a session has committed but not decoded yet, decodes them through
one codec stream (exact or lookback) when the session says a chunk is due, holds back the last
fade_ms of samples so the end fade can still reach them (SynthesisSession's docstring), and
counts what it has sent. All of that can be handed to another process (`carry()`, `resume()`):
an utterance made by several GPU calls in turn (gepard_demo/zerogpu) decodes as one stream, and
its chunks join without a seam, exactly as if one call had made them.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Callable

import numpy as np

from gepard_demo.settings import StreamSettings

from .chunks import AudioChunk, SynthesisStats, stack_codes

if TYPE_CHECKING:
    from gepard_demo.codec.fsq import Codes
    from gepard_demo.model.seams import AudioCodec

# The end shaping (codec/tail.apply_end_of_speech): (samples, sample_rate, fade_ms, silence_ms) -> samples.
EndOfSpeech = Callable[[np.ndarray, int, float, float], np.ndarray]


class ChunkDecoder:
    def __init__(self, codec: AudioCodec, stream: StreamSettings, stats: SynthesisStats,
                 note_decode: Callable[[float, int], None] | None = None):
        """note_decode: told each decode's cost (seconds, frames), for a scheduler's admission rule."""
        self.stream, self.stats = stream, stats
        self.sample_rate = int(codec.sample_rate)
        self.decoder = codec.streamer(mode=stream.decode_mode, lookback=stream.lookback_frames)
        # Hold back at least the fade's sample count (+1 for any rounding in the codec).
        self.hold = int(math.ceil(stream.fade_ms * self.sample_rate / 1000.0)) + 1 if stream.fade_ms > 0 else 0
        self.held = np.zeros(0, dtype=np.float32)
        self.pending: list[Codes] = []  # codes committed but not yet decoded
        self.pending_start = 0  # utterance frame index of pending[0]
        self.emitted = 0  # samples sent so far
        self._note_decode = note_decode

    @property
    def aligned(self) -> bool:
        """A pooled codec stream cuts its chunks at the running batch's clock (batching/codec_pool.py)."""
        return self.decoder.aligned

    def add(self, codes: Codes) -> None:
        self.pending.append(codes)

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

    def pause(self, samples: int) -> np.ndarray:
        """A break's silence (breaks.py): the pending frames and the held tail as they are (the
        speech goes on after it: no fade), then `samples` zeros."""
        said = self.decode_pending() if self.pending else np.zeros(0, dtype=np.float32)
        held, self.held = self.held, np.zeros(0, dtype=np.float32)
        return np.concatenate([said, held, np.zeros(samples, dtype=np.float32)])

    def finish(self, end_of_speech: EndOfSpeech) -> np.ndarray:
        """The utterance's last samples: what is pending, then the held tail faded and the silence."""
        tail = self.decode_pending(last=True) if self.pending else np.zeros(0, dtype=np.float32)
        t = time.perf_counter()
        shaped = np.asarray(end_of_speech(self.held, self.sample_rate, self.stream.fade_ms, self.stream.silence_ms),
                            dtype=np.float32).reshape(-1)
        self.stats.decode_time_s += time.perf_counter() - t
        self.held = np.zeros(0, dtype=np.float32)
        return np.concatenate([tail, shaped])

    def chunk(self, samples: np.ndarray, frame_start: int, frame_end: int, final: bool, wall_s: float) -> AudioChunk:
        """The next AudioChunk of these samples, counted."""
        st = self.stats
        if st.ttfa_s is None and len(samples) > 0:
            st.ttfa_s = wall_s
        chunk = AudioChunk(samples, self.sample_rate, self.emitted, frame_start, frame_end, wall_s, final)
        self.emitted += len(samples)
        st.chunks += 1
        return chunk

    # -- another call goes on from here --------------------------------------------------------

    def carry(self) -> dict:
        """Everything above as plain CPU values (picklable)."""
        pending = np.asarray(stack_codes(self.pending), dtype=np.int64) if self.pending else np.zeros((0, 32), np.int64)
        return {"decoder": self.decoder.carry(), "held": self.held, "pending": pending,
                "pending_start": self.pending_start, "emitted": self.emitted}

    def resume(self, carried: dict) -> "ChunkDecoder":
        self.decoder.resume(carried["decoder"])
        self.held = np.asarray(carried["held"], dtype=np.float32)
        self.pending = list(carried["pending"])
        self.pending_start, self.emitted = int(carried["pending_start"]), int(carried["emitted"])
        return self

    # -- the codec stream's own life ------------------------------------------------------------

    def cancel(self) -> None:
        self.decoder.cancel()  # a pooled push that has not started is dropped

    def close(self) -> None:
        self.decoder.close()  # a pooled codec stream leaves its pool


def decode_frames(codec: AudioCodec, codes: np.ndarray, stream: StreamSettings,
                  pauses: dict[int, int] | None = None) -> np.ndarray:
    """A whole utterance's frames -> its audio, exactly as a session streams them: this decoder,
    the session's chunk cuts (pacing.next_chunk_frames), its breaks, its end. pauses: after so
    many frames, so many samples of a break's silence (a take's segment ends and segment_pauses).
    The page's re-cut of a take plays this."""
    import torch

    from gepard_demo.codec import apply_end_of_speech

    from .pacing import next_chunk_frames

    decoder, pauses = ChunkDecoder(codec, stream, SynthesisStats()), pauses or {}
    parts = []
    try:
        for n, frame in enumerate(torch.from_numpy(np.asarray(codes, dtype=np.int64)), start=1):
            decoder.add(frame)
            if len(decoder.pending) >= next_chunk_frames(stream, decoder.pending_start) or n == len(codes):
                parts.append(decoder.decode_pending())
            if pauses.get(n) and n < len(codes):
                parts.append(decoder.pause(pauses[n]))
        parts.append(decoder.finish(apply_end_of_speech))
    finally:
        decoder.close()
    return np.concatenate(parts).astype(np.float32, copy=False)
