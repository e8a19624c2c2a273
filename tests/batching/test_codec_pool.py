"""Streams' codec chunks decoded together: each stream keeps its own exact state (the samples its
own pushes give, to float rounding: the promise of codec/batched.py, at most 1 LSB as 16-bit PCM
on any CPU, not bit-equal), sessions of one running batch line their chunks up so they
really share calls, and lookback streams are left alone."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from tests.support.app_fixtures import tiny_codec  # noqa: F401  (fixture)
from tests.support.codec_fixtures import POOLED_PCM16_LSB, POOLED_TOL

from gepard_demo.batching.codec_pool import CodecPool, PooledStream
from gepard_demo.batching.scheduler import BatchScheduler
from gepard_demo.codec.batched import decode_together
from gepard_demo.serving.protocol import pcm16_array
from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.host_settings import BatchingSettings
from gepard_demo.streaming.session import SynthesisSession
from gepard_demo.streaming.seams import SessionRequest

pytestmark = pytest.mark.numerics  # results depend on the CPU's kernels: make test-isa runs it under other ISAs



def _codes(codec, n, rng):
    levels = list(codec.layout.levels_per_group) * codec.layout.num_groups
    return torch.from_numpy(np.stack([rng.integers(0, lv, size=n) for lv in levels], 1))


def test_decode_together_keeps_each_streams_state(tiny_codec):  # noqa: F811
    rng = np.random.default_rng(0)
    together = [tiny_codec.streamer() for _ in range(3)]
    alone = [tiny_codec.streamer() for _ in range(3)]
    head = _codes(tiny_codec, 7, rng)  # one stream is ahead: its state is not a fresh one
    together[1].push(head)
    alone[1].push(head)
    for _ in range(4):
        chunks = [_codes(tiny_codec, 10, rng) for _ in range(3)]
        got = decode_together(together, chunks)
        want = [s.push(c) for s, c in zip(alone, chunks)]
        for g, w in zip(got, want):
            assert g.shape == w.shape == (10 * tiny_codec.samples_per_frame,)
            assert np.abs(g - w).max() <= POOLED_TOL
            assert np.abs(pcm16_array(g).astype(int) - pcm16_array(w).astype(int)).max() <= POOLED_PCM16_LSB
    assert [s.frames_pushed for s in together] == [40, 47, 40]
    with pytest.raises(ValueError, match="different lengths"):
        decode_together(together[:2], [_codes(tiny_codec, 3, rng), _codes(tiny_codec, 4, rng)])


def test_sessions_of_one_batch_share_decoder_calls(tiny_engine, tiny_codec):  # noqa: F811
    pool = CodecPool(tiny_codec)
    scheduler = BatchScheduler(tiny_engine, BatchingSettings(max_batch=4))
    stream = StreamSettings(first_chunk_frames=3, chunk_frames=5, fade_ms=5.0)
    texts = ["Hello world", "A second sentence, a little longer.", "Third."]
    settings = [SamplingSettings(seed=30 + i, max_frames=41 + 6 * i, stop_threshold=0.999) for i in range(3)]
    sessions = [SynthesisSession(scheduler, pool, SessionRequest(t, s, stream)) for t, s in zip(texts, settings)]
    threads = [threading.Thread(target=s.run) for s in sessions]
    try:
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
    finally:
        scheduler.close()
    assert pool.calls["together"] >= 3, pool.calls  # the chunks lined up at the batch's clock
    for text, s, session in zip(texts, settings, sessions):
        alone = SynthesisSession(tiny_engine, tiny_codec, SessionRequest(text, s, stream))
        want = alone.run()
        got = session.audio()
        assert session.stats.frames == alone.stats.frames == s.max_frames
        assert np.array_equal(session.codes(), alone.codes())  # the same frames, exactly
        assert got.shape == want.shape and np.abs(got - want).max() <= POOLED_TOL
    assert not pool._open  # every session closed its stream


def test_lookback_streams_are_not_pooled(tiny_codec):  # noqa: F811
    pool = CodecPool(tiny_codec)
    lookback = pool.streamer(mode="lookback", lookback=4)
    assert not isinstance(lookback, PooledStream) and not lookback.aligned
    exact = pool.streamer()
    assert not exact.aligned and pool.sample_rate == tiny_codec.sample_rate  # alone: plain chunking
    other = pool.streamer()
    assert exact.aligned and other.aligned  # together: cut at the batch's clock
    other.close()
    assert not exact.aligned
    exact.close()
