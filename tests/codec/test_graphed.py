"""The codec's chunk decode over fixed buffers (codec/graphed.py), run eagerly on a CPU: the path a
GPU captures as one graph per chunk size. It makes today's exact (and lookback) stream's samples,
chunk for chunk, at the page's and the server's schedules, the final partial chunk padded."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.codec_fixtures import TOL, max_diff, random_codes, tiny_native
from gepard_demo.codec.graphed import CHUNK_SCOPE
from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.speed.select import apply_codec_speed
from gepard_demo.speed.settings import SpeedSettings
from gepard_demo.streaming.playback import decode_frames
from gepard_demo.streaming.pacing import chunk_sizes, decode_sizes
from gepard_demo.streaming.session import SynthesisSession
from gepard_demo.streaming.seams import SessionRequest

pytestmark = pytest.mark.numerics

PAGE = StreamSettings(first_chunk_frames=10, chunk_frames=10, chunk_schedule="fixed")
SERVER = StreamSettings(first_chunk_frames=10, chunk_frames=86, chunk_schedule="ramp")
VLLM = StreamSettings(first_chunk_frames=10, chunk_frames=86, chunk_schedule="fixed")
T = 197  # page: 19 x 10 + 7; ramp: 10, 10, 20, 40, 80, 37; fixed: 10, 86, 86, 15


@pytest.fixture()
def codec():
    c = tiny_native()
    yield c
    c.use_chunk_graphs(False)


def chunks(codec, stream, codes, mode="exact", lookback=8, warm=True):
    """codes pushed as a session cuts them (its last with push_last), chunk by chunk."""
    if codec.chunk_graphs is not None and warm:
        codec.warm_chunk_graphs(decode_sizes(stream.replace(decode_mode=mode, lookback_frames=lookback)))
    dec = codec.streamer(mode, lookback)
    out, start = [], 0
    sizes = chunk_sizes(stream, len(codes))
    for i, n in enumerate(sizes):
        push = dec.push_last if i == len(sizes) - 1 else dec.push
        out.append(push(codes[start:start + n]))
        start += n
    dec.close()
    return sizes, out


@pytest.mark.parametrize("stream", [PAGE, SERVER, VLLM], ids=["page 10+10", "server ramp", "10 then 86"])
@pytest.mark.parametrize("mode", ["exact", "lookback"])
def test_fixed_buffers_make_the_eager_streams_samples(codec, stream, mode):
    codes = random_codes(T, seed=5)
    sizes, eager = chunks(codec, stream, codes, mode)
    assert sizes[-1] not in sizes[:-1], "the last chunk is a partial one"
    codec.use_chunk_graphs(True)
    _, fixed = chunks(codec, stream, codes, mode)
    for i, (a, b) in enumerate(zip(eager, fixed)):
        assert a.shape == b.shape == (sizes[i] * 1024,)
        if i < len(sizes) - 1 and mode == "exact":
            assert np.array_equal(a, b), f"chunk {i} ({sizes[i]} frames) differs"
        else:  # padded into a bigger graph (a lookback window's last block may be): float rounding
            assert max_diff(a, b) <= TOL
    assert max_diff(np.concatenate(fixed), codec.decode_single_pass(codes) if mode == "exact"
                    else np.concatenate(eager)) <= TOL


def test_the_last_chunk_runs_padded_and_the_stream_ends_there(codec):
    codec.use_chunk_graphs(True)
    codes = random_codes(27, seed=2)
    sizes, out = chunks(codec, PAGE, codes)
    graphs = codec.chunk_graphs._free[0]
    assert sizes == [10, 10, 7] and graphs.sizes == [10], "the 7-frame chunk borrowed the 10-frame graph"
    dec = codec.streamer()
    dec.push_last(codes[:3])
    with pytest.raises(RuntimeError, match="ended"):
        dec.push(codes[3:5])
    dec.close()
    assert max_diff(np.concatenate(out), codec.decode_single_pass(codes)) <= TOL


def test_a_long_push_runs_in_the_eager_streams_blocks(codec):
    codes = random_codes(200, seed=4)
    eager = codec.streamer().push(codes)
    codec.use_chunk_graphs(True)
    dec = codec.streamer()
    assert np.array_equal(dec.push(codes), eager)
    assert dec._graphs.sizes == [28, 86]  # 86 + 86 + 28, as stream.DECODE_BLOCK_FRAMES cuts it
    dec.close()


def test_a_set_given_back_starts_the_next_stream_fresh(codec):
    codec.use_chunk_graphs(True)
    codes = random_codes(40, seed=6)
    _, first = chunks(codec, PAGE, codes)
    _, second = chunks(codec, PAGE, codes)
    assert len(codec.chunk_graphs._free) == 1, "the second stream reused the first one's set"
    assert all(np.array_equal(a, b) for a, b in zip(first, second))


@pytest.mark.parametrize("graphed_first", [True, False])
def test_carry_and_resume_across_both_kinds_of_exact_stream(codec, graphed_first):
    codes = random_codes(60, seed=8)
    whole = codec.decode_single_pass(codes)
    codec.use_chunk_graphs(graphed_first)
    a = codec.streamer()
    head = [a.push(codes[:10]), a.push(codes[10:30])]
    carried = a.carry()
    a.close()
    codec.use_chunk_graphs(not graphed_first)
    b = codec.streamer().resume(carried)
    tail = b.push(codes[30:])
    b.close()
    assert max_diff(np.concatenate(head + [tail]), whole) <= TOL


def test_a_chunk_launches_its_copy_in_its_replay_and_its_copy_out(codec):
    """What a GPU's host queues per chunk: no op for the codes' checks and dequantization (NumPy),
    the decoder's ops inside the one replay."""
    import torch

    codec.use_chunk_graphs(True)
    dec = codec.streamer()
    dec.push(random_codes(10, seed=1))  # the buffers built first
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        dec.push(random_codes(10, seed=2))
    dec.close()
    events = prof.events()
    replays = [e for e in events if e.name == CHUNK_SCOPE]
    assert len(replays) == 1
    inside = replays[0].time_range
    outside = [e.name for e in events if e.name.startswith("aten::") and not e.cpu_children
               and not (inside.start <= e.time_range.start and e.time_range.end <= inside.end)]
    no_kernel = ("aten::slice", "aten::select", "aten::view", "aten::unsqueeze", "aten::as_strided", "aten::detach",
                 "aten::alias", "aten::to", "aten::resolve_conj", "aten::resolve_neg", "aten::lift_fresh")
    computing = [n for n in outside if n not in no_kernel]  # views and no-op wrappers: no kernel of their own
    assert sorted(computing) == ["aten::copy_", "aten::copy_"], computing


