"""The speed layer on the real tiny checkpoint: the int8 backbone passes the fidelity guard (and the
guard can fail), the pipeline yields exactly the engine's frames from another thread and stops
when closed, and the hardware pick is the documented one. The real-shape guard runs in
benchmarks/cpu_realtime.py (section 2)."""

from __future__ import annotations

import os

import threading

import pytest
import torch
from torch import nn

from gepard_demo.model.engine import GepardEngine
from gepard_demo.settings import SamplingSettings
from gepard_demo.speed.fidelity import MAX_DP_STOP, MAX_MEAN_KL, compare, head_kl, snr_db, trace
from gepard_demo.speed.pipeline import PipelinedEngine
from gepard_demo.speed.quantize import apply_precision, backbone_bytes
from gepard_demo.speed.select import CPU_FASTEST_FIRST, GUARD_PASSES, Hardware, apply_speed, load_dtype, pick_speed
from gepard_demo.speed.settings import SpeedError, SpeedSettings
from gepard_demo.model.request import FrameRequest

pytestmark = pytest.mark.numerics  # results depend on the CPU's kernels: make test-isa runs it under other ISAs

TEXT = "The quick brown fox jumps over the lazy dog."


@pytest.fixture()
def fresh_engine(tiny_cache_dir):
    return GepardEngine.load("tiny", cache_dir=tiny_cache_dir)


@pytest.mark.parametrize("precision", ["fp16w", "int8"])
def test_fast_backbone_passes_the_guard_and_leaves_heads_fp32(tiny_engine, fresh_engine, precision):
    prompt = tiny_engine.prompt_ids(TEXT)
    ref = trace(tiny_engine.talker, prompt, 120, seed=1)
    before = backbone_bytes(fresh_engine.talker)
    apply_precision(fresh_engine.talker, precision)
    talker = fresh_engine.talker
    assert backbone_bytes(talker) < 0.6 * before  # the linears hold fewer bytes (tiny also has convs, norms)
    assert not any(type(m) is nn.Linear for m in talker.model.layers.modules())
    # Precision stays where every sample is decided.
    assert all(type(h) is nn.Linear and h.weight.dtype == torch.float32 for h in talker.codebook_heads)
    assert type(talker.stop_head) is nn.Linear and talker.model.embed_tokens.weight.dtype == torch.float32
    fast = trace(talker, prompt, 120, frames=ref.frames)
    report = compare(ref, fast)
    assert report.steps == 120
    # The lower-precision weights moved the logits (on any CPU); how far is the guard's to judge.
    # On AVX-512 fbgemm's fp16 path agrees with fp32 to rounding, so the KL may be exactly 0.
    assert not torch.equal(fast.logits, ref.logits)
    assert 0 <= report.mean_kl <= MAX_MEAN_KL and report.max_dp_stop <= MAX_DP_STOP, report
    assert report.passes and report.argmax_agreement > 0.9
    if precision == "int8":  # only the RMSNorm-fed linears are int8
        kinds = {n.rsplit(".", 1)[-1]: str(m.weight().dtype) for n, m in talker.model.layers.named_modules()
                 if callable(getattr(m, "weight", None))}
        assert kinds["q_proj"] == kinds["up_proj"] == "torch.qint8" and kinds["down_proj"] == "torch.float32"


def test_the_guard_fails_a_talker_that_drifts(tiny_engine, fresh_engine):
    prompt = tiny_engine.prompt_ids(TEXT)
    ref = trace(tiny_engine.talker, prompt, 30, seed=1)
    with torch.no_grad():  # a coarse "quantization" of the stop head and the first layer
        fresh_engine.talker.stop_head.weight.mul_(1.5)
        for p in fresh_engine.talker.model.layers[0].parameters():
            p.add_(0.2 * torch.randn_like(p))
    report = compare(ref, trace(fresh_engine.talker, prompt, 30, frames=ref.frames))
    assert not report.passes and report.max_dp_stop > MAX_DP_STOP
    with pytest.raises(ValueError, match="teacher-forced"):
        compare(ref, trace(fresh_engine.talker, prompt, 30, seed=2))


