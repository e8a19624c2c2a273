"""NanoCodec streaming cost and accuracy, side by side in one run (CPU).

A full-size random NanoCodec decoder (31.6M parameters, built in memory) decodes the same
430 frames (~20 s of audio) four ways, fed as vLLM-Omni feeds it (10 frames, then 86 at a time):

- whole:       all 430 frames through the decoder in one pass (the reference; no streaming).
               (codec.decode() itself runs in 86-frame blocks with carried state: the
               "exact stream" row is its cost.)
- exact:       our state-carrying streamer (each frame decoded once)
- lookback 8:  vLLM-Omni's re-decode with 8 frames of history per chunk (its default)
- lookback 26: the same with 26 frames, just past the decoder's receptive field

Reported per mode: total decode time and its ratio to the whole decode, time until the first
chunk's audio exists, real-time factor (decode time / audio duration), and the max abs
difference from the whole decode. Target: exact streaming costs at most 1.1x the whole decode.

Run: .venv/bin/python benchmarks/codec_stream.py [--frames 430] [--threads 1] [--seed 0]
--quick: the tiny checkpoint's codec width, 40 frames in chunks of 10 then 20.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from quick import add_quick, codec_for  # noqa: E402

TARGET_RATIO = 1.1


def schedule(n: int, first: int, chunk: int) -> list[int]:
    sizes = [min(first, n)]
    while sum(sizes) < n:
        sizes.append(min(chunk, n - sum(sizes)))
    return sizes


def run_stream(dec, codes: np.ndarray, sizes: list[int]) -> tuple[np.ndarray, float, float]:
    out, start = [], 0
    t0 = time.perf_counter()
    first_s = None
    for n in sizes:
        out.append(dec.push(codes[start : start + n]))
        start += n
        if first_s is None:
            first_s = time.perf_counter() - t0
    return np.concatenate(out), time.perf_counter() - t0, first_s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=430)
    ap.add_argument("--first-chunk", type=int, default=10)
    ap.add_argument("--chunk", type=int, default=86)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (facts §8: 1 is steadiest here)")
    ap.add_argument("--seed", type=int, default=0)
    add_quick(ap)
    args = ap.parse_args()
    if args.quick:
        args.frames, args.chunk = 40, 20

    torch.set_num_threads(args.threads)
    t = time.perf_counter()
    codec = codec_for(args.quick, seed=args.seed)
    build_s = time.perf_counter() - t
    n_params = sum(p.numel() for p in codec.decoder.parameters())
    rng = np.random.default_rng(args.seed)
    codes = np.stack([rng.integers(0, lv, args.frames) for lv in codec.layout.levels], axis=1)
    sizes = schedule(args.frames, args.first_chunk, args.chunk)
    audio_s = args.frames * codec.samples_per_frame / codec.sample_rate
    codec.decode_single_pass(codes[:4])  # warm-up: first-call allocations are not the codec's cost

    t = time.perf_counter()
    whole = codec.decode_single_pass(codes)
    whole_s = time.perf_counter() - t
    rows = [("whole decode", whole_s, whole_s, 0.0)]
    for label, mode, lb in (("exact stream", "exact", 0), ("lookback 8", "lookback", 8), ("lookback 26", "lookback", 26)):
        audio, total_s, first_s = run_stream(codec.streamer(mode=mode, lookback=lb), codes, sizes)
        err = float(np.max(np.abs(audio.astype(np.float64) - whole)))
        rows.append((label, total_s, first_s, err))

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"NanoCodec decoder, random weights, {n_params / 1e6:.1f}M params (built in {build_s:.1f} s); "
        f"{args.frames} frames = {audio_s:.1f} s audio; chunks {args.first_chunk} then {args.chunk} "
        f"({len(sizes)} pushes); torch threads {args.threads}; {os.cpu_count()} CPUs, load avg {load:.1f}"
    )
    print(f"peak |audio| of the whole decode: {np.abs(whole).max():.3f}")
    print()
    print("| mode         | decode s | x whole | first chunk s | RTF   | max abs err vs whole |")
    print("|--------------|---------:|--------:|--------------:|------:|---------------------:|")
    for label, total_s, first_s, err in rows:
        print(
            f"| {label:<12} | {total_s:8.2f} | {total_s / whole_s:7.2f} | {first_s:13.2f} | "
            f"{total_s / audio_s:5.2f} | {err:20.2e} |"
        )
    ratio = rows[1][1] / whole_s
    verdict = "meets" if ratio <= TARGET_RATIO else "MISSES"
    print()
    print(f"exact stream / whole decode = {ratio:.2f}x: {verdict} the <= {TARGET_RATIO}x target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
