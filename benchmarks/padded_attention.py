"""A padded batch's decode step with transformers' SDPA against model/attention.py's, side by side.

Full-size random model at the CPU's speed pick, 4 rows. "padded": 4 texts of different lengths
(what a running batch always is: rows joined at different times), so every step carries a mask;
"same": 4 copies of one text (no padding, no mask: both functions are the same code there).
Interleaved rounds, median step time of each; the ratio is what the grouped-query path saves.

    .venv/bin/python benchmarks/padded_attention.py [--frames 200] [--rounds 2]   # ~3 min
--quick: the tiny talker, 8 frames, 1 round.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gepard_demo.model.attention import NAME  # noqa: E402
from gepard_demo.model.checkpoints.tiny import ensure_tiny  # noqa: E402
from gepard_demo.settings import SamplingSettings  # noqa: E402
from gepard_demo.speed.flags import speed_for  # noqa: E402
from gepard_demo.speed.select import apply_speed  # noqa: E402
from quick import add_quick, engine_for  # noqa: E402

SAME = ["The old lighthouse keeper climbed the narrow stairs."] * 4
PADDED = ["Hi.", "The old lighthouse keeper.", "The old lighthouse keeper climbed the narrow stairs.",
          "The old lighthouse keeper climbed the narrow spiral staircase every evening and lit the great lamp."]


def step_ms(engine, texts, frames: int) -> float:
    sampling = SamplingSettings(seed=1, max_frames=frames, stop_threshold=0.999)
    t0 = time.perf_counter()
    results = engine.generate(texts, [sampling] * len(texts))
    wall = time.perf_counter() - t0
    return 1000 * (wall - results[0].first_frame_s) / (frames - 1)  # decode steps only, prefill excluded


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=200, help="the copy it saves grows with the cache")
    ap.add_argument("--rounds", type=int, default=2)
    add_quick(ap)
    args = ap.parse_args()
    if args.quick:
        args.frames, args.rounds = 8, 1
    engine = engine_for(args.quick, ensure_tiny(Path.home() / ".cache" / "gepard-demo"))
    engine = apply_speed(engine, speed_for(engine, "cpu", "auto", 0, "off"))
    config = engine.talker.model.config  # the layers look the function up by this name at every call
    times: dict[str, list[float]] = {}
    step_ms(engine, PADDED, 4)  # warm-up
    for _ in range(args.rounds):
        for impl in ("sdpa", NAME):
            config._attn_implementation = impl
            for name, texts in (("padded", PADDED), ("same", SAME)):
                times.setdefault(f"{name} {impl}", []).append(step_ms(engine, texts, args.frames))
    config._attn_implementation = NAME
    med = {k: round(statistics.median(v), 1) for k, v in times.items()}
    out = {"speed": engine.model_info.speed, "rows": 4, "frames": args.frames, "step_ms_median": med,
           "padded_sdpa_vs_ours": round(med["padded sdpa"] / med[f"padded {NAME}"], 2),
           "padded_vs_same_ours": round(med[f"padded {NAME}"] / med[f"same {NAME}"], 2),
           "padded_vs_same_sdpa": round(med["padded sdpa"] / med["same sdpa"], 2)}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
