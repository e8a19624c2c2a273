"""GPU smoke test: everything a GPU Space depends on, in one run on one device, offline, on a talker
with Gepard-1.0's real shapes and random weights (gepard_demo/model/full_size.py) and a full-size
random NanoCodec. About 3 minutes on one GPU (183 s on an H200). One table:

- pick: the device, its compute capability and the precision the speed layer picks for it
  (bf16 from 8.0, fp16 below; on a CPU this script runs bf16, what an Ampere-or-later GPU runs).
- guard: the picked precision against fp32 on the same device, teacher-forced (speed/fidelity.py):
  mean per-head KL (nats) and max |p_stop - p_stop fp32| over the steps; bounds 0.01 and 0.01.
- codec SNR: the device's exact decode of random codes against the CPU's fp32 one (dB; TF32 is
  off for the codec's convolutions, codec/hifigan.exact_gpu_convolutions).
- stream: RTF (wall / audio) and time to first audio of a 430-frame (20 s) SynthesisSession at
  batch 1 with the page's chunks (10 then 10 frames, exact), after a short warm-up stream.
- CFG: a guided request's median step time against a plain one's (cfg_scale 2.5, every frame).
- batch 8: a padded batch of 8 different texts, frames/s against one request's.
- memory: peak GPU memory above the weights at 1 x 1000 and 16 x 300 frames, beside the estimate
  the engine refuses batches with (model/memory.py); a CPU reports the estimate only.

The stop head is forced off for the timed runs (random weights would stop anywhere), so every
run makes exactly the frames asked for; the guard uses the untouched weights.

Run: .venv/bin/python benchmarks/gpu_smoke.py [--device cuda|cpu] [--quick] [--json FILE]
--quick: the tiny checkpoint and a tenth of the frames (what the test suite runs on a CPU).
Exits 1 when the guard fails.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from quick import add_quick  # noqa: E402

from gepard_demo.codec import build_random_codec, load_codec  # noqa: E402
from gepard_demo.model.engine import GepardEngine  # noqa: E402
from gepard_demo.model.full_size import build_full_size_engine  # noqa: E402
from gepard_demo.model.memory import batch_bytes  # noqa: E402
from gepard_demo.model.tiny import ensure_tiny  # noqa: E402
from gepard_demo.settings import SamplingSettings, StreamSettings  # noqa: E402
from gepard_demo.speed.fidelity import MAX_DP_STOP, MAX_MEAN_KL, compare, snr_db, trace  # noqa: E402
from gepard_demo.speed.quantize import BACKBONE_DTYPES  # noqa: E402
from gepard_demo.speed.select import detect_hardware, precision_for  # noqa: E402
from gepard_demo.streaming.session import SynthesisSession  # noqa: E402

TEXT = ("The weather is sunny today, with a light breeze from the west and a few clouds over the hills. "
        "In the afternoon the wind turns, and by the evening there may be rain along the coast.")
TEXTS = ["Hi.", "Good morning.", "Where is the station?", "The weather is sunny today.",
         "Please call me back after five.", "Seven thousand two hundred and six.",
         "She sells sea shells by the sea shore.", "A much longer sentence that takes a while to say out loud."]
PAGE_STREAM = StreamSettings(first_chunk_frames=10, chunk_frames=10, decode_mode="exact")
GIB = 2**30


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def stop_head_off(engine: GepardEngine) -> None:
    with torch.no_grad():
        engine.talker.stop_head.weight.zero_()
        engine.talker.stop_head.bias.fill_(-30.0)


def engines(device: str, precision: str, quick: bool):
    """(fp32 engine, picked-precision engine, codec on the device, codec on the CPU): same weights."""
    cache = Path(tempfile.gettempdir()) / "gepard-bench-cache"
    tiny = ensure_tiny(cache)
    if quick:
        ref = GepardEngine.load(str(tiny), device="cpu")
        codec_cpu = load_codec(ref.codec_source())
        codec_dev = load_codec(ref.codec_source(), device=device)
    else:
        ref = build_full_size_engine(tiny, dtype="float32", device="cpu", seed=0)
        codec_cpu = build_random_codec(seed=0)
        codec_dev = build_random_codec(seed=0, device=device)
    low = copy.deepcopy(ref)
    low.talker.set_backbone_dtype(BACKBONE_DTYPES[precision])
    for e in (ref, low):
        e.talker.to(device)
    return ref, low, codec_dev, codec_cpu


def median_step_s(engine: GepardEngine, text: str, settings: SamplingSettings) -> float:
    times = [s.elapsed_s for s in engine.stream_frames(text, settings)]
    return statistics.median(b - a for a, b in zip(times, times[1:]))


def peak_bytes(engine: GepardEngine, device: str, texts: list[str], frames: int) -> int | None:
    if not device.startswith("cuda"):
        return None
    sync(device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)
    engine.generate(texts, SamplingSettings(seed=3, max_frames=frames))
    sync(device)
    return torch.cuda.max_memory_allocated(device) - base


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    add_quick(p)
    p.add_argument("--json", default=None, help="also write the results here")
    args = p.parse_args(argv)
    device, scale = args.device, 10 if args.quick else 1
    t_start = time.perf_counter()
    hw = detect_hardware(device)
    precision = precision_for(device, "auto") if device.startswith("cuda") else "bf16"
    ref, low, codec_dev, codec_cpu = engines(device, precision, args.quick)
    out: dict = {"device": hw.describe(), "precision": precision, "model": ref.model_info.name,
                 "torch": torch.__version__, "cuda_build": torch.version.cuda}

    steps = 200 // scale
    prompt = ref.prompt_ids(TEXT)
    reference = trace(ref.talker, prompt, steps, seed=1)
    rep = compare(reference, trace(low.talker, prompt, steps, frames=reference.frames))
    out["guard"] = {**rep.as_dict(), "bounds": [MAX_MEAN_KL, MAX_DP_STOP]}

    codes = np.random.default_rng(7).integers(0, 6, size=(200 // scale, 32))
    out["codec_snr_db"] = snr_db(codec_cpu.decode(codes), codec_dev.decode(codes))

    stop_head_off(low)
    frames = 430 // scale
    SynthesisSession(low, codec_dev, "Warm up.", SamplingSettings(seed=0, max_frames=12), PAGE_STREAM).run()
    session = SynthesisSession(low, codec_dev, TEXT, SamplingSettings(seed=1, max_frames=frames), PAGE_STREAM)
    session.run()
    st = session.stats
    out["stream"] = {"frames": st.frames, "rtf": st.rtf, "ttfa_s": st.ttfa_s, "wall_s": st.wall_s}

    plain = median_step_s(low, TEXT, SamplingSettings(seed=2, max_frames=200 // scale))
    guided = median_step_s(low, TEXT, SamplingSettings(seed=2, max_frames=200 // scale, cfg_scale=2.5))
    out["cfg"] = {"plain_step_ms": plain * 1e3, "guided_step_ms": guided * 1e3, "ratio": guided / plain}

    n = 200 // scale
    t0 = time.perf_counter()
    low.generate([TEXTS[3]], SamplingSettings(seed=4, max_frames=n))
    sync(device)
    solo_fps = n / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    low.generate(TEXTS, [SamplingSettings(seed=10 + i, max_frames=n) for i in range(len(TEXTS))])
    sync(device)
    batch_fps = len(TEXTS) * n / (time.perf_counter() - t0)
    out["batch8"] = {"frames_per_s": batch_fps, "solo_frames_per_s": solo_fps, "ratio": batch_fps / solo_fps}

    dtype = low.talker.backbone_dtype
    out["memory"] = {}
    for rows, frames_m in ((1, 1000 // scale), (16, 300 // scale)):
        texts = (TEXTS * 2)[:rows]
        width = max(len(low.prompt_ids(t)) for t in texts)
        out["memory"][f"{rows}x{frames_m}"] = {"peak_bytes": peak_bytes(low, device, texts, frames_m),
                                               "estimate_bytes": batch_bytes(low.config, rows, width, frames_m, dtype)}
    out["wall_s"] = time.perf_counter() - t_start
    print(table(out))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return out


def table(o: dict) -> str:
    g, s, c, b = o["guard"], o["stream"], o["cfg"], o["batch8"]

    def gib(x):
        return "n/a (CPU)" if x is None else f"{x / GIB:.2f} GiB"

    rows = [
        ("device / pick", f"{o['device']} -> {o['precision']} backbone, fp32 heads (torch {o['torch']}, "
                          f"CUDA build {o['cuda_build']})"),
        ("model", o["model"]),
        ("guard vs fp32: mean KL / max dp_stop", f"{g['mean_kl']:.2e} / {g['max_dp_stop']:.2e} over {g['steps']} steps: "
                                                   + ("PASS" if g["passes"] else "FAIL") + f" (bounds {g['bounds'][0]} / {g['bounds'][1]})"),
        ("codec SNR, device vs CPU", "identical" if c_inf(o["codec_snr_db"]) else f"{o['codec_snr_db']:.1f} dB"),
        (f"stream of {s['frames']} frames: RTF / time to first audio", f"{s['rtf']:.3f} / {s['ttfa_s'] * 1e3:.0f} ms"),
        ("CFG step / plain step", f"{c['guided_step_ms']:.1f} / {c['plain_step_ms']:.1f} ms = {c['ratio']:.2f}x"),
        ("padded batch of 8: frames/s (vs 1)", f"{b['frames_per_s']:.1f} ({b['ratio']:.2f}x of {b['solo_frames_per_s']:.1f})"),
    ]
    for key, m in o["memory"].items():
        rows.append((f"memory above weights, {key} frames: peak / estimate", f"{gib(m['peak_bytes'])} / {gib(m['estimate_bytes'])}"))
    rows.append(("wall time of this script", f"{o['wall_s']:.0f} s"))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"| {k.ljust(width)} | {v} |" for k, v in rows)


def c_inf(x: float) -> bool:
    return x == float("inf")


if __name__ == "__main__":
    sys.exit(0 if main()["guard"]["passes"] else 1)