def test_head_kl_is_never_negative_and_grows_with_the_difference():
    torch.manual_seed(0)
    a = torch.randn(500, 32, 8)
    a[:, 1:, 6:] = float("-inf")  # padding levels, as head_logits makes them
    valid = torch.isfinite(a)
    # Distributions equal up to float32 rounding: the plain float32 sum of p (log p - log q)
    # comes out negative for about half of these heads; the estimate must not.
    near = (a.double() + 1e-7 * torch.randn(a.shape, dtype=torch.float64)).float()
    lp, lq = torch.log_softmax(a, -1), torch.log_softmax(near, -1)
    assert (torch.where(valid, lp.exp() * (lp - lq), torch.zeros(())).sum(-1) < 0).any()
    kl_near = head_kl(a, near, valid)
    assert kl_near.min() >= 0 and kl_near.max() < 1e-9
    assert torch.equal(head_kl(a, a, valid), torch.zeros(500, 32, dtype=torch.float64))
    far = head_kl(a, a + torch.randn(a.shape), valid)
    assert far.min() > 0 and far.mean() > 1e3 * kl_near.mean()


def test_snr_of_identical_and_noisy_audio():
    import numpy as np

    a = np.sin(np.linspace(0, 100, 4000)).astype(np.float32)
    assert snr_db(a, a) == float("inf")
    assert 39 < snr_db(a, a + 0.01 * a) < 41  # noise 1% of the signal = 40 dB
    with pytest.raises(ValueError):
        snr_db(a, a[:-1])


def test_pipeline_yields_the_engines_frames_from_its_own_thread(tiny_engine):
    settings = SamplingSettings(seed=5, max_frames=30, temperature=0.8)
    direct = list(tiny_engine.stream_frames(FrameRequest(TEXT, settings)))
    seen_threads = set()

    class Spy:
        def __getattr__(self, name):
            return getattr(tiny_engine, name)

        def stream_frames(self, request):
            for step in tiny_engine.stream_frames(request):
                seen_threads.add(threading.current_thread().name)
                yield step

    piped = list(PipelinedEngine(Spy()).stream_frames(FrameRequest(TEXT, settings)))
    assert seen_threads == {"gepard-talker"}
    # The same frames, in order, ended the same way. p_stop to the float's last bits: once, in a
    # whole suite under .ci/slowed.sh, the talker's thread computed step 11's as 0.0411637872
    # against 0.0411637761 (the BLAS may split a product differently on another thread of a
    # loaded host); the codes were the same.
    assert [(s.index, s.done) for s in piped] == [(s.index, s.done) for s in direct]
    assert [s.p_stop for s in piped] == pytest.approx([s.p_stop for s in direct], rel=1e-5, abs=1e-7)
    assert all((a.codes is None and b.codes is None) or torch.equal(a.codes, b.codes) for a, b in zip(piped, direct))
    assert PipelinedEngine(tiny_engine).model_info is tiny_engine.model_info


def test_closing_the_pipeline_stops_the_talker_and_frees_the_engine(tiny_engine):
    closed = threading.Event()

    class Counting:
        def stream_frames(self, request):
            try:
                yield from tiny_engine.stream_frames(request)
            finally:
                closed.set()

    it = PipelinedEngine(Counting(), max_ahead=2).stream_frames(FrameRequest(TEXT, SamplingSettings(seed=1, max_frames=500)))
    next(it)
    it.close()  # joins the worker: it must notice the stop while blocked on a full queue
    assert closed.is_set()
    assert not any(t.name == "gepard-talker" and t.is_alive() for t in threading.enumerate())
    # Errors in the talker thread reach the consumer.
    with pytest.raises(Exception, match="temperature"):
        list(PipelinedEngine(tiny_engine).stream_frames(FrameRequest(TEXT, SamplingSettings(temperature=-1.0))))


def _hw(device="cpu", cores=2, flags=("avx2",), int8=True, capability=None):
    return Hardware(device=device, cores=cores, cpu_flags=flags, int8_kernels=int8, capability=capability)


