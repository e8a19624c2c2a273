"""SynthesisSession on the real tiny engine and the real (tiny) NanoCodec decoder."""

from __future__ import annotations

import numpy as np
import pytest
from tests.support.app_fixtures import tiny_codec  # noqa: F401  (fixture)

from gepard_demo.codec import apply_end_of_speech
from gepard_demo.model.frames import FrameMaker
from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.streaming.session import SynthesisSession
from gepard_demo.streaming.seams import SessionRequest

pytestmark = pytest.mark.numerics  # results depend on the CPU's kernels: make test-isa runs it under other ISAs


class RecordingEngine(FrameMaker):
    """Passes stream_frames through and keeps every FrameStep, to rebuild the reference."""

    def __init__(self, engine):
        self.engine = engine
        self.model_info = engine.model_info
        self.steps = []
        self.closed = 0

    def stream_frames(self, request):
        it = self.engine.stream_frames(request)
        try:
            for step in it:
                self.steps.append(step)
                yield step
        finally:
            it.close()
            self.closed += 1

    def frames(self):
        import torch

        return torch.stack([s.codes for s in self.steps if s.codes is not None])


def run(engine, codec, text="Hello world, this is Gepard.", **kw):
    sampling = SamplingSettings(**{"seed": 11, "max_frames": 37, **kw.pop("sampling", {})})
    stream = StreamSettings(**kw)
    rec = RecordingEngine(engine)
    sess = SynthesisSession(rec, codec, SessionRequest(text, sampling, stream))
    chunks = list(sess)
    return sess, chunks, rec


def test_chunk_schedule_on_tiny(layout_engine, tiny_codec):
    sess, chunks, rec = run(layout_engine, tiny_codec, first_chunk_frames=5, chunk_frames=8, chunk_schedule="fixed")
    # 37 frames: 5, then 8 at a time, then the remainder with the end shaping.
    assert [(c.frame_start, c.frame_end) for c in chunks] == [(0, 5), (5, 13), (13, 21), (21, 29), (29, 37)]
    assert [len(c.samples) for c in chunks] == [n * 1024 for n in (5, 8, 8, 8, 8)]
    assert chunks[-1].final and sess.stats.frames == 37


@pytest.mark.parametrize("fade_ms,silence_ms", [(0, 0), (20, 0), (100, 250)])
def test_exact_chunks_equal_whole_decode_plus_end_shaping(layout_engine, tiny_codec, fade_ms, silence_ms):
    # 100 ms is 2205 samples: more than the 2-frame final chunk (2048), so the fade reaches back
    # into samples held from the previous chunk.
    sess, chunks, rec = run(
        layout_engine, tiny_codec, first_chunk_frames=5, chunk_frames=10, chunk_schedule="fixed", fade_ms=fade_ms,
        silence_ms=silence_ms)
    if fade_ms == 100:
        last = chunks[-1]
        assert (last.frame_end - last.frame_start) * 1024 < int(22050 * fade_ms / 1000)
    got = np.concatenate([c.samples for c in chunks])
    whole = tiny_codec.decode(rec.frames())
    want = apply_end_of_speech(whole, 22050, fade_ms, silence_ms)
    assert got.shape == want.shape
    # Exact streaming equals one whole decode up to float rounding of the conv order.
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    np.testing.assert_array_equal(sess.audio(), got)
    if fade_ms:
        assert got[len(whole) - 1] == 0.0  # the fade ends exactly on zero
    if silence_ms:
        assert not got[len(whole):].any()


def test_lookback_mode_streams_same_length(layout_engine, tiny_codec):
    sess, chunks, rec = run(layout_engine, tiny_codec, first_chunk_frames=4, chunk_frames=6,
                            decode_mode="lookback", lookback_frames=8)
    got = np.concatenate([c.samples for c in chunks])
    assert len(got) == 37 * 1024
    assert np.isfinite(got).all()


def test_stats_consistent_runaway(layout_engine, tiny_codec):
    # The random-weight tiny model's stop head stays under 0.5: the budget ends it.
    sess, chunks, rec = run(layout_engine, tiny_codec, first_chunk_frames=10, chunk_frames=10)
    st = sess.stats
    assert st.complete and not st.cancelled
    assert st.runaway and not st.stop_fired and st.stop_frame is None
    assert st.frames == 37 == len(rec.frames())
    assert st.p_stop == [s.p_stop for s in rec.steps]
    assert st.seed == 11
    assert st.speech_s == pytest.approx(37 * 1024 / 22050)
    assert st.audio_s == pytest.approx(len(sess.audio()) / 22050)
    assert 0 < st.ttfa_s <= chunks[0].wall_s + 1e-9 <= st.wall_s
    assert st.gen_time_s + st.decode_time_s <= st.wall_s
    assert st.rtf == pytest.approx(st.wall_s / st.speech_s)
    assert st.chunks == len(chunks) == 4
    assert rec.closed == 1


def test_stats_stop_fired(layout_engine, tiny_codec):
    # A threshold below every p_stop makes the stop head fire at the first step it may.
    sess, chunks, rec = run(layout_engine, tiny_codec, sampling={"stop_threshold": 1e-6})
    st = sess.stats
    assert st.stop_fired and not st.runaway
    assert st.stop_frame == st.frames == 1
    assert len(st.p_stop) == 2 and rec.steps[-1].done == "stop"
    assert len(sess.audio()) == 1024


def test_same_seed_same_audio_random_seed_reported(layout_engine, tiny_codec):
    a, _, _ = run(layout_engine, tiny_codec, sampling={"seed": 5, "max_frames": 12})
    b, _, _ = run(layout_engine, tiny_codec, sampling={"seed": 5, "max_frames": 12})
    np.testing.assert_array_equal(a.audio(), b.audio())
    c, _, _ = run(layout_engine, tiny_codec, sampling={"seed": None, "max_frames": 12})
    d, _, _ = run(layout_engine, tiny_codec, sampling={"seed": c.stats.seed, "max_frames": 12})
    np.testing.assert_array_equal(c.audio(), d.audio())


def test_close_frees_engine_for_next_request(layout_engine, tiny_codec):
    rec = RecordingEngine(layout_engine)
    sess = SynthesisSession(
        rec,
        tiny_codec,
        SessionRequest(
            "A long one.",
            SamplingSettings(seed=3, max_frames=4000),
            StreamSettings(first_chunk_frames=2, chunk_frames=2),
        ),
    )
    it = iter(sess)
    next(it)
    sess.close()
    assert rec.closed == 1 and list(it) == [] and sess.stats.cancelled
    assert sess.stats.frames < 10
    # The engine serves the next request normally.
    again, chunks, _ = run(layout_engine, tiny_codec, sampling={"max_frames": 5})
    assert again.stats.frames == 5
