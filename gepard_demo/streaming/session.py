"""One streaming synthesis session: text + settings -> audio chunks, then final stats.

The app, the CLI and the evaluation all stream through `SynthesisSession`, so what the demo
plays, what the CLI writes and what eval scores come from the same code path:

    session = SynthesisSession(engine, codec, text, sampling, stream)
    for chunk in session:          # AudioChunk: float32 PCM at codec.sample_rate
        play(chunk.samples)
    session.stats                  # SynthesisStats
    session.audio()                # everything emitted, concatenated

Frames come from `engine.stream_frames(text, sampling)` (one FrameStep per decode step) and
become audio through `codec.streamer(mode, lookback).push(codes)`, first `first_chunk_frames`
frames, then `chunk_frames` at a time. End-of-speech shaping (fade + silence, facts §5) is
applied once, at the very end.

Long text: text above `segment_chars` is split into sentences, packed into segments of at most
`segment_chars` characters, and the segments are generated one after the other in the same
session (one decoder stream, so the audio is continuous and chunk timing carries on). Text
above `max_text_chars` (2000 by default) is rejected with `TextError`: at ~15 characters per
second that is already over two minutes of audio, longer than a demo request should hold the
single engine.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.streaming.base import OnceIterableSession
from gepard_demo.streaming.text_input import MAX_TEXT_CHARS, SEGMENT_CHARS, clean_text, split_text


@dataclass(frozen=True)
class AudioChunk:
    """A piece of the utterance, ready to play.

    samples: float32 mono PCM at sample_rate.
    start_sample / start_s: where the chunk starts in the utterance.
    frame_start, frame_end: the frames [start, end) decoded for this chunk (session-wide
        frame numbering across segments). Because the end fade holds samples back (see
        `SynthesisSession`), the samples may lag the frames by up to fade_ms.
    wall_s: seconds from the request start until these samples were ready.
    final: the last chunk (carries the end fade and silence). When the stop head fires right
        after a chunk boundary and there is no fade or silence, it is empty: an end marker.
    """

    samples: np.ndarray
    sample_rate: int
    start_sample: int
    frame_start: int
    frame_end: int
    wall_s: float
    final: bool = False

    @property
    def start_s(self) -> float:
        return self.start_sample / self.sample_rate

    @property
    def duration_s(self) -> float:
        return len(self.samples) / self.sample_rate


@dataclass(frozen=True)
class StepEvent:
    """One decode step, between the chunks, from `SynthesisSession.events()`.

    frames: frames committed so far (session-wide); p_stop: this step's stop probability;
    wall_s: seconds from the request start.
    """

    frames: int
    p_stop: float
    wall_s: float


@dataclass
class SynthesisStats:
    """What one session did; filled in while it runs, complete once iteration ends.

    frames: frames committed (all segments).
    stop_fired: every segment ended by the stop head; runaway: some segment hit max_frames.
    stop_frame: frames committed when the last segment's stop fired (None otherwise).
    p_stop: one value per decode step, including the stop step itself.
    ttfa_s: request start -> first chunk's samples ready.
    gen_time_s: wall time spent waiting on the engine (prefill + decode steps).
    decode_time_s: wall time spent in the codec and the end-of-speech shaping.
    wall_s: request start -> last chunk ready.
    speech_s: audio of the committed frames; audio_s: what was emitted (speech + silence_ms).
    rtf: wall_s / speech_s (the end silence is free, so it does not flatter the figure).
    seed: the seed actually used (drawn here when the request had none).
    segments: how many pieces long text was split into; cancelled: closed before the end.
    speed: the engine's speed path (device, precision, threads, pipeline), when one was picked.
    """

    text: str = ""
    seed: int | None = None
    frames: int = 0
    stop_fired: bool = False
    runaway: bool = False
    stop_frame: int | None = None
    p_stop: list[float] = field(default_factory=list)
    ttfa_s: float | None = None
    gen_time_s: float = 0.0
    decode_time_s: float = 0.0
    wall_s: float = 0.0
    speech_s: float = 0.0
    audio_s: float = 0.0
    rtf: float | None = None
    chunks: int = 0
    segments: int = 1
    cancelled: bool = False
    complete: bool = False
    speed: str | None = None

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["p_stop"] = list(self.p_stop)
        return d


def _stack_codes(codes: list[Any]):
    """FrameStep codes are (32,) tensors (or arrays): stack them into one (n, 32) block."""
    first = codes[0]
    if hasattr(first, "detach"):  # torch tensor: keep the codec's native type
        import torch

        return torch.stack(list(codes))
    return np.stack([np.asarray(c) for c in codes])


class SynthesisSession(OnceIterableSession):
    """Stream one request: iterate for AudioChunks, then read `.stats` and `.audio()`.

    The session is single-use and is iterated by one thread. `cancel()` may be called from
    any thread: the iterating thread notices it before the next decode step, closes the
    engine's frame iterator (which frees the engine) and ends. `close()` cancels and closes
    the frame iterator itself, waiting at most for the decode step in flight (a lock guards
    each step), so it frees the engine even when nobody resumes the iteration.

    The end fade: apply_end_of_speech fades the last fade_ms of the utterance. A final chunk
    can be shorter than the fade (or the end can come right after a chunk boundary), so the
    fade would have to reach back into audio that was already sent. To keep the fade exact,
    each chunk holds back the last fade_ms of samples decoded so far; they go out with the
    next chunk, or, at the end, faded together with the silence in the final chunk. The cost
    is fade_ms of extra latency on the first chunk.
    """

    def __init__(
        self,
        engine: Any,
        codec: Any,
        text: str,
        sampling: SamplingSettings,
        stream: StreamSettings,
        *,
        request_start: float | None = None,
        max_text_chars: int = MAX_TEXT_CHARS,
        segment_chars: int = SEGMENT_CHARS,
        end_of_speech: Any = None,
        speaker: Any = None,
    ) -> None:
        """speaker: a (K, hidden) speaker prefix (SpeakerPrefix.tokens) for a reference voice; None = the default voice."""
        sampling.validate()
        stream.validate()
        self.engine = engine
        self.codec = codec
        self.text = clean_text(text, max_text_chars)
        self.segments = split_text(self.text, segment_chars)
        # Fix the seed here, not in the engine, so the stats can say which seed was used
        # and a listener can replay the exact utterance.
        self.sampling = sampling.with_concrete_seed()
        seed = self.sampling.seed
        self.stream = stream
        self.sample_rate = int(codec.sample_rate)
        self.samples_per_frame = int(codec.samples_per_frame)
        self.stats = SynthesisStats(text=self.text, seed=seed, segments=len(self.segments),
                                    speed=getattr(getattr(engine, "model_info", None), "speed", None))
        self._request_start = request_start
        if end_of_speech is None:  # the codec package's shaping, unless a caller swaps it
            from gepard_demo.codec import apply_end_of_speech as end_of_speech
        self._end_of_speech = end_of_speech
        super().__init__()
        # Held around each engine step and around closing the frame iterator: a generator
        # cannot be closed while another thread is inside it.
        self._lock = threading.RLock()
        self._frames_iter: Any = None
        self._decoder: Any = None  # the codec stream, while iterating
        self.speaker = speaker
        self._step_events = False
        self._codes: list[Any] = []  # every committed frame's codes, in order

    def codes(self) -> np.ndarray:
        """(frames, 32) codes committed so far (int16), e.g. for a loop detector."""
        if not self._codes:
            return np.zeros((0, 32), np.int16)
        return np.asarray(_stack_codes(self._codes), dtype=np.int16)

    def wait_line(self) -> str | None:
        """While the engine's scheduler keeps this request waiting: where it stands and why."""
        frames = self._frames_iter
        line = getattr(frames, "wait_line", None)
        return line() if line is not None else None

    def events(self) -> Iterator["AudioChunk | StepEvent"]:
        """Iterate the session with a StepEvent after every decode step as well as the chunks:
        a GPU call (gepard_demo/zerogpu) yields them, so that Stop reaches it within a frame
        and the page learns frames and p_stop as they are made."""
        self._step_events = True
        return iter(self)

    # -- control ---------------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop from any thread, at once: the frame source and the codec stream are told too
        (a scheduler's request leaves its queue or batch, a pipeline's talker stops, a pooled
        codec push that has not started is dropped), so an iterating thread that waits on
        either returns now instead of when its frame or samples come."""
        self._cancel.set()
        for part in (self._frames_iter, self._decoder):
            stop = getattr(part, "cancel", None)
            if stop is not None:
                stop()

    def close(self) -> None:
        """Cancel and free the engine (waits for the decode step in flight, if any)."""
        self.cancel()
        with self._lock:
            self._close_frames()

    def _close_frames(self) -> None:
        it, self._frames_iter = self._frames_iter, None
        if it is not None and hasattr(it, "close"):
            it.close()

    # -- streaming -------------------------------------------------------------------------

    def _generate(self) -> Iterator[AudioChunk]:
        t0 = self._request_start if self._request_start is not None else time.perf_counter()
        stats = self.stats
        stream = self.stream
        sr = self.sample_rate
        # Hold back at least the fade's sample count (+1 for any rounding in the codec).
        hold = int(math.ceil(stream.fade_ms * sr / 1000.0)) + 1 if stream.fade_ms > 0 else 0
        decoder = self._decoder = self.codec.streamer(mode=stream.decode_mode, lookback=stream.lookback_frames)
        note_decode = getattr(self.engine, "note_decode", None)  # batching.scheduler's, when there is one
        held = np.zeros(0, dtype=np.float32)
        pending: list[Any] = []  # codes committed but not yet decoded
        pending_start = 0  # session frame index of pending[0]
        emitted = 0  # samples sent so far
        ended_by = []  # per segment: "stop", "budget" or "cancel"

        def emit(samples: np.ndarray, frame_start: int, frame_end: int, final: bool) -> AudioChunk:
            nonlocal emitted
            now = time.perf_counter() - t0
            if stats.ttfa_s is None and len(samples) > 0:
                stats.ttfa_s = now
            chunk = AudioChunk(samples, sr, emitted, frame_start, frame_end, now, final)
            emitted += len(samples)
            self._chunks.append(samples)
            stats.chunks += 1
            return chunk

        def finish() -> None:
            stats.wall_s = time.perf_counter() - t0
            stats.speech_s = stats.frames * self.samples_per_frame / sr
            stats.audio_s = emitted / sr
            stats.rtf = stats.wall_s / stats.speech_s if stats.speech_s > 0 else None

        def decode_pending() -> np.ndarray:
            nonlocal pending, pending_start, held
            t = time.perf_counter()
            pcm = np.asarray(decoder.push(_stack_codes(pending)), dtype=np.float32).reshape(-1)
            spent = time.perf_counter() - t
            stats.decode_time_s += spent
            if note_decode is not None:  # a scheduler's admission rule counts the codec's cost:
                # a pooled stream's share of its call, not the wait for the other streams' chunks
                note_decode(getattr(decoder, "last_cost_s", None) or spent, len(pending))
            pending_start += len(pending)
            pending = []
            held = np.concatenate([held, pcm])
            cut = max(0, len(held) - hold)
            out, held = held[:cut], held[cut:]
            return out

        try:
            for seg_no, seg_text in enumerate(self.segments):
                last_segment = seg_no == len(self.segments) - 1
                with self._lock:
                    if self._cancel.is_set():
                        break
                    voice = {} if self.speaker is None else {"speaker": self.speaker}
                    frames_iter = iter(self.engine.stream_frames(seg_text, self.sampling, **voice))
                    self._frames_iter = frames_iter
                seg_end = None
                while True:
                    with self._lock:
                        if self._cancel.is_set():
                            seg_end = "cancel"
                            break
                        t = time.perf_counter()
                        step = next(frames_iter, None)
                        stats.gen_time_s += time.perf_counter() - t
                    if step is None:  # ended without saying why: cancelled from outside, else the budget
                        seg_end = "cancel" if self._cancel.is_set() else "budget"
                        break
                    stats.p_stop.append(float(step.p_stop))
                    if step.codes is not None:
                        pending.append(step.codes)
                        self._codes.append(step.codes)
                        stats.frames += 1
                    if self._step_events:
                        yield StepEvent(stats.frames, float(step.p_stop), time.perf_counter() - t0)
                    target = stream.first_chunk_frames if stats.chunks == 0 else stream.chunk_frames
                    due = len(pending) >= target
                    if stats.chunks > 0 and pending and getattr(decoder, "aligned", False):
                        # A pooled codec stream cuts at the batch's clock, so the streams of one
                        # running batch push together (batching/codec_pool.py); exact decoding
                        # makes the cut points inaudible.
                        due = due or (step.batch_step + 1) % stream.chunk_frames == 0
                    # The utterance's last frames go out with the end shaping in the final chunk.
                    ending = step.done is not None and last_segment
                    if due and not ending:
                        frame_start = pending_start
                        out = decode_pending()
                        if len(out):  # all of it may be held back for a long fade
                            yield emit(out, frame_start, pending_start, False)
                    if step.done is not None:
                        seg_end = step.done
                        if step.done == "stop":
                            stats.stop_frame = stats.frames
                        break
                with self._lock:
                    self._close_frames()
                ended_by.append(seg_end)
                if seg_end == "cancel":
                    break
            if self._cancel.is_set():
                return
            # Flush the frames that did not fill a chunk, then shape the end.
            frame_start = pending_start
            tail = decode_pending() if pending else np.zeros(0, dtype=np.float32)
            t = time.perf_counter()
            shaped = np.asarray(
                self._end_of_speech(held, sr, stream.fade_ms, stream.silence_ms), dtype=np.float32
            ).reshape(-1)
            stats.decode_time_s += time.perf_counter() - t
            held = np.zeros(0, dtype=np.float32)
            final = np.concatenate([tail, shaped])
            stats.stop_fired = bool(ended_by) and all(e == "stop" for e in ended_by)
            stats.runaway = any(e == "budget" for e in ended_by)
            if not stats.stop_fired:
                stats.stop_frame = None
            chunk = emit(final, frame_start, pending_start, True)
            # Complete before the last yield: a consumer may stop right after the final chunk.
            stats.complete = True
            finish()
            yield chunk
        except GeneratorExit:  # the consumer stopped iterating: same as a cancel
            self._cancel.set()
            raise
        finally:
            # Also reached when the consumer stops iterating early (GeneratorExit at a yield).
            with self._lock:
                self._close_frames()
            if hasattr(decoder, "close"):  # a pooled codec stream leaves its pool
                decoder.close()
            if not stats.complete:
                stats.cancelled = self._cancel.is_set()
                finish()