def test_pick_speed_follows_the_hardware_and_the_override():
    auto = pick_speed(_hw())
    fastest = next(p for p in CPU_FASTEST_FIRST if GUARD_PASSES[p])
    assert (auto.precision, auto.threads, auto.pipelined) == (fastest, 1, True)  # one core per stage
    assert (pick_speed(_hw(cores=8)).threads, pick_speed(_hw(cores=1)).pipelined) == (4, False)
    assert pick_speed(_hw(), threads=2).threads == 2
    assert pick_speed(_hw(int8=False)).precision == "fp32"
    if not GUARD_PASSES["int8"]:
        assert "misses the fidelity guard" in pick_speed(_hw(), precision="int8").reason
    tiny = pick_speed(_hw(), small_model=True)
    assert (tiny.precision, tiny.threads, tiny.pipelined) == ("fp32", 1, False)
    gpu = pick_speed(_hw(device="cuda", capability=(9, 0)))
    assert (gpu.precision, gpu.pipelined) == ("bf16", False)
    assert pick_speed(_hw(device="cuda", capability=(7, 5))).precision == "fp16"  # a T4 (tests/speed/test_precision.py)
    assert load_dtype("cpu", "bf16") == "float32"  # a CPU loads fp32, then converts
    assert pick_speed(_hw(cores=1), precision="fp32").describe() == "cpu · fp32 · 1 thread · talker then codec"
    assert "no native bf16" in pick_speed(_hw(), precision="bf16").reason
    assert "no native bf16" not in pick_speed(_hw(flags=("avx2", "avx512_bf16")), precision="bf16").reason
    with pytest.raises(SpeedError, match="CPU-only"):
        pick_speed(_hw(device="cuda"), precision="int8")
    with pytest.raises(SpeedError):
        pick_speed(_hw(int8=False), precision="int8")
    with pytest.raises(SpeedError):
        SpeedSettings(precision="int4")


def test_the_codec_runs_bf16_only_where_the_cpu_has_native_bf16():
    assert pick_speed(_hw(flags=("avx2", "avx512f"))).codec == "fp32"  # AVX2 / AVX-512 without bf16: 50x slower
    for flags in (("avx2", "avx512_bf16"), ("avx2", "amx_bf16")):
        pick = pick_speed(_hw(flags=flags))
        assert pick.codec == "bf16" and pick.describe().endswith("bf16 codec") and "42 dB" in pick.reason
    assert pick_speed(_hw(flags=("avx2", "amx_bf16")), codec="fp32").codec == "fp32"  # the override
    assert pick_speed(_hw(flags=("avx2", "amx_bf16")), small_model=True).codec == "fp32"  # the tiny codec
    assert pick_speed(_hw(device="cuda", capability=(9, 0))).codec == "fp32"  # a GPU decodes fp32, exactly
    assert "much slower" in pick_speed(_hw(), codec="bf16").reason
    with pytest.raises(SpeedError, match="CPU path"):
        SpeedSettings(device="cuda", codec="bf16")


@pytest.mark.slow
def test_the_bf16_codec_keeps_the_guards_40_db_at_full_size():
    # What CODEC_GUARD_PASSES records: the full-size random NanoCodec's exact streaming decode in
    # 10-frame pushes, bf16 autocast against fp32, SNR >= 40 dB (fidelity.MIN_CODEC_SNR_DB). Only
    # where it is ever picked: bf16 convolutions without native bf16 math take minutes.
    import numpy as np
    import torch

    from gepard_demo.codec import build_random_codec
    from gepard_demo.speed.fidelity import MIN_CODEC_SNR_DB, snr_db
    from gepard_demo.speed.select import detect_hardware

    if not detect_hardware("cpu").native_bf16 or os.environ.get("ONEDNN_MAX_CPU_ISA", "").startswith("AVX2"):
        pytest.skip("this CPU (or its ISA cap) has no native bf16 math: the bf16 codec is never picked here")
    codec = build_random_codec(seed=0)
    levels = torch.tensor([8, 7, 6, 6] * 8)
    codes = (torch.rand(40, 32, generator=torch.Generator().manual_seed(0)) * levels).long()

    def decode(bf16: bool) -> np.ndarray:
        codec.decoder.cpu_bf16 = bf16
        dec = codec.streamer(mode="exact")
        return np.concatenate([np.asarray(dec.push(codes[k:k + 10]), np.float32) for k in range(0, 40, 10)])

    try:
        reference, fast = decode(False), decode(True)
    finally:
        codec.decoder.cpu_bf16 = False
    assert fast.dtype == np.float32 and snr_db(reference, fast) >= MIN_CODEC_SNR_DB
    assert not np.array_equal(reference, fast)  # it did run in bf16