def test_dequantize_in_numpy_is_torchs_bit_for_bit():
    import torch

    from gepard_demo.codec.fsq import dequantize, dequantize_np

    codes = random_codes(300, seed=12)
    assert np.array_equal(dequantize_np(codes), dequantize(codes).numpy())
    assert np.array_equal(dequantize_np(torch.from_numpy(codes)), dequantize(codes).numpy())
    codes[7, 3] = 9
    with pytest.raises(ValueError, match="frame 17, channel 3"):
        dequantize_np(codes, frame_offset=10)
    with pytest.raises(ValueError, match="integers"):
        dequantize_np(codes.astype(np.float32))


@pytest.mark.parametrize("stream", [PAGE, SERVER], ids=["page", "server"])
def test_decode_frames_the_same_with_and_without(codec, stream):
    codes = random_codes(131, seed=9)
    eager = decode_frames(codec, codes, stream)
    codec.use_chunk_graphs(True)
    assert max_diff(decode_frames(codec, codes, stream), eager) <= TOL


def test_a_session_streams_the_same_chunks_frame_for_frame(tiny_engine, codec):
    def run():
        session = SynthesisSession(
            tiny_engine,
            codec,
            SessionRequest("Hello there, how are you today?", SamplingSettings(seed=3, max_frames=47), PAGE),
        )
        return [(c.frame_start, c.frame_end, c.samples) for c in session], session.codes()

    eager, codes = run()
    codec.use_chunk_graphs(True)
    fixed, codes_fixed = run()
    assert np.array_equal(codes, codes_fixed) and len(eager) == len(fixed) > 2
    for (s1, e1, a), (s2, e2, b) in zip(eager, fixed):
        assert (s1, e1) == (s2, e2)
        assert max_diff(a, b) <= TOL


@pytest.mark.parametrize("setting, on", [("on", True), ("auto", False), ("off", False)])
def test_the_talkers_cuda_graphs_setting_turns_them_on(codec, setting, on, capsys):
    apply_codec_speed(codec, SpeedSettings(cuda_graphs=setting), SERVER)
    assert (codec.chunk_graphs is not None) == on  # on a CPU: "on" runs the fixed buffers eagerly
    assert "codec chunks" not in capsys.readouterr().err, "nothing is captured on a CPU"
