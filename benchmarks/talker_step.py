"""Talker speed, side by side in one run (CPU).

1. Per-frame cost of the whole generation loop (sampling, stop head, frame embedding, cache
   bookkeeping) against a bare backbone decode step with the same cache length, for the tiny
   model and for a full-size random model with Gepard-1.0's backbone shapes (built in memory).
   Target: the loop adds at most 15% to the bare step at full size.
2. Frames per second at batch 1, 4 and 8, on the tiny model and at full size. The batch rows
   are different texts, so the batch is left-padded (the all-full-attention mask path).
   Target: batch 8 at least 4x batch 1 on the tiny model; at full size the ratios are reported.
   The hybrid test layout (3 linear-attention + 1 full) is timed beside it: its padded steps
   keep the plain 2-D mask, and the one thing the full-attention fix added to them, the
   per-step layout check, is timed against its step.

The full-size model is `gepard_demo.model.checkpoints.full_size.build_full_size_engine`: Gepard-1.0's shape
(14 full-attention layers, hidden 1024, ...), random weights.

The stop head is forced off so every run makes exactly the frames asked for.
Run: .venv/bin/python benchmarks/talker_step.py [--frames 64] [--rounds 3] [--threads 1] [--skip-full]
--quick: tiny and tiny-hybrid only (--skip-full), 8 frames, 1 round.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from transformers import DynamicCache  # noqa: E402

from gepard_demo.model.engine import GepardEngine  # noqa: E402
from gepard_demo.model.checkpoints.full_size import build_full_size_engine  # noqa: E402
from gepard_demo.model.generation import full_attention_only  # noqa: E402
from gepard_demo.model.checkpoints.tiny import ensure_tiny  # noqa: E402
from gepard_demo.settings import SamplingSettings  # noqa: E402
from gepard_demo.model.request import FrameRequest  # noqa: E402
from quick import add_quick  # noqa: E402

TEXT = "The weather is sunny today, with a light breeze from the west."
BATCH_TEXTS = [
    TEXT,
    "Hello world, this is Gepard speaking.",
    "Please call Dr. Smith at 555-0142 before 9:30 a.m. on Monday.",
    "Open the door.",
]


def silence_stop_head(engine: GepardEngine) -> None:
    with torch.no_grad():
        engine.talker.stop_head.weight.zero_()
        engine.talker.stop_head.bias.fill_(-30.0)


def loop_step_s(engine: GepardEngine, frames: int) -> float:
    """Median seconds between consecutive steps of the real loop (prefill excluded)."""
    settings = SamplingSettings(seed=0, max_frames=frames, stop_threshold=0.5)
    times = [s.elapsed_s for s in engine.stream_frames(FrameRequest(TEXT, settings))]
    return statistics.median(b - a for a, b in zip(times, times[1:]))


def bare_step_s(engine: GepardEngine, frames: int) -> float:
    """Median seconds of a bare backbone decode step: same prompt, same cache growth."""
    talker = engine.talker
    ids = torch.tensor([engine.prompt_ids(TEXT)])
    cache = DynamicCache(config=talker.config.backbone)
    x = torch.randn(1, 1, talker.config.hidden_size)
    with torch.inference_mode():
        talker.model(inputs_embeds=talker.embed_prompt(ids), past_key_values=cache, use_cache=True)
        pos = ids.shape[1]
        steps = []
        for _ in range(frames - 1):
            t = time.perf_counter()
            out = talker.model(inputs_embeds=x, position_ids=torch.tensor([[pos]]), past_key_values=cache, use_cache=True)
            out.last_hidden_state[:, -1].sum().item()
            steps.append(time.perf_counter() - t)
            pos += 1
    return statistics.median(steps)


def frames_per_s(engine: GepardEngine, batch: int, frames: int) -> float:
    texts = [BATCH_TEXTS[i % len(BATCH_TEXTS)] for i in range(batch)]
    settings = [SamplingSettings(seed=i, max_frames=frames) for i in range(batch)]
    t = time.perf_counter()
    results = engine.generate(texts, settings)
    return sum(r.num_frames for r in results) / (time.perf_counter() - t)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=64)
    ap.add_argument("--full-frames", type=int, default=24, help="frames per run at full size")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved bare/loop rounds")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--skip-full", action="store_true", help="tiny model only (fast)")
    add_quick(ap)
    args = ap.parse_args()
    if args.quick:
        args.frames, args.rounds, args.skip_full = 8, 1, True
    torch.set_num_threads(args.threads)
    cache = Path(tempfile.gettempdir()) / "gepard-bench-cache"
    tiny = GepardEngine.load("tiny", cache_dir=cache)
    silence_stop_head(tiny)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, frames per run {args.frames}")

    hybrid = GepardEngine.load(str(ensure_tiny(cache, layout="hybrid")))
    silence_stop_head(hybrid)
    rows = [("tiny", tiny), ("tiny-hybrid", hybrid)]
    if not args.skip_full:
        t = time.perf_counter()
        full = build_full_size_engine(ensure_tiny(cache))
        silence_stop_head(full)
        print(f"built full-size random talker in {time.perf_counter() - t:.1f} s "
              f"({sum(p.numel() for p in full.talker.parameters()) / 1e6:.0f} M parameters)")
        rows.append(("full-size", full))

    print("\n| model | bare backbone step | whole loop step | loop overhead (median of rounds) | target |")
    print("| --- | ---: | ---: | ---: | --- |")
    ok = True
    for name, engine in rows:
        loop_step_s(engine, 8)  # warm-up
        # Interleaved rounds, so a burst of load on this noisy machine hits both sides alike.
        frames = args.full_frames if name == "full-size" else args.frames
        pairs = [(bare_step_s(engine, frames), loop_step_s(engine, frames)) for _ in range(args.rounds)]
        bare = statistics.median(b for b, _ in pairs)
        loop = statistics.median(lp for _, lp in pairs)
        over = statistics.median(lp / b for b, lp in pairs) - 1
        target = "<= 15%" if name == "full-size" else "(info)"
        ok &= name != "full-size" or over <= 0.15
        print(f"| {name} | {bare * 1e3:.2f} ms | {loop * 1e3:.2f} ms | {over * 100:+.1f}% | {target} |")

    print("\n| model | batch | frames/s | vs batch 1 | target |\n| --- | ---: | ---: | ---: | --- |")
    for name, engine in rows:
        frames = args.full_frames if name == "full-size" else args.frames
        frames_per_s(engine, 2, 4)  # warm-up (the padded path too)
        rates = {b: frames_per_s(engine, b, frames) for b in (1, 4, 8)}
        for b, rate in rates.items():
            target = ">= 4x" if (name, b) == ("tiny", 8) else ""
            print(f"| {name} | {b} | {rate:.1f} | {rate / rates[1]:.2f}x | {target} |")
        ok &= name != "tiny" or rates[8] / rates[1] >= 4
    check_s = timeit.timeit(lambda: full_attention_only(hybrid.talker.config.backbone), number=10000) / 10000
    step_s = 1 / frames_per_s(hybrid, 4, args.frames) * 4
    print(f"\nhybrid padded step: layout check {check_s * 1e6:.2f} us of a {step_s * 1e3:.2f} ms batch-4 step "
          f"({check_s / step_s * 100:.3f}%)")
    print("\nall targets met" if ok else "\nTARGET MISSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
