"""Voice cloning and classifier-free guidance speed, side by side in one run (CPU).

1. A guided decode step (the conditional and the text-free branch as two rows of one batch)
   against a plain step, at batch 1, on a talker with Gepard-1.0's real shapes and random
   weights (14 full-attention layers, hidden 1024), at fp32 and at the precision the speed layer
   picks for this CPU (gepard_demo.speed.pick_speed; fp16w on x86). Target: <= 1.3x at the
   picked precision (facts §8: at batch 1 the step is memory-bound, so a second row should be
   nearly free; fbgemm's fp16-weight linear makes it so, while MKL's fp32 linear costs ~2-3x
   for 2 rows on an AVX2 CPU). Also the whole-request cost when only the onset is guided
   (cfg_frames = a fifth of the frames), as the authors use it.
2. The speaker prefix of a 10-second reference (codec encoder + GroupFSQ + the compressor at
   the real shapes), against the audio's own length. Target: <= 0.5 s. Printed beside it: the
   encoder's FLOPs (torch's FlopCounterMode) and this CPU's measured fp32 matmul throughput,
   whose ratio is the fastest any exact fp32 encoder could run here.

The stop head is forced off so every run makes exactly the frames asked for.
Run: .venv/bin/python benchmarks/cloning_cfg.py [--frames 24] [--rounds 3] [--threads 2]
--quick: the tiny talker and encoder, 6 frames, 1 round, a 4 s reference (3 s of sound is the least taken).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gepard_demo.codec.tiny import TINY_ENCODER_CHANNELS  # noqa: E402
from gepard_demo.model.engine import GepardEngine  # noqa: E402
from gepard_demo.model.checkpoints.tiny import ensure_tiny  # noqa: E402
from gepard_demo.settings import SamplingSettings  # noqa: E402
from gepard_demo.speed.quantize import apply_precision  # noqa: E402
from gepard_demo.speed.select import detect_hardware, pick_speed  # noqa: E402
from gepard_demo.model.request import FrameRequest  # noqa: E402
from quick import add_quick, engine_for  # noqa: E402

TEXT = "The weather is sunny today."
REAL_ENCODER_CHANNELS = 24  # NanoCodec's encoder (facts §9)


def full_size_engine(quick: bool = False) -> GepardEngine:
    """Gepard-1.0's real shapes with random weights (gepard_demo.model.checkpoints.full_size), stop head off;
    a quick run's is the tiny checkpoint."""
    engine = engine_for(quick, ensure_tiny(Path(tempfile.gettempdir()) / "gepard-bench-cache"))
    with torch.no_grad():
        engine.talker.stop_head.weight.zero_()
        engine.talker.stop_head.bias.fill_(-30.0)
    return engine


def step_s(engine: GepardEngine, settings: SamplingSettings) -> float:
    """Median seconds between consecutive steps of the real loop (prefill excluded)."""
    times = [s.elapsed_s for s in engine.stream_frames(FrameRequest(TEXT, settings))]
    return statistics.median(b - a for a, b in zip(times, times[1:]))


def run_s(engine: GepardEngine, settings: SamplingSettings) -> float:
    """Seconds of one whole request (prefill included)."""
    t = time.perf_counter()
    for _ in engine.stream_frames(FrameRequest(TEXT, settings)):
        pass
    return time.perf_counter() - t


