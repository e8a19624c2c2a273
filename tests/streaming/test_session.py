"""SynthesisSession against a scripted engine and a toy causal codec.

These pin the session's own logic (chunk schedule, hold-back for the end fade, stats,
cancel, text handling) without depending on model speed or weights. The same properties
against the real tiny engine and codec are in tests/streaming/test_session_tiny.py.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from gepard_demo.codec.base import StreamDecoder
from gepard_demo.model.engine import ModelInfo
from gepard_demo.model.frames import FrameMaker
from gepard_demo.model.generation import FrameStep
from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.streaming.session import SynthesisSession
from gepard_demo.streaming.seams import SessionRequest
from gepard_demo.streaming.text_input import MAX_TEXT_CHARS, TextError, clean_text, split_text
from gepard_demo.model.request import FrameRequest

SPF = 16  # toy samples per frame
SR = 1000  # toy sample rate: 1 ms per sample makes fade arithmetic readable


class ScriptedEngine(FrameMaker):
    """Yields `n_frames` frames, then a stop step (or a budget end); records closes."""

    model_info = ModelInfo("scripted", "", None, True, "cpu", "float32")

    def __init__(self, n_frames: int, end: str = "stop"):
        self.n_frames = n_frames
        self.end = end
        self.calls: list[tuple[str, SamplingSettings]] = []
        self.closed = 0
        self.gate: threading.Event | None = None  # when set, each step waits on it

    def stream_frames(self, request):
        text, settings = request.text, request.sampling
        self.calls.append((text, settings))
        g = torch.Generator().manual_seed(settings.seed)
        try:
            for i in range(self.n_frames):
                if self.gate is not None:
                    self.gate.wait(5)
                codes = torch.randint(0, 6, (32,), generator=g)
                last = i == self.n_frames - 1 and self.end == "budget"
                yield FrameStep(i, codes, 0.01 * i, 0.0, "budget" if last else None)
            if self.end == "stop":
                yield FrameStep(self.n_frames, None, 0.9, 0.0, "stop")
        finally:
            self.closed += 1


class ToyCodec:
    """Causal toy codec: a frame's samples depend on its codes and the previous frame's."""

    sample_rate = SR
    samples_per_frame = SPF

    def _frame(self, prev, cur):
        base = (cur.float().sum() + 0.5 * prev.float().sum()).item()
        return np.sin(np.arange(SPF, dtype=np.float32) * 0.1 + base).astype(np.float32)

    def decode(self, codes):
        out, prev = [], torch.zeros(32, dtype=torch.long)
        for c in codes:
            out.append(self._frame(prev, c))
            prev = c
        return np.concatenate(out)

    def streamer(self, mode="exact", lookback=8):
        codec = self

        class _S(StreamDecoder):
            prev = torch.zeros(32, dtype=torch.long)
            pushes: list[int] = []

            def push(self, codes):
                self.pushes.append(len(codes))
                out = []
                for c in codes:
                    out.append(codec._frame(self.prev, c))
                    self.prev = c
                return np.concatenate(out)

        s = _S()
        self.last_streamer = s
        return s


def ref_end_of_speech(audio, sr, fade_ms, silence_ms):
    """Reference shaping (facts §5): linear fade of the last fade_ms, then silence."""
    audio = np.asarray(audio, dtype=np.float32).copy()
    n = min(len(audio), int(round(fade_ms * sr / 1000.0)))
    if n > 0:
        audio[-n:] *= np.linspace(1.0, 0.0, n, dtype=np.float32)
    return np.concatenate([audio, np.zeros(int(round(silence_ms * sr / 1000.0)), np.float32)])


def make(n_frames=17, end="stop", text="Hello there.", seed=7, **stream):
    engine, codec = ScriptedEngine(n_frames, end), ToyCodec()
    sess = SynthesisSession(
        engine,
        codec,
        SessionRequest(text, SamplingSettings(seed=seed), StreamSettings(**stream)),
        end_of_speech=ref_end_of_speech,
    )
    return sess, engine, codec


def expected_audio(engine, seed, fade_ms, silence_ms):
    frames = [s.codes for s in ScriptedEngine(engine.n_frames, engine.end).stream_frames(FrameRequest("", SamplingSettings(seed=seed))) if s.codes is not None]
    return ref_end_of_speech(ToyCodec().decode(torch.stack(frames)), SR, fade_ms, silence_ms)


def test_chunk_schedule_first_then_chunk_frames():
    sess, engine, codec = make(17, first_chunk_frames=3, chunk_frames=5, chunk_schedule="fixed")
    chunks = list(sess)
    assert [(c.frame_start, c.frame_end) for c in chunks] == [(0, 3), (3, 8), (8, 13), (13, 17)]
    assert codec.last_streamer.pushes == [3, 5, 5, 4]
    assert [c.final for c in chunks] == [False, False, False, True]
    assert [len(c.samples) for c in chunks] == [3 * SPF, 5 * SPF, 5 * SPF, 4 * SPF]
    starts = np.cumsum([0] + [len(c.samples) for c in chunks[:-1]])
    assert [c.start_sample for c in chunks] == list(starts)
    assert all(c.samples.dtype == np.float32 for c in chunks)
    walls = [c.wall_s for c in chunks]
    assert walls == sorted(walls)


def test_the_ramp_cuts_each_later_chunk_as_long_as_the_audio_before_it():
    sess, engine, codec = make(40, first_chunk_frames=3, chunk_frames=10)
    chunks = list(sess)
    assert codec.last_streamer.pushes == [3, 3, 6, 10, 10, 8]
    assert [c.frame_end - c.frame_start for c in chunks] == [3, 3, 6, 10, 10, 8]


@pytest.mark.parametrize("fade_ms,silence_ms,frames", [(0, 0, 16), (5, 0, 16), (40, 20, 16), (200, 10, 16), (500, 0, 8)])
def test_concatenated_chunks_equal_whole_decode_plus_shaping(fade_ms, silence_ms, frames):
    # 40 ms = 2.5 frames: longer than the 1-frame final chunk, so the fade reaches back into
    # samples of earlier chunks; 500 ms (the longest fade) is longer than the whole 8-frame utterance.
    sess, engine, _ = make(frames, first_chunk_frames=2, chunk_frames=5, fade_ms=fade_ms, silence_ms=silence_ms)
    chunks = list(sess)
    got = np.concatenate([c.samples for c in chunks])
    want = expected_audio(engine, 7, fade_ms, silence_ms)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(sess.audio(), want)
    assert chunks[-1].final and not any(c.final for c in chunks[:-1])
    assert all(len(c.samples) > 0 for c in chunks[:-1])


def test_fade_hold_back_delays_only_the_fade():
    sess, _, _ = make(20, first_chunk_frames=4, chunk_frames=8, fade_ms=10)
    first = next(iter(sess))
    hold = 10 + 1  # ceil(10 ms * 1000 Hz) + 1
    assert len(first.samples) == 4 * SPF - hold


def test_stats_stop_fired():
    sess, engine, _ = make(17, first_chunk_frames=3, chunk_frames=5, chunk_schedule="fixed", silence_ms=30)
    list(sess)
    st = sess.stats
    assert st.complete and not st.cancelled
    assert st.frames == 17 and st.stop_fired and not st.runaway and st.stop_frame == 17
    assert len(st.p_stop) == 18 and st.p_stop[-1] == pytest.approx(0.9)
    assert st.seed == 7 and engine.calls[0][1].seed == 7
    assert st.speech_s == pytest.approx(17 * SPF / SR)
    assert st.audio_s == pytest.approx((17 * SPF + 30) / SR)
    assert 0 < st.ttfa_s <= st.wall_s
    assert st.rtf == pytest.approx(st.wall_s / st.speech_s)
    assert st.gen_time_s >= 0 and st.decode_time_s >= 0
    assert st.chunks == 4
    assert engine.closed == 1


def test_stats_runaway_on_budget():
    sess, _, _ = make(9, end="budget", first_chunk_frames=4, chunk_frames=4)
    list(sess)
    st = sess.stats
    assert st.runaway and not st.stop_fired and st.stop_frame is None
    assert st.frames == 9 and len(st.p_stop) == 9


def test_seed_drawn_when_none_and_reported():
    sess, engine, _ = make(5, seed=None)
    list(sess)
    assert isinstance(sess.stats.seed, int)
    assert engine.calls[0][1].seed == sess.stats.seed
    # Replaying with the reported seed gives the same audio.
    again, _, _ = make(5, seed=sess.stats.seed)
    np.testing.assert_array_equal(again.run(), sess.audio())


def test_close_mid_stream_frees_engine():
    sess, engine, _ = make(50, first_chunk_frames=2, chunk_frames=2)
    it = iter(sess)
    next(it)
    assert engine.closed == 0
    sess.close()  # the generator is parked at a yield: close frees the engine at once
    assert engine.closed == 1
    assert list(it) == []
    assert sess.stats.cancelled and not sess.stats.complete


def test_cancel_from_another_thread():
    sess, engine, _ = make(1000, first_chunk_frames=1, chunk_frames=1)
    got = []

    def consume():
        for c in sess:
            got.append(c)
            if len(got) == 3:  # cancelled from another thread while this one is between chunks
                canceller = threading.Thread(target=sess.cancel)
                canceller.start()
                canceller.join()

    t = threading.Thread(target=consume)
    t.start()
    t.join(10)
    assert not t.is_alive()
    assert len(got) == 3  # noticed before the next step
    assert sess.stats.cancelled and engine.closed == 1


def test_consumer_break_closes_engine():
    sess, engine, _ = make(50, first_chunk_frames=2, chunk_frames=2)
    it = iter(sess)
    next(it)
    it.close()
    assert engine.closed == 1 and sess.stats.cancelled


def test_session_iterates_once():
    sess, _, _ = make(3)
    list(sess)
    with pytest.raises(RuntimeError):
        iter(sess)


@pytest.mark.parametrize("bad", ["", "   \n\t ", "\u200b\u200d\ufeff", "\x00\x07"])
def test_empty_text_rejected(bad):
    with pytest.raises(TextError, match="enter some text"):
        make(3, text=bad)


def test_overlong_text_rejected():
    with pytest.raises(TextError, match="limit is 2000"):
        make(3, text="a" * (MAX_TEXT_CHARS + 1))


def test_clean_text_odd_unicode():
    assert clean_text("Cafe\u0301\u200b  ok\x00\n\nthen \ud800x") == "Café ok then x"
    assert clean_text("🐆 Gepard!") == "🐆 Gepard!"


def test_split_text_respects_limit_and_order():
    text = " ".join(f"Sentence number {i} is here." for i in range(40))
    segs = split_text(text, 100)
    assert all(len(s) <= 100 for s in segs)
    assert " ".join(segs) == text
    assert split_text("short", 100) == ["short"]
    long_word = "x" * 250
    assert all(len(s) <= 100 for s in split_text(long_word, 100))
    assert "".join(split_text(long_word, 100)) == long_word


def test_long_text_streams_segments_in_order_in_one_session():
    text = " ".join(f"Sentence {i}." for i in range(30))
    engine, codec = ScriptedEngine(6), ToyCodec()
    sess = SynthesisSession(
        engine,
        codec,
        SessionRequest(text, SamplingSettings(seed=1), StreamSettings(first_chunk_frames=4, chunk_frames=4)),
        segment_chars=60,
        end_of_speech=ref_end_of_speech,
    )
    chunks = list(sess)
    texts = [c[0] for c in engine.calls]
    assert len(texts) == sess.stats.segments > 1
    assert " ".join(texts) == text
    assert sess.stats.frames == 6 * len(texts)
    assert sess.stats.stop_fired and sess.stats.stop_frame == 6 * len(texts)
    assert chunks[-1].frame_end == sess.stats.frames
    assert engine.closed == len(texts)
    assert len(sess.audio()) == sess.stats.frames * SPF


def test_budget_end_on_chunk_boundary_goes_out_as_the_final_chunk():
    # The budget's last frame is known to be last: it is not sent as a plain chunk followed by
    # an empty final one.
    sess, _, _ = make(8, end="budget", first_chunk_frames=3, chunk_frames=5, chunk_schedule="fixed")
    chunks = list(sess)
    assert [(c.frame_start, c.frame_end, c.final) for c in chunks] == [(0, 3, False), (3, 8, True)]


def test_stop_on_chunk_boundary_ends_with_a_marker_chunk():
    # The stop step comes after the last frame, so that frame's chunk is already out; the final
    # chunk then carries only the held fade samples (or nothing, with no fade or silence).
    sess, _, _ = make(8, first_chunk_frames=3, chunk_frames=5, chunk_schedule="fixed")
    chunks = list(sess)
    assert [(c.frame_start, c.frame_end, c.final) for c in chunks] == [(0, 3, False), (3, 8, False), (8, 8, True)]
    assert len(chunks[-1].samples) == 0
