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
`segment_chars` characters; text written as it comes (`words_per_s`, text_feed.py) into the speech
WebSocket's sentences, each starting when it closes. While one segment plays, up to `look_ahead`
later ones are generated as rows of the running batch (segments.py); on a plain engine they run
one after another, with the same frames. The audio is decoded in order, one decoder stream for the
whole text. Text above `max_text_chars` is refused (TextError): 2000 characters where visitors
share the engine or a GPU quota (a public Space), a chapter (text_input.CHAPTER_CHARS) elsewhere.

One utterance, several calls: `call_frames` ends the session at the first chunk boundary after
that many frames, and `one_segment` at the end of its segment when more follow; either leaves a
`SessionCarry` in `.carry`, and a session made with `resume=carry` (in another process, the next
GPU call: gepard_demo/zerogpu) goes on from there. Its talker resumes the segment from the frames
it already has (engine.stream_frames(resume=...)), its codec stream from the carried state
(decoding.py), so the chunks of all the calls join into one stream. A frame source may also end
a call itself: one whose iterator ends with `paused` set has made all this call may make of its
segment (zerogpu/batched.py), and the session hands over there, mid-chunk if need be.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import TYPE_CHECKING, Iterator

import numpy as np

from gepard_demo.model.guards.ending import BUDGET, CANCEL, STOP
from gepard_demo.model.guards.guardrails import force_stop_for
from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.streaming.base import OnceIterableSession
from gepard_demo.streaming.text_input import MAX_TEXT_CHARS, SEGMENT_CHARS, clean_text, split_text

from .chunks import AudioChunk, SessionCarry, StepEvent, SynthesisStats, stack_codes
from .decoding import ChunkDecoder, EndOfSpeech
from .pacing import next_chunk_frames
from .segments import Progress, SegmentSources
from .text_feed import Writing, write

if TYPE_CHECKING:
    import torch

    from gepard_demo.codec.fsq import Codes
    from gepard_demo.model.frames import FrameSource
    from gepard_demo.model.generation import FrameStep
    from gepard_demo.model.seams import AudioCodec, FrameEngine

__all__ = ["AudioChunk", "SessionCarry", "StepEvent", "SynthesisSession", "SynthesisStats"]


