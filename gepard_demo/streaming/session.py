"""One streaming synthesis session: text + settings -> audio chunks, then final stats.

The app, the CLI and the evaluation all stream through `SynthesisSession`, so what the demo
plays, what the CLI writes and what eval scores come from the same code path:

    session = SynthesisSession(engine, codec, SessionRequest(text, sampling, stream))
    for chunk in session:          # AudioChunk: float32 PCM at codec.sample_rate
        play(chunk.samples)
    session.stats                  # SynthesisStats
    session.audio()                # everything emitted, concatenated

Frames come from `engine.stream_frames(FrameRequest(text, sampling))` (one FrameStep per decode step) and
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

The session's parts: the plan of text, segments and seed (plan.py), the frame sources
(segments.py), playback: decode, pacing, hold-back and the end (playback.py).

One utterance, several calls (`calls`: a seams.Handover, zerogpu/carry.CallBounds): a call may end
at a chunk boundary after so many frames, or at its segment's end when more follow; it leaves
what the next call needs in `.carry`, and the next session (in another process, the next GPU
call) goes on from there. Its talker resumes the segment from the frames
it already has (a FrameRequest's resume), its codec stream from the carried state
(playback.py), so the chunks of all the calls join into one stream. A frame source may also end
a call itself: one whose iterator ends with `paused` set has made all this call may make of its
segment (zerogpu/batched.py), and the session hands over there, mid-chunk if need be.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Iterator

import numpy as np

from gepard_demo.model.guards.ending import BUDGET, CANCEL
from gepard_demo.streaming.base import OnceIterableSession
from gepard_demo.streaming.text_input import MAX_TEXT_CHARS, SEGMENT_CHARS

from .chunks import AudioChunk, StepEvent, SynthesisStats, stack_codes
from .plan import plan
from .playback import EndOfSpeech, Playback
from .record import Record
from .seams import SessionRequest
from .segments import Progress, SegmentReader, SegmentSources

if TYPE_CHECKING:
    import torch

    from gepard_demo.codec.fsq import Codes
    from gepard_demo.model.frames import FrameSource
    from gepard_demo.model.generation import FrameStep
    from gepard_demo.model.seams import AudioCodec, FrameEngine
    from gepard_demo.settings import StreamSettings

    from .seams import Handover

__all__ = ["AudioChunk", "StepEvent", "SynthesisSession", "SynthesisStats"]


class SynthesisSession(OnceIterableSession):
    """Stream one request: iterate for AudioChunks, then read `.stats` and `.audio()`.

    The session is single-use and is iterated by one thread. `cancel()` may be called from any
    thread: the iterating thread notices it before the next decode step, closes the engine's frame
    iterator (which frees the engine) and ends. `close()` also closes the iterator itself
    (segments.SegmentReader), so it frees the engine even when nobody resumes the iteration. The
    end fade reaches back past a short final chunk (playback.py holds its samples back).
    """

    stream: StreamSettings  # it decodes here, always
    segments: list[str]  # its text's segments (one for a short text)

    def __init__(
        self, engine: FrameEngine, codec: AudioCodec, request: SessionRequest, *, look_ahead: int = 0,
        segment_chars: int = SEGMENT_CHARS, end_of_speech: EndOfSpeech | None = None, calls: Handover | None = None,
    ) -> None:
        """request: the utterance, taken whole (seams.SessionRequest; its speaker a (K, hidden) prefix or None).
        look_ahead: segments of a long text generated ahead of the one playing (segments.py): the
        host's, as its running batch allows. segment_chars: where a long text is cut (text_input.py).
        end_of_speech: the end's shaping, when a caller fixes it (playback.py); None: the stream's.
        calls: where this call of a several-call utterance starts and ends (module docstring); None: one call."""
        text, sampling, stream, speaker = request.text, request.sampling, request.stream, request.prefix()
        planned = plan(text, sampling, max_text_chars=request.max_text_chars or MAX_TEXT_CHARS,
                       segment_chars=segment_chars, words_per_s=request.words_per_s)
        self.engine, self.codec, self.stream, self.speaker, self.calls = engine, codec, stream, speaker, calls
        self.text, self.segments, self.sampling, self.writing, self.pauses = (
            planned.text, planned.segments, planned.sampling, planned.writing, planned.pauses)
        self.sample_rate, self.samples_per_frame = int(codec.sample_rate), int(codec.samples_per_frame)
        stats = SynthesisStats(text=self.text, seed=self.sampling.seed, segments=len(self.segments),
                               speed=engine.model_info.speed)
        self._record = Record(*(calls.resumed(stats) if calls is not None else (stats, [])))
        self.stats = self._record.stats
        self.carry: object = None  # what the next call goes on from, when this call ended before the utterance
        self._request_start, self._end_of_speech, self.max_ahead_s = request.request_start, end_of_speech, request.max_ahead_s
        super().__init__()
        self._sources = SegmentSources(engine, self.segments, self.sampling, speaker, look_ahead, self,
                                       ready=self.writing.ready if self.writing else None)
        self._reader = SegmentReader(self._sources, self._cancel, self.stats)
        self._playback: Playback | None = None  # the codec side, while iterating
        self._step_events = False

    def codes(self) -> np.ndarray:
        """(frames, 32) codes committed so far (int16), e.g. for a loop detector."""
        return self._record.codes()

    def wait_line(self) -> str | None:
        """While the engine's scheduler keeps this request waiting: where it stands and why."""
        current = self._sources.current
        return current.wait_line() if current is not None else None

    def progress(self) -> Progress:
        """A long text's progress (segments.py), `ends_s` (record.py), `rate`: the slower of the frames'
        and the codec's (playback.py); written as it came, `written_s`: each segment's last word's moment."""
        out: Progress = {**self._sources.progress(), "ends_s": list(self._record.segment_ends)}
        out.update({} if self.writing is None else {"written_s": list(self.writing.written.written_s)})
        if self._playback is not None and out["rate"]:
            out["rate"] = self._playback.slower_rate(out["rate"], self.samples_per_frame)
        return out

    def events(self) -> Iterator["AudioChunk | StepEvent"]:
        """Iterate with a StepEvent after every decode step as well as the chunks: a GPU call (zerogpu/)
        yields them, so that Stop reaches it within a frame and the page learns frames and p_stop."""
        self._step_events = True
        return iter(self)

    # -- control ---------------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop from any thread, at once: the frame sources and the codec stream are told too, so an
        iterating thread that waits on either returns now instead of when its frame or samples come."""
        self._cancel.set()
        self._sources.cancel()  # every segment's request, the ones made ahead too
        if self._playback is not None:
            self._playback.cancel()

    def close(self) -> None:
        """Cancel and free the engine (waits for the decode step in flight, if any)."""
        self.cancel()
        self._reader.close()

    # -- streaming -------------------------------------------------------------------------

    def _generate(self) -> Iterator[AudioChunk]:
        play, first, replay = self._begin()
        try:
            for seg_no in range(first, len(self.segments)):
                # seg_codes: the frames this segment has; the first goes on from an earlier call's
                seg_codes = list(replay) if seg_no == first and replay is not None else []
                if self.writing is not None and not self.writing.wait(seg_no, self._cancel):
                    break  # cancelled while its text was being written
                frames = self._open(seg_no, seg_codes)
                if frames is None:  # cancelled
                    break
                seg_end = yield from self._segment(play, seg_no, frames, seg_codes)
                if seg_end is None:  # this call handed the utterance over inside the segment
                    return
                pause = self._end_segment(play, seg_no, seg_end, seg_codes)
                if seg_end == CANCEL:
                    break
                if pause:  # a <break>'s silence, before the next segment's speech
                    yield self._emit(play, *play.pause(pause), False)
                if self.calls is not None and self.calls.ends_after_segment(seg_no, len(self.segments)):
                    self._hand_over(play, seg_no + 1, None)
                    return
            if not self._cancel.is_set():
                yield self._final_chunk(play)
        except GeneratorExit:  # the consumer stopped iterating: same as a cancel
            self._cancel.set()
            raise
        finally:
            self._reader.close()  # also when the consumer stops iterating early (GeneratorExit at a yield)
            play.close()
            if not self.stats.complete:
                self.stats.cancelled = self._cancel.is_set()
                play.count_end(self.samples_per_frame)

    def _begin(self) -> tuple[Playback, int, np.ndarray | None]:
        """This call's playback; the segment it starts in, and the frames of it an earlier call made."""
        t0 = self._request_start if self._request_start is not None else time.perf_counter()
        play = self._playback = Playback(self.codec, self.stream, self.stats, t0=t0, end_of_speech=self._end_of_speech,
                                         note_decode=self.engine.note_decode)
        if self.writing is not None:
            self.writing.start(t0)
        first, replay = self.calls.start(play) if self.calls is not None else (0, None)
        return play, first, replay

    def _open(self, seg_no: int, seg_codes: list[Codes]) -> FrameSource | None:
        """The segment's frame source, going on from seg_codes; None once cancelled."""
        if self.writing is not None and not self._cancel.is_set():
            self.writing.opened(seg_no, self.stats.frames)
        return self._reader.open(seg_no, _as_codes(seg_codes) if seg_codes else None)

    def _segment(self, play: Playback, seg_no: int, frames: FrameSource, seg_codes: list[Codes]):
        """One segment's steps, yielding its chunks (and StepEvents). Returns how it ended
        ("stop", "budget", "force_stop" or "cancel"), or None when this call handed over."""
        last_segment = seg_no == len(self.segments) - 1
        while True:
            step = self._read(play, frames)
            if step is None and frames.paused and not self._cancel.is_set():
                # The call made all it may of this segment (zerogpu's batched call): the next
                # one goes on, its frames not yet decoded carried with the codec's state.
                self._hand_over(play, seg_no, seg_codes)
                return None
            if step is None:  # ended without saying why: cancelled, else the budget
                return CANCEL if self._cancel.is_set() else BUDGET
            if self._record.take(step) and step.codes is not None:  # take(): True for a committed frame
                play.add(step.codes)
                seg_codes.append(step.codes)
            if self._step_events:
                yield StepEvent(self.stats.frames, float(step.p_stop), time.perf_counter() - play.t0,
                                float(step.entropy))
            # The utterance's last frames go out with the end shaping in the final chunk.
            if play.due(step) and not (step.done is not None and last_segment):
                samples, frame_start = play.cut()
                if len(samples):  # all of it may be held back for a long fade
                    yield self._emit(play, samples, frame_start, False)
                if self.calls is not None and self.calls.ends_at_chunk(play.made) and step.done is None:
                    self._hand_over(play, seg_no, seg_codes)  # mid-segment, at a chunk boundary
                    return None
            if step.done is not None:
                return step.done

    def _read(self, play: Playback, frames: FrameSource) -> FrameStep | None:
        """The segment's next step, timed (after holding back while far ahead); None once
        cancelled or when the source ends."""
        play.hold_back(self.max_ahead_s, self._cancel)
        # Once the first chunk is out, the next segments join the batch as others finish.
        self._sources.refill(released=self.stats.ttfa_s is not None)
        return self._reader.read(frames)

    def _emit(self, play: Playback, samples: np.ndarray, frame_start: int, final: bool) -> AudioChunk:
        chunk = play.chunk(samples, frame_start, final)
        self._keep(samples)
        if self.writing is not None and len(samples):
            self.stats.text_waits_s += self.writing.sent(play.pending_start)
        if self.stats.ttfa_s is not None and not self._sources.released:
            self._sources.refill(released=True)  # the first audio is out: the next segments may start
        return chunk

    def _end_segment(self, play: Playback, seg_no: int, seg_end: str, seg_codes: list[Codes]) -> int:
        """The segment ended; the silence of a break after it, in samples (0 at the text's end)."""
        self._reader.end_segment()
        play.ended_by.append(seg_end)
        return self._record.end_segment(play.ended_by, len(seg_codes), self.samples_per_frame, self.sample_rate,
                                        0.0 if seg_end == CANCEL else self.pauses[seg_no])

    def _final_chunk(self, play: Playback) -> AudioChunk:
        """The frames that did not fill a chunk, with the end shaped; the stats complete first
        (a consumer may stop right after the final chunk)."""
        samples, frame_start = play.final()
        self._record.complete()
        chunk = self._emit(play, samples, frame_start, True)
        play.count_end(self.samples_per_frame)
        return chunk

    def _hand_over(self, play: Playback, segment: int, segment_codes: list[Codes] | None) -> None:
        """This call ends here; the next one goes on from what is carried."""
        self._reader.close()
        assert self.calls is not None, "a frame source paused in a session of one call"
        self.carry = self.calls.carry(segment, segment_codes, play, self.stats, self.codes())


def _as_codes(codes: list[Codes]) -> torch.Tensor:
    """A segment's frames so far as one (n, 32) LongTensor, for a FrameRequest's resume."""
    import torch

    return torch.as_tensor(np.asarray(stack_codes(codes), dtype=np.int64))


if TYPE_CHECKING:  # the type checker holds each class to its seam's Protocol (mypy.ini)
    from gepard_demo.streaming.seams import Session

    _SynthesisSession_is_a_Session: type[Session] = SynthesisSession
