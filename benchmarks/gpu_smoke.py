"""GPU smoke test: everything a GPU Space depends on, in one run on one device, offline, on a talker
with Gepard-1.0's real shapes and random weights (gepard_demo/model/checkpoints/full_size.py) and a full-size
random NanoCodec. One table, then the loops' (benchmarks/gpu_check.sh is the device command):

- pick: the device, its compute capability and the precision the speed layer picks for it
  (bf16 from 8.0, fp16 below; on a CPU this script runs bf16, what an Ampere-or-later GPU runs).
- guard: the picked precision against fp32 on the same device, teacher-forced (speed/fidelity.py):
  mean per-head KL (nats) and max |p_stop - p_stop fp32| over the steps; bounds 0.01 and 0.01.
- codec SNR: the device's exact decode of random codes against the CPU's fp32 one (dB; TF32 is
  off for the codec's convolutions, codec/hifigan.exact_gpu_convolutions).
- precisions: the fixed-shape step under CUDA graphs at fp32 (TF32 off), fp32 with TF32 and the
  picked precision: step ms and each one's guard against fp32; the fastest that passes.
- equality: greedy frames of the growing loop (eager) and the graphed step over 430 frames, solo
  and in a padded batch of 8, at fp32 and at the picked precision, and their largest |dp_stop|.
- loops (benchmarks/decode_loops.py, side by side): ops per step (the profiler's, and what the host
  launches), the plain and the guided step at batch 1, padded batches of 1, 8, 16, 32 and 64
  different texts against one request's frames/s, the graphs captured (time, memory).
- stream: RTF (wall / audio) and time to first audio of a 430-frame (20 s) SynthesisSession at
  batch 1 with the page's chunks (10 then 10 frames, exact), each loop after a short warm-up stream;
  the fixed loop's with the codec's chunks graphed too (codec/graphed.py), and each one's codec seconds.
- memory: peak GPU memory above the weights at 1 x 1000 and 16 x 300 frames, beside the estimate
  the engine refuses batches with (model/memory.py); a CPU reports the estimate only.

The stop head is forced off for the timed runs (random weights would stop anywhere), so every
run makes exactly the frames asked for; the guard uses the untouched weights.

Run: .venv/bin/python benchmarks/gpu_smoke.py [--device cuda|cpu] [--quick] [--json FILE]
--quick: the tiny checkpoint, a tenth of the frames, batches of 1 and 2 (what the suite runs on a CPU).
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

from decode_loops import equality, loop_engines, precisions, side_by_side  # noqa: E402
from decode_loops import table as loops_table  # noqa: E402
from quick import add_quick  # noqa: E402

from gepard_demo.codec import build_random_codec, load_codec  # noqa: E402
from gepard_demo.model.engine import GepardEngine  # noqa: E402
from gepard_demo.model.checkpoints.full_size import build_full_size_engine  # noqa: E402
from gepard_demo.model.memory import batch_bytes  # noqa: E402
from gepard_demo.model.checkpoints.tiny import ensure_tiny  # noqa: E402
from gepard_demo.settings import SamplingSettings, StreamSettings  # noqa: E402
from gepard_demo.speed.fidelity import MAX_DP_STOP, MAX_MEAN_KL, compare, snr_db, trace  # noqa: E402
from gepard_demo.speed.quantize import BACKBONE_DTYPES  # noqa: E402
from gepard_demo.speed.select import detect_hardware, precision_for  # noqa: E402
from gepard_demo.streaming.session import SynthesisSession  # noqa: E402
from gepard_demo.streaming.seams import SessionRequest  # noqa: E402

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

    def save() -> None:  # after each section: a run cut short keeps what it measured
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=2))

    steps = 200 // scale
    prompt = ref.prompt_ids(TEXT)
    reference = trace(ref.talker, prompt, steps, seed=1)
    rep = compare(reference, trace(low.talker, prompt, steps, frames=reference.frames))
    out["guard"] = {**rep.as_dict(), "bounds": [MAX_MEAN_KL, MAX_DP_STOP]}
    save()

    codes = np.random.default_rng(7).integers(0, 6, size=(200 // scale, 32))
    out["codec_snr_db"] = snr_db(codec_cpu.decode(codes), codec_dev.decode(codes))
    save()

    # The growing cache (eager) and the fixed-shape step (CUDA graphs) side by side: precisions
    # under graphs and the equality of both loops first, on the untouched stop head.
    out["precisions"] = precisions(ref, low, device, 200 // scale)
    save()
    out["equality_fp32"] = equality(loop_engines(ref, device), 430 // scale)
    save()
    batches = (1, 2) if args.quick else (1, 8, 16, 32, 64)
    out["loops"] = side_by_side(low, device, 200 // scale, batches, 20 // scale, equal_frames=430 // scale)
    save()

    stop_head_off(low)
    frames = 430 // scale
    out["stream"] = {}
    for name, engine in loop_engines(low, device).items():
        codec_dev.use_chunk_graphs(name == "fixed")  # the codec's chunks graphed with the step (codec/graphed.py)
        SynthesisSession(
            engine, codec_dev, SessionRequest("Warm up.", SamplingSettings(seed=0, max_frames=12), PAGE_STREAM)
        ).run()
        session = SynthesisSession(
            engine, codec_dev, SessionRequest(TEXT, SamplingSettings(seed=1, max_frames=frames), PAGE_STREAM)
        )
        session.run()
        st = session.stats
        graphs = codec_dev.chunk_graphs
        out["stream"][name] = {"frames": st.frames, "rtf": st.rtf, "ttfa_s": st.ttfa_s, "wall_s": st.wall_s,
                               "codec_s": st.decode_time_s,
                               "codec_captures": [c.describe() for c in graphs.captures] if graphs else []}
        save()
    codec_dev.use_chunk_graphs(False)

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
    g, s = o["guard"], o["stream"]

    def gib(x):
        return "n/a (CPU)" if x is None else f"{x / GIB:.2f} GiB"

    rows = [
        ("device / pick", f"{o['device']} -> {o['precision']} backbone, fp32 heads (torch {o['torch']}, "
                          f"CUDA build {o['cuda_build']})"),
        ("model", o["model"]),
        ("guard vs fp32: mean KL / max dp_stop", f"{g['mean_kl']:.2e} / {g['max_dp_stop']:.2e} over {g['steps']} steps: "
                                                   + ("PASS" if g["passes"] else "FAIL") + f" (bounds {g['bounds'][0]} / {g['bounds'][1]})"),
        ("codec SNR, device vs CPU", "identical" if c_inf(o["codec_snr_db"]) else f"{o['codec_snr_db']:.1f} dB"),
    ]
    for name, st in s.items():
        rows.append((f"stream of {st['frames']} frames, {name}: RTF / time to first audio / codec",
                     f"{st['rtf']:.3f} / {st['ttfa_s'] * 1e3:.0f} ms / {st['codec_s']:.2f} s"))
    for name, p in o["precisions"].items():
        if name != "pick":
            rows.append((f"graphed step at {p['dtype']}{' (TF32)' if p['tf32'] else ''}: ms / guard",
                         f"{p['step_ms']:.2f} ms / max dp_stop {p['guard']['max_dp_stop']:.1e}, "
                         + ("PASS" if p["guard"]["passes"] else "FAIL")))
    rows.append(("fastest precision that passes, graphed", str(o["precisions"]["pick"])))
    for k, e in o["equality_fp32"].items():
        rows.append((f"fp32 greedy {k}, {e['frames']} frames: rows equal / max dp_stop", f"{e['rows_equal']} / {e['max_dp_stop']:.1e}"))
    for key, m in o["memory"].items():
        rows.append((f"memory above weights, {key} frames: peak / estimate", f"{gib(m['peak_bytes'])} / {gib(m['estimate_bytes'])}"))
    rows.append(("wall time of this script", f"{o['wall_s']:.0f} s"))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"| {k.ljust(width)} | {v} |" for k, v in rows) + "\n\n" + loops_table(o["loops"])


def c_inf(x: float) -> bool:
    return x == float("inf")


if __name__ == "__main__":
    sys.exit(0 if main()["guard"]["passes"] else 1)