def bench_cfg(engine: GepardEngine, frames: int, rounds: int) -> tuple[float, float, float, float]:
    """(plain step, CFG step, their ratio, whole-request ratio with guidance on the first fifth)."""
    plain = SamplingSettings(seed=0, max_frames=frames)
    guided = plain.replace(cfg_scale=2.5)
    onset = guided.replace(cfg_frames=max(1, frames // 5))
    step_s(engine, plain.replace(max_frames=4)), step_s(engine, guided.replace(max_frames=4))  # warm-up
    # Interleaved rounds, so a burst of load on this shared machine hits both sides alike.
    pairs = [(step_s(engine, plain), step_s(engine, guided)) for _ in range(rounds)]
    whole = [run_s(engine, onset) / run_s(engine, plain) for _ in range(rounds)]
    return (
        statistics.median(p for p, _ in pairs),
        statistics.median(g for _, g in pairs),
        statistics.median(g / p for p, g in pairs),
        statistics.median(whole),
    )


def speechlike(seconds: float, rate: int = 22050) -> np.ndarray:
    """Harmonics with a moving pitch and a syllable envelope: a stand-in for a recording."""
    t = np.arange(int(seconds * rate)) / rate
    phase = 2 * np.pi * np.cumsum(120 + 30 * np.sin(2 * np.pi * 0.7 * t)) / rate
    env = np.clip(np.sin(2 * np.pi * 3.3 * t), 0, None)
    return (0.25 * sum(np.sin(k * phase) / k for k in range(1, 8)) * env).astype(np.float32)


def bench_prefix(seconds: float, rounds: int, encoder_channels: int = REAL_ENCODER_CHANNELS) -> dict[str, float]:
    """Median seconds of each stage of a prefix, at the real shapes, cache bypassed."""
    from gepard_demo.codec.encoder import CodecEncoder
    from gepard_demo.codec.tiny import nanocodec_config, random_codec_state
    from gepard_demo.voice.compressor import CompressorConfig, RefCompressor
    from gepard_demo.voice.speaker_prefix import SpeakerPrefixer

    codec_cfg = nanocodec_config(decoder_channels=64, encoder_channels=encoder_channels)  # the decoder is not used
    encoder = CodecEncoder.from_archive(codec_cfg, random_codec_state(codec_cfg, seed=0))
    compressor = RefCompressor(CompressorConfig(), encoder.layout.levels).eval()  # K 8, 2 layers, d 1024 (facts §9)
    prefixer = SpeakerPrefixer(encoder, compressor)
    audio = speechlike(seconds)
    prefixer.compute(audio, 22050)  # warm-up
    times: dict[str, list[float]] = {"encoder + FSQ": [], "compressor": [], "whole prefix": []}
    for _ in range(rounds):
        t0 = time.perf_counter()
        codes = encoder.encode(audio)
        t1 = time.perf_counter()
        prefixer.prefix_from_codes(codes)
        t2 = time.perf_counter()
        prefixer.compute(audio, 22050)
        t3 = time.perf_counter()
        times["encoder + FSQ"].append(t1 - t0)
        times["compressor"].append(t2 - t1)
        times["whole prefix"].append(t3 - t2)
    return {k: statistics.median(v) for k, v in times.items()}


def encoder_flops(seconds: float, encoder_channels: int = REAL_ENCODER_CHANNELS) -> float:
    """FLOPs of the real-shape encoder on `seconds` of audio (convolutions and matmuls)."""
    from torch.utils.flop_counter import FlopCounterMode

    from gepard_demo.codec.encoder import CodecEncoder
    from gepard_demo.codec.tiny import nanocodec_config, random_codec_state

    codec_cfg = nanocodec_config(decoder_channels=64, encoder_channels=encoder_channels)
    encoder = CodecEncoder.from_archive(codec_cfg, random_codec_state(codec_cfg, seed=0))
    with FlopCounterMode(display=False) as counter:
        encoder.encode(speechlike(seconds))
    return float(counter.get_total_flops())


def matmul_gflops(n: int = 2048, rounds: int = 5) -> float:
    """This CPU's fp32 matmul throughput with torch's threads (best of rounds)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(rounds))
    return 2 * n**3 / best / 1e9


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=24, help="frames per run")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved plain/guided rounds")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ref-seconds", type=float, default=10.0, help="reference length for the prefix benchmark")
    ap.add_argument("--skip-cfg", action="store_true", help="only the prefix benchmark")
    ap.add_argument("--skip-prefix", action="store_true", help="only the CFG benchmark")
    add_quick(ap)
    args = ap.parse_args()
    if args.quick:
        args.frames, args.rounds, args.ref_seconds = 6, 1, 4.0
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, frames per run {args.frames}")
    ok = True

    if not args.skip_cfg:
        t = time.perf_counter()
        engine = full_size_engine(args.quick)
        print(f"built the {engine.model_info.name} talker in {time.perf_counter() - t:.1f} s "
              f"({sum(p.numel() for p in engine.talker.parameters()) / 1e6:.0f} M parameters)")
        picked = pick_speed(detect_hardware("cpu"), threads=args.threads).precision
        print(f"the speed layer picks {picked} for this CPU")
        rows = []
        for precision in dict.fromkeys(("fp32", picked)):
            apply_precision(engine.talker, precision)  # fp32 first: the weights as built
            rows.append((precision, *bench_cfg(engine, args.frames, args.rounds)))
        del engine
        print(f"\n| batch 1, {'tiny' if args.quick else 'real shapes'} | plain step | CFG step (2 rows) | ratio | "
              f"whole request, cfg_frames = {max(1, args.frames // 5)} of {args.frames} | target |")
        print("| --- | ---: | ---: | ---: | ---: | --- |")
        for precision, plain, guided, ratio, onset in rows:
            target = "<= 1.3x" if precision == picked else "(info)"
            if precision == picked:
                ok &= ratio <= 1.3
            print(f"| {precision} | {plain * 1e3:.1f} ms | {guided * 1e3:.1f} ms | {ratio:.2f}x | {onset:.2f}x | {target} |")

    if not args.skip_prefix:
        channels = TINY_ENCODER_CHANNELS if args.quick else REAL_ENCODER_CHANNELS
        stages = bench_prefix(args.ref_seconds, args.rounds, channels)
        ok &= stages["whole prefix"] <= 0.5
        shapes = "tiny encoder" if args.quick else "real shapes"
        print(f"\n| speaker prefix, {args.ref_seconds:g} s reference, {shapes} | median | share of audio length | target |")
        print("| --- | ---: | ---: | --- |")
        for name, sec in stages.items():
            target = "<= 0.5 s" if name == "whole prefix" else ""
            print(f"| {name} | {sec * 1e3:.1f} ms | {sec / args.ref_seconds:.3f}x | {target} |")
        flops, peak = encoder_flops(args.ref_seconds, channels), matmul_gflops(512 if args.quick else 2048)
        print(f"\nencoder: {flops / 1e9:.0f} GFLOP for {args.ref_seconds:g} s; this CPU's fp32 matmul: {peak:.0f} GFLOP/s "
              f"with {torch.get_num_threads()} threads; so no exact fp32 encoder runs under {flops / 1e9 / peak:.2f} s here "
              f"(measured {stages['encoder + FSQ']:.2f} s: {flops / 1e9 / stages['encoder + FSQ']:.0f} GFLOP/s)")

    print("\nall targets met" if ok else "\nTARGET MISSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
