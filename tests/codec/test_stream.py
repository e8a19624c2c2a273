"""Exact streaming equals one whole decode for any chunking; lookback re-decode does not, and
its error shrinks as the lookback grows past the decoder's ~26-frame receptive field."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.support.codec_fixtures import (
    FULL_FRAMES,
    TOL,
    full_codes,
    full_native,
    full_whole_decode,
    max_diff,
    random_codes,
    tiny_native,
    torch_threads,
)

pytestmark = pytest.mark.numerics  # results depend on the CPU's kernels: make test-isa runs it under other ISAs

T = 200


def schedule_10_then_86(n):
    sizes = [min(10, n)]
    while sum(sizes) < n:
        sizes.append(min(86, n - sum(sizes)))
    return sizes


def random_schedule(n, seed):
    rng = np.random.default_rng(seed)
    sizes = []
    while sum(sizes) < n:
        sizes.append(int(min(rng.integers(1, 40), n - sum(sizes))))
    return sizes


def run(dec, codes, sizes):
    out, start = [], 0
    for n in sizes:
        chunk = dec.push(codes[start : start + n])
        assert chunk.dtype == np.float32
        assert chunk.shape == (n * dec.samples_per_frame,), "a push returns exactly its frames' samples"
        out.append(chunk)
        start += n
    assert start == len(codes)
    return np.concatenate(out)


@pytest.fixture(scope="module")
def tiny():
    return tiny_native()


@pytest.fixture(scope="module")
def codes():
    return random_codes(T, seed=11)


@pytest.fixture(scope="module")
def whole(tiny, codes):
    return tiny.decode_single_pass(codes)


def test_whole_decode_shape_and_range(tiny, codes, whole):
    assert whole.dtype == np.float32 and whole.shape == (T * 1024,)
    assert tiny.samples_per_frame == 1024 and tiny.sample_rate == 22050
    assert 0.001 < whole.std() and np.abs(whole).max() <= 1.0
    assert np.array_equal(tiny.decode_single_pass(torch.from_numpy(codes)), whole)


def test_decode_in_blocks_equals_single_pass(tiny, codes, whole):
    assert T > tiny.decode_block_frames  # decode() really runs in blocks here
    assert max_diff(tiny.decode(codes), whole) <= TOL


@pytest.mark.parametrize(
    "name, sizes",
    [
        ("1-frame", [1] * T),
        ("10 then 86", schedule_10_then_86(T)),
        ("random a", random_schedule(T, 1)),
        ("random b", random_schedule(T, 2)),
        ("one push", [T]),
    ],
)
def test_exact_stream_equals_whole_decode(tiny, codes, whole, name, sizes):
    assert max_diff(run(tiny.streamer(mode="exact"), codes, sizes), whole) <= TOL


def test_exact_stream_is_causal_prefix(tiny, codes, whole):
    """Frames decoded so far never change when later frames arrive: a prefix decode matches."""
    head = tiny.decode_single_pass(codes[:37])
    assert max_diff(head, whole[: 37 * 1024]) <= TOL


def test_exact_stream_decodes_each_frame_once(tiny, codes):
    seen = []
    hook = tiny.decoder.pre_conv.register_forward_hook(lambda m, args, out: seen.append(args[0].shape[-1]))
    try:
        run(tiny.streamer(mode="exact"), codes, schedule_10_then_86(T))
    finally:
        hook.remove()
    assert sum(seen) == T, "exact mode must not re-decode history"


def test_empty_push_changes_nothing(tiny, codes, whole):
    dec = tiny.streamer(mode="exact")
    a = dec.push(codes[:5])
    assert dec.push(codes[5:5]).shape == (0,)
    b = dec.push(codes[5:T])
    assert max_diff(np.concatenate([a, b]), whole) <= TOL


def test_streams_are_independent(tiny, codes, whole):
    other = random_codes(T, seed=99)
    d1, d2 = tiny.streamer(), tiny.streamer()
    out1 = []
    for s in range(0, T, 25):  # interleave two streams on one codec
        out1.append(d1.push(codes[s : s + 25]))
        d2.push(other[s : s + 25])
    assert max_diff(np.concatenate(out1), whole) <= TOL


def test_lookback_error_shrinks_with_lookback(tiny, codes, whole):
    sizes = schedule_10_then_86(T)
    errs = {lb: max_diff(run(tiny.streamer("lookback", lb), codes, sizes), whole) for lb in (0, 8, 26)}
    # 8 frames is inside the ~26-frame receptive field: chunk starts differ from the whole decode
    assert errs[8] > 10 * TOL
    assert errs[26] < errs[8] / 100
    assert errs[0] > errs[8]


def test_lookback_whole_history_equals_whole_decode(tiny, codes, whole):
    out = run(tiny.streamer("lookback", lookback=T), codes, schedule_10_then_86(T))
    assert max_diff(out, whole) <= TOL


def test_bad_mode_and_lookback_are_rejected(tiny):
    with pytest.raises(ValueError, match="mode"):
        tiny.streamer(mode="fast")
    with pytest.raises(ValueError, match="lookback"):
        tiny.streamer(mode="lookback", lookback=-1)


@pytest.mark.slow
def test_full_size_exact_stream_equals_whole_decode():
    codec, codes, whole = full_native(), full_codes(), full_whole_decode()
    assert whole.shape == (FULL_FRAMES * 1024,)
    with torch_threads(1):
        for sizes in (schedule_10_then_86(FULL_FRAMES), random_schedule(FULL_FRAMES, 3)):
            assert max_diff(run(codec.streamer(mode="exact"), codes, sizes), whole) <= TOL
