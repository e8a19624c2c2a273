"""benchmarks/stream_timeline.py, the GPU run's breakdown, checked on a CPU: its summary of a
profile (per frame the talker, the codec, the session; ops, host reads, syncs, copies, the device's
gaps; the top kernels), on made-up device events and on a real short stream. The prepared GPU
command's dry run is tests/benchmarks/test_benchmarks.py's."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from stream_timeline import (CHUNK_SCOPE, CODEC_SCOPE, FRAME_SCOPE, STEP_SCOPE, Ev, profile_stream,  # noqa: E402
                             summarise, table)

from gepard_demo.codec import load_codec  # noqa: E402
from gepard_demo.settings import StreamSettings  # noqa: E402


def op(name, start, end, thread=1, leaf=True):
    return Ev(name, start, end, thread, False, leaf)


def kernel(name, start, end):
    return Ev(name, start, end, 0, True, False)


def test_a_gpu_profile_per_frame():
    """Two frames as a GPU run records them: a talker replay each, a codec replay in the second,
    the session's ops between, a host read, a sync and a copy; kernels with idle gaps."""
    evs = [
        op(FRAME_SCOPE, 0, 1000, leaf=False), op(STEP_SCOPE, 100, 200, leaf=False), op("aten::mm", 110, 150),
        op("aten::copy_", 300, 310), op("cudaStreamSynchronize", 310, 400, leaf=False),
        op("aten::stack", 1100, 1120), op(FRAME_SCOPE, 2000, 2500, leaf=False), op(STEP_SCOPE, 2100, 2200, leaf=False),
        op(CODEC_SCOPE, 2600, 3600, leaf=False), op(CHUNK_SCOPE, 2700, 2800, leaf=False), op("aten::conv1d", 2710, 2790),
        op("cudaMemcpyAsync", 3400, 3410, leaf=False), op("aten::_local_scalar_dense", 3700, 3710),
        op("aten::add", 9000, 9001, thread=2),  # another thread, outside any scope: not the session's
        kernel("gemv", 200, 600), kernel("gemv", 700, 900), kernel("conv", 2800, 3000), kernel("Memcpy DtoH", 3400, 3450),
    ]
    s = summarise(evs, frame_rate_hz=1000 / 1024 * 22.05, audio_frames=2)
    first, second = s["rows"]
    assert s["frames"] == 2 and first["wall_ms"] == 2.0 and second["wall_ms"] == pytest.approx(1.71)
    assert first["ops"] == {"talker": 2, "codec": 0, "session": 1}  # the replay and its readback's copy_; stack
    assert second["ops"] == {"talker": 1, "codec": 1, "session": 1}  # a replay each; the host read
    assert (first["syncs"], first["copies"], second["copies"], second["host_reads"]) == (1, 0, 1, 1)
    assert second["codec_ms"] == 1.0 and second["session_ms"] == pytest.approx(1.71 - 0.5 - 1.0)
    assert first["device_busy_ms"] == pytest.approx(0.6) and first["device_gaps_ms"] == pytest.approx(0.1)
    assert second["device_gaps_ms"] == pytest.approx(0.4) and second["largest_gap_ms"] == pytest.approx(0.4)
    assert s["top_on"] == "device" and s["top"][0] == {"name": "gemv", "total_ms": pytest.approx(0.6), "count": 2}
    assert s["totals"]["ops_per_frame"] == {"talker": 1.5, "codec": 0.5, "session": 1.0}
    text = table(s)
    assert "| 1 | 1.71 |" in text and "| top device ops by time |" in text and "| gemv | 0.60 | 2 |" in text


def test_a_profile_without_the_scopes_is_refused():
    with pytest.raises(ValueError, match="traced"):
        summarise([op("aten::mm", 0, 1)], 21.5)


def test_a_real_short_stream_on_a_cpu(tiny_engine):
    """Talker and codec as a GPU runs them (fixed-shape step, chunk graphs), eager here."""
    codec = load_codec(tiny_engine.codec_source())
    codec.use_chunk_graphs(True)
    tiny_engine.use_loop("on")
    try:
        evs, made = profile_stream(tiny_engine, codec, 21, StreamSettings(first_chunk_frames=10, chunk_frames=10,
                                                                          chunk_schedule="fixed"), "cpu")
    finally:
        tiny_engine.use_loop("auto")
    s = summarise(evs, codec.frame_rate_hz, made)
    assert made == s["frames"] == 21  # a row per read: the 21st ends the stream by its budget
    launched = s["launched"]
    assert launched["talker"][STEP_SCOPE] == 21 and launched["codec"][CHUNK_SCOPE] == 3  # 10, 10, 1 (padded)
    assert all(r["talker_ms"] > 0 for r in s["rows"]) and sum(r["codec_ms"] > 0 for r in s["rows"]) >= 2
    assert s["top_on"] == "host" and s["top"]
    totals = s["totals"]
    assert totals["ops_per_audio_s"]["all"] == pytest.approx(sum(totals["ops_per_audio_s"][p] for p in
                                                                 ("talker", "codec", "session")))
    assert "ops launched per audio second" in table(s)
    json.dumps(s)