class SynthesisSession(OnceIterableSession):
    """Stream one request: iterate for AudioChunks, then read `.stats` and `.audio()`.

    The session is single-use and is iterated by one thread. `cancel()` may be called from
    any thread: the iterating thread notices it before the next decode step, closes the
    engine's frame iterator (which frees the engine) and ends. `close()` cancels and closes
    the frame iterator itself, waiting at most for the decode step in flight (a lock guards
    each step), so it frees the engine even when nobody resumes the iteration.

    The end fade reaches back fade_ms, past a short final chunk into audio already sent: so each
    chunk holds back the last fade_ms decoded (they go with the next chunk, or faded with the
    silence in the final one), at the cost of fade_ms of latency on the first chunk.
    """

    def __init__(
        self, engine: FrameEngine, codec: AudioCodec, text: str, sampling: SamplingSettings, stream: StreamSettings,
        *, request_start: float | None = None, max_text_chars: int = MAX_TEXT_CHARS,
        segment_chars: int = SEGMENT_CHARS, end_of_speech: EndOfSpeech | None = None, look_ahead: int = 0,
        max_ahead_s: float | None = None, speaker: torch.Tensor | None = None, resume: SessionCarry | None = None,
        call_frames: int | None = None, one_segment: bool = False, words_per_s: float | None = None,
    ) -> None:
        """speaker: a (K, hidden) speaker prefix (SpeakerPrefix.tokens) for a reference voice; None = the default voice.
        resume / call_frames / one_segment: one utterance over several calls (module docstring).
        look_ahead: how many segments of a long text may be generated ahead of the one playing,
            on an engine that takes it (segments.py); 0: one after another.
        max_ahead_s: the audio may run at most this far ahead of real time since its first chunk
            (a listener plays in real time); beyond it the session waits. None: no bound.
        words_per_s: the text is written word by word at this rate (text_feed.py); None: at once."""
        sampling.validate()
        stream.validate()
        self.engine = engine
        self.codec = codec
        self.text = clean_text(text, max_text_chars)
        self.writing = None if words_per_s is None else Writing(write(self.text, words_per_s))
        self.segments = list(self.writing.written.units) if self.writing else split_text(self.text, segment_chars)
        # Fix the seed here, not in the engine, so the stats can say which seed was used
        # and a listener can replay the exact utterance.
        self.sampling = sampling.with_concrete_seed()
        for segment in self.segments:  # "auto" must scale to every segment: refused now, naming the field
            force_stop_for(self.sampling, segment)
        seed = self.sampling.seed
        self.stream = stream
        self.sample_rate = int(codec.sample_rate)
        self.samples_per_frame = int(codec.samples_per_frame)
        self.stats = SynthesisStats(text=self.text, seed=seed, segments=len(self.segments),
                                    speed=engine.model_info.speed)
        self._request_start = request_start
        if end_of_speech is None:  # the codec package's shaping, unless a caller swaps it
            from gepard_demo.codec import apply_end_of_speech as end_of_speech
        self._end_of_speech = end_of_speech
        super().__init__()
        # Held around each engine step and closing the frame iterator (a generator in use cannot close).
        self._lock = threading.RLock()
        self._sources = SegmentSources(engine, self.segments, self.sampling, speaker, look_ahead, self,
                                       ready=self.writing.ready if self.writing else None)
        self.max_ahead_s = max_ahead_s
        self._segment_ends: list[float] = []  # where each segment read so far ends in the audio, s
        self._decoder: ChunkDecoder | None = None  # the codec side, while iterating
        self.speaker = speaker
        self._step_events = False
        # Every committed frame's codes, in order: the current segment's frame by frame, each
        # finished segment's as one int16 block (64 bytes a frame: a chapter's hour is 5 MB).
        self._codes: list[Codes] = []
        self._resume, self.call_frames, self.one_segment = resume, call_frames, one_segment
        self.carry: SessionCarry | None = None  # set when this call ended before the utterance did
        if resume is not None:  # what the earlier calls counted carries on
            self.stats = dataclasses.replace(resume.stats.copy(), speed=self.stats.speed)
            self._codes = [np.asarray(resume.codes, np.int16)] if len(resume.codes) else []

    def codes(self) -> np.ndarray:
        """(frames, 32) codes committed so far (int16), e.g. for a loop detector."""
        if not self._codes:
            return np.zeros((0, 32), np.int16)
        return np.concatenate([np.atleast_2d(np.asarray(c, dtype=np.int16)) for c in self._codes])

    def wait_line(self) -> str | None:
        """While the engine's scheduler keeps this request waiting: where it stands and why."""
        current = self._sources.current
        return current.wait_line() if current is not None else None

    def progress(self) -> Progress:
        """A long text's progress (segments.py: segments generated, audio made ahead of what was read,
        the rate its frames are made at), `ends_s`: where each segment read so far ends in the audio
        sent, `rate`: the slower of that and the codec's own (audio s per s it spends decoding), and,
        written as it came, `written_s`: when each segment's last word was, after the request's start."""
        out: Progress = {**self._sources.progress(), "ends_s": list(self._segment_ends)}
        out.update({} if self.writing is None else {"written_s": list(self.writing.written.written_s)})
        dec, st = self._decoder, self.stats
        if dec is not None and st.decode_time_s > 0 and out["rate"]:
            decode_rate = dec.pending_start * self.samples_per_frame / self.sample_rate / st.decode_time_s
            out["rate"] = round(min(out["rate"], decode_rate), 3)
        return out

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
        self._sources.cancel()  # every segment's request, the ones made ahead too
        if self._decoder is not None:
            self._decoder.cancel()

    def close(self) -> None:
        """Cancel and free the engine (waits for the decode step in flight, if any)."""
        self.cancel()
        with self._lock:
            self._sources.close()

    # -- streaming -------------------------------------------------------------------------

    def _compact(self, frames: int) -> None:
        """The segment that just ended: its frames' codes as one int16 block."""
        if frames:
            block = np.concatenate([np.atleast_2d(np.asarray(c, dtype=np.int16)) for c in self._codes[-frames:]])
            self._codes[-frames:] = [block] if len(block) == frames else self._codes[-frames:]

    def _hold_back(self, dec: ChunkDecoder, t0: float) -> None:
        """Wait (stoppable) while the audio is more than max_ahead_s ahead of real time since its
        first chunk: a chapter on a fast engine must not pile its audio up unheard."""
        if self.max_ahead_s is None or self.stats.ttfa_s is None:
            return
        first = t0 + self.stats.ttfa_s
        while not self._cancel.is_set():
            over = dec.emitted / self.sample_rate - (time.perf_counter() - first) - self.max_ahead_s  # ahead of real time
            if over <= 0:
                return
            self._cancel.wait(min(over, 0.5))

    def _generate(self) -> Iterator[AudioChunk]:
        call, first, replay = self._begin()
        try:
            for seg_no in range(first, len(self.segments)):
                # seg_codes: the frames this segment has; the first goes on from an earlier call's
                seg_codes = list(replay) if seg_no == first and replay is not None else []
                if self.writing is not None and not self.writing.wait(seg_no, self._cancel):
                    break  # cancelled while its text was being written
                frames = self._open(seg_no, seg_codes)
                if frames is None:  # cancelled
                    break
                seg_end = yield from self._segment(call, seg_no, frames, seg_codes)
                if seg_end is None:  # this call handed the utterance over inside the segment
                    return
                self._end_segment(call, seg_end, seg_codes)
                if seg_end == CANCEL:
                    break
                if self.one_segment and seg_no < len(self.segments) - 1:
                    self._hand_over(call, seg_no + 1, None)
                    return
            if not self._cancel.is_set():
                yield self._final_chunk(call)
        except GeneratorExit:  # the consumer stopped iterating: same as a cancel
            self._cancel.set()
            raise
        finally:
            # Also reached when the consumer stops iterating early (GeneratorExit at a yield).
            with self._lock:
                self._sources.close()
            call.dec.close()
            if not self.stats.complete:
                self.stats.cancelled = self._cancel.is_set()
                self._finish(call)

    def _begin(self) -> tuple["_Call", int, np.ndarray | None]:
        """This call's running state, and where it starts: the segment, and the frames of it
        an earlier call made (None: from its start)."""
        t0 = self._request_start if self._request_start is not None else time.perf_counter()
        dec = self._decoder = ChunkDecoder(self.codec, self.stream, self.stats, self.engine.note_decode)
        if self.writing is not None:
            self.writing.start(t0)
        carry = self._resume
        if carry is None:
            return _Call(t0, dec, []), 0, None
        dec.resume(carry.decoding)
        return _Call(t0, dec, list(carry.ended_by)), carry.segment, carry.segment_codes

    def _open(self, seg_no: int, seg_codes: list[Codes]) -> FrameSource | None:
        """The segment's frame source, going on from seg_codes; None once cancelled."""
        with self._lock:
            if self._cancel.is_set():
                return None
            if self.writing is not None:
                self.writing.opened(seg_no, self.stats.frames)
            return self._sources.open(seg_no, _as_codes(seg_codes) if seg_codes else None)

    def _segment(self, call: "_Call", seg_no: int, frames: FrameSource, seg_codes: list[Codes]):
        """One segment's steps, yielding its chunks (and StepEvents). Returns how it ended
        ("stop", "budget", "force_stop" or "cancel"), or None when this call handed over."""
        last_segment = seg_no == len(self.segments) - 1
        while True:
            step = self._read(call, frames)
            if step is None and frames.paused and not self._cancel.is_set():
                # The call made all it may of this segment (zerogpu's batched call): the next
                # one goes on, its frames not yet decoded carried with the codec's state.
                self._hand_over(call, seg_no, seg_codes)
                return None
            if step is None:  # ended without saying why: cancelled, else the budget
                return CANCEL if self._cancel.is_set() else BUDGET
            self._take(call, step, seg_codes)
            if self._step_events:
                yield StepEvent(self.stats.frames, float(step.p_stop), time.perf_counter() - call.t0,
                                float(step.entropy))
            # The utterance's last frames go out with the end shaping in the final chunk.
            if self._due(call, step) and not (step.done is not None and last_segment):
                chunk = self._cut(call)
                if chunk is not None:  # all of it may be held back for a long fade
                    yield chunk
                if self.call_frames is not None and call.made >= self.call_frames and step.done is None:
                    self._hand_over(call, seg_no, seg_codes)  # mid-segment, at a chunk boundary
                    return None
            if step.done is not None:
                if step.done == STOP:
                    self.stats.stop_frame = self.stats.frames
                return step.done

    def _read(self, call: "_Call", frames: FrameSource) -> FrameStep | None:
        """The segment's next step, timed (after holding back while far ahead); None once
        cancelled or when the source ends."""
        self._hold_back(call.dec, call.t0)
        # Once the first chunk is out, the next segments join the batch as others finish.
        self._sources.refill(released=self.stats.ttfa_s is not None)
        with self._lock:
            if self._cancel.is_set():
                return None
            t = time.perf_counter()
            step = next(frames, None)
            self.stats.gen_time_s += time.perf_counter() - t
            self._sources.read += step is not None and step.codes is not None
        return step

    def _take(self, call: "_Call", step: FrameStep, seg_codes: list[Codes]) -> None:
        """A step counted: its p_stop and entropy; a committed frame goes to the decoder."""
        st = self.stats
        st.p_stop.append(float(step.p_stop))
        st.entropy.append(float(step.entropy))
        if step.codes is not None:
            st.nll.append(float(step.nll) if step.nll is not None else float("nan"))
            call.dec.add(step.codes)
            self._codes.append(step.codes)
            seg_codes.append(step.codes)
            st.frames += 1
            call.made += 1

    def _due(self, call: "_Call", step: FrameStep) -> bool:
        """Whether the frames pending make a chunk now."""
        dec = call.dec
        due = len(dec.pending) >= next_chunk_frames(self.stream, dec.pending_start)
        if self.stats.chunks > 0 and dec.pending and dec.aligned:
            # A pooled codec stream cuts at the batch's clock, so the streams of one running
            # batch push together (batching/codec_pool.py); exact decoding makes the cuts inaudible.
            due = due or (step.batch_step + 1) % self.stream.chunk_frames == 0
        return due

    def _cut(self, call: "_Call") -> AudioChunk | None:
        """The pending frames decoded into a chunk (None: all of it held back for the fade)."""
        frame_start = call.dec.pending_start
        out = call.dec.decode_pending()
        return self._emit(call, out, frame_start, False) if len(out) else None

    def _emit(self, call: "_Call", samples: np.ndarray, frame_start: int, final: bool) -> AudioChunk:
        chunk = call.dec.chunk(samples, frame_start, call.dec.pending_start, final, time.perf_counter() - call.t0)
        self._keep(samples)
        if self.writing is not None and len(samples):
            self.stats.text_waits_s += self.writing.sent(call.dec.pending_start)
        if self.stats.ttfa_s is not None and not self._sources.released:
            self._sources.refill(released=True)  # the first audio is out: the next segments may start
        return chunk

    def _end_segment(self, call: "_Call", seg_end: str, seg_codes: list[Codes]) -> None:
        with self._lock:
            self._sources.close_current()
        call.ended_by.append(seg_end)
        self.stats.segment_frames.append(len(seg_codes))
        self._segment_ends.append(self.stats.frames * self.samples_per_frame / self.sample_rate)  # frame f: sample 1024 f
        self._compact(len(seg_codes))
        self.stats.ended_by = list(call.ended_by)

    def _final_chunk(self, call: "_Call") -> AudioChunk:
        """The frames that did not fill a chunk, with the end shaped; the stats complete first
        (a consumer may stop right after the final chunk)."""
        frame_start = call.dec.pending_start
        final = call.dec.finish(self._end_of_speech)
        self.stats.complete = True  # the flags (stop_fired, runaway) now follow from ended_by
        if not self.stats.stop_fired:
            self.stats.stop_frame = None
        chunk = self._emit(call, final, frame_start, True)
        self._finish(call)
        return chunk

    def _hand_over(self, call: "_Call", segment: int, segment_codes: list[Codes] | None) -> None:
        """This call ends here; the next one goes on from what is carried."""
        with self._lock:
            self._sources.close()
        codes = np.asarray(stack_codes(segment_codes), dtype=np.int64) if segment_codes else None
        self.carry = SessionCarry(segment, codes, call.dec.carry(), list(call.ended_by), self.stats.copy(),
                                  self.codes().astype(np.int64))

    def _finish(self, call: "_Call") -> None:
        st = self.stats
        st.wall_s = time.perf_counter() - call.t0
        st.speech_s = st.frames * self.samples_per_frame / self.sample_rate
        st.audio_s = call.dec.emitted / self.sample_rate
        st.rtf = st.wall_s / st.speech_s if st.speech_s > 0 else None


@dataclasses.dataclass
class _Call:
    """What one call's steps share while it runs."""

    t0: float  # when the request started (the chunks' and stats' clock)
    dec: ChunkDecoder
    ended_by: list[str]  # per segment ended so far: "stop", "budget", "force_stop" or "cancel"
    made: int = 0  # frames this call made


def _as_codes(codes: list[Codes]) -> torch.Tensor:
    """A segment's frames so far as one (n, 32) LongTensor, for engine.stream_frames(resume=...)."""
    import torch

    return torch.as_tensor(np.asarray(stack_codes(codes), dtype=np.int64))