def test_apply_speed_records_the_pick_and_wraps_the_engine(fresh_engine):
    speed = SpeedSettings("cpu", "int8", threads=1, pipelined=True, reason="test")
    engine = apply_speed(fresh_engine, speed)
    try:
        assert isinstance(engine, PipelinedEngine)
        assert engine.model_info.speed == speed.describe() == "cpu · int8+fp16 backbone · 1 thread · talker ahead of codec"
        steps = list(engine.stream_frames(FrameRequest(TEXT, SamplingSettings(seed=2, max_frames=8))))
        assert steps and steps[0].codes.shape == (32,)
        # The session (what the app, synth and the server stream through) carries the pick.
        from gepard_demo.codec import load_codec
        from gepard_demo.settings import StreamSettings
        from gepard_demo.streaming.session import SynthesisSession
        from gepard_demo.streaming.seams import SessionRequest

        session = SynthesisSession(
            engine,
            load_codec(engine.codec_source()),
            SessionRequest(
                TEXT, SamplingSettings(seed=2, max_frames=12), StreamSettings(first_chunk_frames=4, chunk_frames=4)
            ),
        )
        assert len(session.run()) > 0 and session.stats.speed == engine.model_info.speed
    finally:
        torch.set_num_threads(1)


@pytest.mark.slow
def test_synth_prints_its_speed_pick_and_honours_precision(tiny_cache_dir):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "GEPARD_CACHE_DIR": str(tiny_cache_dir), "GEPARD_MODEL": "tiny"}

    def synth(*flags):
        return subprocess.run([sys.executable, "-m", "gepard_demo", "synth", "Hello.", "--seed", "1",
                               "--max-frames", "6", *flags], cwd=root, env=env, capture_output=True, text=True, timeout=300)

    proc = synth("--precision", "fp16w", "--pipeline", "on")
    assert proc.returncode == 0, proc.stderr
    expected = "cpu · fp16-weight backbone · 1 thread · talker ahead of codec"
    assert f"speed: {expected} (asked for)" in proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1])["speed"] == expected
    proc = synth()  # the tiny model: auto keeps one fp32 thread, no pipeline
    assert proc.returncode == 0 and "speed: cpu · fp32 · 1 thread · talker then codec" in proc.stderr
    proc = synth("--precision", "int4")
    assert proc.returncode == 2 and "--precision" in proc.stderr


def test_banner_and_stats_show_the_speed_path():
    from types import SimpleNamespace

    from gepard_demo.streaming.session import SynthesisStats
    from gepard_demo.ui.page.banner import banner_markdown
    from gepard_demo.ui.page.views import stats_markdown

    from gepard_demo.model.engine import ModelInfo
    from gepard_demo.ui.hosts.model_host import ModelHost

    info = ModelInfo(name="m", path="/m", revision=None, random_weights=False, device="cpu",
                     dtype="float32", speed="cpu · fp16-weight backbone · 1 thread · talker ahead of codec")
    host = ModelHost(SimpleNamespace(model_info=info), SimpleNamespace(sample_rate=22050), "m")
    assert "**Speed path:** cpu · fp16-weight backbone" in banner_markdown(host)
    stats = SynthesisStats(speed=info.speed, frames=3, ended_by=["stop"], complete=True, stop_frame=3)
    assert f"| speed path | {info.speed} |" in stats_markdown(stats, SamplingSettings())


def test_the_older_dtype_flag_still_sets_the_precision():
    import argparse

    from gepard_demo.speed.flags import add_speed_flags

    p = argparse.ArgumentParser()
    add_speed_flags(p)
    assert p.parse_args([]).precision == "auto"
    assert p.parse_args(["--dtype", "bfloat16"]).precision == "bf16"  # docs/DEPLOY.md's GPU command
    assert p.parse_args(["--precision", "fp16w"]).precision == "fp16w"
