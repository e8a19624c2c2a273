"""The two decode loops side by side in one run: the growing cache (model/batch.DecodeBatch) and the
fixed-shape step (model/fixed_shape, captured as CUDA graphs on a GPU, eager on a CPU).

- ops per step: the torch profiler's aten calls per decode step at batch 1 (all of them, and the
  compute ops: leaves that are not views or wrappers), and the host reads among them
  (`_local_scalar_dense`: a `.item()`/`.tolist()`, each a sync on a GPU). On a CPU this is the
  launch overhead a GPU pays per op, visible without a GPU.
- step: the median time between consecutive frames of one stream, and frames/s of padded batches
  (1, 8, 16, 32, 64 rows on a GPU; 1 and 4 on a CPU) against one request's.
- equality: greedy frames of both loops over `frames` steps, solo and in a padded batch of 8,
  and the largest |p_stop| difference.

benchmarks/gpu_smoke.py runs `side_by_side` and `precisions` on the GPU beside its other figures (the one prepared GPU
command); run alone, this script measures a CPU at Gepard-1.0's real shape (random weights).

Run: .venv/bin/python benchmarks/decode_loops.py [--device cpu] [--frames 64] [--threads 2] [--json FILE]
--quick: the tiny checkpoint, 8 frames, batches of 1 and 2.
Measure on a quiet machine.
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

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from quick import add_quick, engine_for  # noqa: E402

from gepard_demo.model.checkpoints.tiny import ensure_tiny  # noqa: E402
from gepard_demo.model.engine import GepardEngine  # noqa: E402
from gepard_demo.model.fixed_shape.shapes import STEP_SCOPE  # noqa: E402
from gepard_demo.settings import SamplingSettings  # noqa: E402
from gepard_demo.speed.fidelity import compare, trace  # noqa: E402
from gepard_demo.model.request import FrameRequest  # noqa: E402

TEXT = "The weather is sunny today, with a light breeze from the west."
TEXTS = ["Hi.", "Good morning.", "Where is the station?", "The weather is sunny today.",
         "Please call me back after five.", "Seven thousand two hundred and six.",
         "She sells sea shells by the sea shore.", "A much longer sentence that takes a while to say out loud."]
# Calls that only describe a tensor (no kernel of their own), or wrap one that is counted.
VIEWS = {"aten::view", "aten::reshape", "aten::as_strided", "aten::expand", "aten::slice", "aten::select",
         "aten::unsqueeze", "aten::squeeze", "aten::transpose", "aten::permute", "aten::t", "aten::detach",
         "aten::alias", "aten::_unsafe_view", "aten::lift_fresh", "aten::unbind", "aten::chunk", "aten::split",
         "aten::narrow", "aten::expand_as", "aten::view_as", "aten::contiguous", "aten::to", "aten::_to_copy",
         "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::result_type", "aten::resolve_conj",
         "aten::resolve_neg", "aten::is_nonzero", "aten::numpy_T", "aten::broadcast_tensors", "aten::movedim"}
SYNC = "aten::_local_scalar_dense"


def loop_engines(engine: GepardEngine, device: str) -> dict[str, GepardEngine]:
    """The engine twice over the same talker: one per loop (graphs where the device has them)."""
    growing, fixed = copy.copy(engine), copy.copy(engine)
    growing.use_loop("off")
    fixed.use_loop("on")
    return {"growing": growing, "fixed": fixed}


def stop_head_off(engine: GepardEngine) -> None:
    with torch.no_grad():
        engine.talker.stop_head.weight.zero_()
        engine.talker.stop_head.bias.fill_(-30.0)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def ops_per_step(engine: GepardEngine, steps: int) -> dict:
    """aten calls per decode step of one stream, counted by the profiler after a warm-up."""
    frames = engine.stream_frames(FrameRequest(TEXT, SamplingSettings(seed=1, max_frames=steps + 40, temperature=0.7)))
    for _ in range(8):
        next(frames)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            next(frames)
    frames.close()
    every = prof.events()
    scopes = [e for e in every if e.name == STEP_SCOPE]
    events = [e for e in every if e.name.startswith("aten::")]
    leaves = [e for e in events if e.name not in VIEWS and not any(c.name.startswith("aten::") for c in e.cpu_children)]
    inside = [e for e in leaves if any(s.time_range.start <= e.time_range.start and e.time_range.end <= s.time_range.end
                                       and s.thread == e.thread for s in scopes)]
    return {"aten_calls": len(events) / steps, "compute_ops": len(leaves) / steps,
            "host_reads": sum(e.name == SYNC for e in events) / steps,
            # The fixed step's ops run inside one graph replay on a GPU: what the host launches is the rest.
            "launched_by_host": (len(leaves) - len(inside) + (len(scopes) if scopes else 0)) / steps}


def step_ms(engine: GepardEngine, frames: int, settings: SamplingSettings | None = None) -> float:
    """Median ms between consecutive frames of one stream."""
    settings = settings or SamplingSettings(seed=2, max_frames=frames)
    times = [s.elapsed_s for s in engine.stream_frames(FrameRequest(TEXT, settings))]
    return statistics.median(b - a for a, b in zip(times, times[1:])) * 1e3


def frames_per_s(engine: GepardEngine, device: str, rows: int, frames: int) -> float:
    texts = [TEXTS[i % len(TEXTS)] for i in range(rows)]
    sync(device)
    t0 = time.perf_counter()
    engine.generate(texts, [SamplingSettings(seed=10 + i, max_frames=frames) for i in range(rows)])
    sync(device)
    return rows * frames / (time.perf_counter() - t0)


def equality(loops: dict[str, GepardEngine], frames: int) -> dict:
    """Greedy frames of both loops, solo and in a padded batch of 8 (stop head as it is)."""
    out = {}
    greedy = SamplingSettings(greedy=True, max_frames=frames, stop_threshold=0.999999)
    for name, texts in (("solo", TEXTS[3:4]), ("batch8", TEXTS)):
        a, b = (loops[k].generate(texts, greedy) for k in ("growing", "fixed"))
        same = [bool(torch.equal(x.frames, y.frames)) for x, y in zip(a, b)]
        parted = [int((x.frames != y.frames).any(-1).nonzero()[0, 0]) for x, y, s in zip(a, b, same) if not s
                  and x.frames.shape == y.frames.shape]
        dp = max(max(abs(p - q) for p, q in zip(x.p_stop, y.p_stop)) for x, y in zip(a, b))
        out[name] = {"frames": frames, "rows_equal": f"{sum(same)}/{len(same)}", "first_parting": min(parted, default=None),
                     "max_dp_stop": dp}
    return out


def side_by_side(engine: GepardEngine, device: str, frames: int, batches: tuple[int, ...], profile_steps: int,
                 equal_frames: int | None = None) -> dict:
    """Every figure of the module docstring, both loops (timed after the equality run: it turns
    the stop head off so every timed run makes the frames asked for)."""
    loops = loop_engines(engine, device)
    out: dict = {"captures": [], "equality": equality(loops, equal_frames or frames)}
    stop_head_off(engine)  # the timed runs make exactly the frames asked for
    out["ops_per_step"] = {k: ops_per_step(e, profile_steps) for k, e in loops.items()}
    for e in loops.values():
        step_ms(e, 12)  # warm-up (and the fixed loop's first capture)
    plain = {k: step_ms(e, frames) for k, e in loops.items()}
    guided = {k: step_ms(e, frames, SamplingSettings(seed=2, max_frames=frames, cfg_scale=2.5)) for k, e in loops.items()}
    out["step_ms"] = {k: {"plain": plain[k], "guided": guided[k], "guided_ratio": guided[k] / plain[k]} for k in loops}
    rates = {k: {b: frames_per_s(e, device, b, frames) for b in batches} for k, e in loops.items()}
    out["frames_per_s"] = {k: {str(b): {"rate": r, "vs_solo": r / v[batches[0]]} for b, r in v.items()} for k, v in rates.items()}
    shapes = loops["fixed"].shapes
    out["captures"] = [c.describe() for c in shapes.captures] if shapes else []
    return out


def precisions(ref: GepardEngine, low: GepardEngine, device: str, frames: int) -> dict:
    """The fixed-shape step under graphs at fp32 with TF32 off, fp32 with TF32 on, and `low`'s
    precision: median step ms, and each against fp32 (TF32 off) teacher-forced (speed/fidelity.py);
    the pick is the fastest that passes. TF32 is a cuBLAS mode fixed when a graph is captured, so
    each gets its own capture."""
    prompt = ref.prompt_ids(TEXT)
    steps = min(frames, 200)
    tf32 = torch.backends.cuda.matmul.allow_tf32
    out = {}
    try:
        reference = None
        for name, engine, allow in (("fp32", ref, False), ("tf32", ref, True), ("low", low, False)):
            torch.backends.cuda.matmul.allow_tf32 = allow
            if reference is None:
                reference = trace(ref.talker, prompt, steps, seed=1)
            report = compare(reference, trace(engine.talker, prompt, steps, frames=reference.frames))
            graphed = loop_engines(engine, device)["fixed"]
            step_ms(graphed, 12)
            out[name] = {"dtype": str(engine.talker.backbone_dtype).removeprefix("torch."), "tf32": allow,
                         "step_ms": step_ms(graphed, frames, SamplingSettings(seed=2, max_frames=frames, stop_threshold=0.999999)),
                         "guard": report.as_dict()}
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    passing = [k for k, v in out.items() if v["guard"]["passes"]]
    out["pick"] = min(passing, key=lambda k: out[k]["step_ms"]) if passing else None
    return out


def table(o: dict) -> str:
    lines = ["| figure | growing cache | fixed-shape step |", "| --- | ---: | ---: |"]
    g, f = o["ops_per_step"]["growing"], o["ops_per_step"]["fixed"]
    lines.append(f"| aten calls / compute ops / host reads per step | {g['aten_calls']:.0f} / {g['compute_ops']:.0f} / "
                 f"{g['host_reads']:.1f} | {f['aten_calls']:.0f} / {f['compute_ops']:.0f} / {f['host_reads']:.1f} |")
    lines.append(f"| ops the host launches per step (a graph replay is one) | {g['launched_by_host']:.0f} | "
                 f"{f['launched_by_host']:.0f} |")
    sg, sf = o["step_ms"]["growing"], o["step_ms"]["fixed"]
    lines.append(f"| plain step, batch 1 | {sg['plain']:.2f} ms | {sf['plain']:.2f} ms |")
    lines.append(f"| guided step (x plain) | {sg['guided']:.2f} ms ({sg['guided_ratio']:.2f}x) | "
                 f"{sf['guided']:.2f} ms ({sf['guided_ratio']:.2f}x) |")
    for b in o["frames_per_s"]["growing"]:
        rg, rf = o["frames_per_s"]["growing"][b], o["frames_per_s"]["fixed"][b]
        lines.append(f"| batch {b}: frames/s (x one request) | {rg['rate']:.1f} ({rg['vs_solo']:.2f}x) | "
                     f"{rf['rate']:.1f} ({rf['vs_solo']:.2f}x) |")
    for k, e in o["equality"].items():
        lines.append(f"| greedy {k}, {e['frames']} frames: rows equal, first parting, max dp_stop | "
                     f"{e['rows_equal']}, {e['first_parting']}, {e['max_dp_stop']:.1e} | |")
    if o["captures"]:
        lines.append(f"| graphs captured | | {'; '.join(o['captures'])} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu")
    p.add_argument("--frames", type=int, default=64)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's own choice)")
    p.add_argument("--json", default=None)
    add_quick(p)
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    frames = 8 if args.quick else args.frames
    engine = engine_for(args.quick, ensure_tiny(Path(tempfile.gettempdir()) / "gepard-bench-cache"))
    engine.talker.to(args.device)
    batches = (1, 2) if args.quick else (1, 4)
    out = {"device": args.device, "torch": torch.__version__, "threads": torch.get_num_threads(), "model": engine.model_info.name,
           **side_by_side(engine, args.device, frames, batches, 4 if args.quick else 20)}
    print(table(out))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
