"""The chunk ramp (streaming/pacing.py): a listener who starts at the first chunk never runs dry
while the stream is at least about twice real time, with a few more chunks than the fixed
schedule, cut at frame counts only (the same bytes on every surface).

The schedule is driven on a simulated clock (any host speed gives the same figures), the
underrun measured as vLLM-Omni's bench measures it (eval/load/metrics.continuity); a real
session cuts the same chunks whatever its clock."""

from __future__ import annotations

import pytest
from tests.support.app_fixtures import SlowEngine, tiny_codec  # noqa: F401  (tiny_codec: fixture)

from eval.load.metrics import continuity
from gepard_demo.settings import StreamSettings
from gepard_demo.streaming.pacing import chunk_sizes
from gepard_demo.units import FRAME_S, SAMPLE_RATE, SAMPLES_PER_FRAME

RAMP, FIXED = StreamSettings(), StreamSettings(chunk_schedule="fixed")  # 10, then up to / always 86
CUT_S = 0.01  # a cut's decode on the simulated clock


def simulate(stream: StreamSettings, rtf: float, frames: int = 1000) -> tuple[list[float], list[int]]:
    """(arrival s, bytes) of each chunk of a stream that makes a frame every rtf x FRAME_S."""
    t, arrivals, sizes = 0.0, [], []
    for size in chunk_sizes(stream, frames):
        t += size * rtf * FRAME_S + CUT_S
        arrivals.append(t)
        sizes.append(2 * size * SAMPLES_PER_FRAME)
    return arrivals, sizes


def test_the_ramp_doubles_from_the_first_chunk_up_to_chunk_frames():
    assert chunk_sizes(RAMP, 1000) == [10, 10, 20, 40, 80] + [86] * 9 + [66]
    assert chunk_sizes(FIXED, 1000) == [10] + [86] * 11 + [44]
    assert chunk_sizes(StreamSettings(first_chunk_frames=4, chunk_frames=7), 30) == [4, 4, 7, 7, 7, 1]
    assert chunk_sizes(StreamSettings(first_chunk_frames=20, chunk_frames=8), 40) == [20, 8, 8, 4]


@pytest.mark.parametrize("rtf", [0.05, 0.2, 0.3, 0.45])
def test_the_ramp_never_starves_a_stream_twice_real_time(rtf):
    ramp, fixed = simulate(RAMP, rtf), simulate(FIXED, rtf)
    assert continuity(*ramp, SAMPLE_RATE).max_underrun_s == 0.0
    assert ramp[0][0] == fixed[0][0]  # the first chunk as before
    if rtf >= 0.2:  # past 10 / 86: the fixed schedule starves the listener before its second chunk
        assert not continuity(*fixed, SAMPLE_RATE).is_continuous


@pytest.mark.parametrize("schedule", ["ramp", "fixed"])
def test_a_session_cuts_where_the_schedule_says_whatever_the_clock(tiny_engine, tiny_codec, schedule):  # noqa: F811
    """The cuts follow frame counts only: a session slower than its host (a wait a frame) cuts
    exactly chunk_sizes' chunks, so the bytes are the same on any host (the listener's figures
    on real streams: benchmarks/load_knee.py, docs/PERFORMANCE.md §13)."""
    from gepard_demo.streaming.session import SynthesisSession
    from gepard_demo.streaming.seams import SessionRequest

    engine = SlowEngine(tiny_engine, 0.25 * FRAME_S)
    sampling = tiny_engine.default_sampling().replace(stop_threshold=0.99, max_frames=140, seed=3)
    stream = StreamSettings(chunk_schedule=schedule)
    chunks = [
        c
        for c in SynthesisSession(
            engine, tiny_codec, SessionRequest("The ramp keeps the listener fed.", sampling, stream)
        )
        if len(c.samples)
    ]
    assert [c.frame_end - c.frame_start for c in chunks] == chunk_sizes(stream, 140)
    assert [c.frame_end - c.frame_start for c in chunks][:3] == ([10, 10, 20] if schedule == "ramp" else [10, 86, 44])
