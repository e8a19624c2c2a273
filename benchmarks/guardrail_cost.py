"""What the derailment guardrail and the probe cost per decode step, side by side in one run (CPU).

At Gepard-1.0's real shape (random weights, built in memory) and batch 1 and 4, the same decode
steps are timed four ways, interleaved round by round so drift hits all alike:

- base: no repetition penalty, the onset-entropy probe stubbed out (a no-op returning zeros);
- penalty: repetition_penalty 1.3 over a 32-frame window on every row (probe stubbed);
- probe: the probe as it runs in the engine (no penalty);
- both: the engine as a guarded request runs it.

Both live in `DecodeBatch.sample()` (the heads, guidance, the penalty, sampling, the probe), so each
config's cost is measured there, where it is not drowned by the backbone's noise: the added
median sample() time over the base's, as a share of the base's whole step (sample + advance).
The whole-step medians are printed beside it. Targets (issue 33): a 32-frame window at most 5% of
a step; the probe at most 3%.

Run: .venv/bin/python benchmarks/guardrail_cost.py [--steps 48] [--rounds 5] [--threads 2] [--precision fp32|fp16w]
Measure on a quiet machine.
--quick: the tiny talker, 4 steps, 1 round.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gepard_demo.model.batch as batch_module  # noqa: E402
from gepard_demo.speed.select import detect_hardware  # noqa: E402
from gepard_demo.model.batch import BatchRequest, DecodeBatch  # noqa: E402
from gepard_demo.model.checkpoints.tiny import ensure_tiny  # noqa: E402
from gepard_demo.settings import SamplingSettings  # noqa: E402
from quick import add_quick, engine_for  # noqa: E402

TEXTS = [
    "The weather is sunny today, with a light breeze from the west.",
    "Hello world, this is Gepard speaking.",
    "Please call Dr. Smith at 555-0142 before 9:30 a.m. on Monday.",
    "Open the door.",
]
REAL_BELIEF = batch_module.belief


def _stub_belief(logits, codes):
    n = logits.shape[0]
    return torch.zeros(n), torch.zeros(n)


def run(engine, rows: int, config: str, steps: int, warm: int = 8) -> tuple[float, float]:
    """Median (sample() s, whole step s) over `steps` steps after `warm`."""
    batch_module.belief = REAL_BELIEF if config in ("probe", "both") else _stub_belief
    penalty = 1.3 if config in ("penalty", "both") else 1.0
    settings = SamplingSettings(seed=1, max_frames=warm + steps + 1, stop_threshold=0.999, temperature=0.7,
                                repetition_penalty=penalty, repetition_window=32)
    batch = DecodeBatch(engine.talker)
    batch.admit([BatchRequest(engine.prompt_ids(t), engine.sampler(t, settings)) for t in TEXTS[:rows]])
    samples, totals = [], []
    try:
        for k in range(warm + steps):
            t0 = time.perf_counter()
            batch.sample()
            t1 = time.perf_counter()
            batch.advance()
            t2 = time.perf_counter()
            if k >= warm:
                samples.append(t1 - t0)
                totals.append(t2 - t0)
    finally:
        batch_module.belief = REAL_BELIEF
    return statistics.median(samples), statistics.median(totals)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=48)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", choices=("fp32", "fp16w"), default="fp32")
    add_quick(ap)
    args = ap.parse_args()
    if args.quick:
        args.steps, args.rounds = 4, 1
    torch.set_num_threads(args.threads)
    engine = engine_for(args.quick, ensure_tiny(Path(tempfile.gettempdir()) / "gepard-bench-cache"))
    if args.precision != "fp32":
        from gepard_demo.speed.flags import speed_for
        from gepard_demo.speed.select import apply_speed

        engine = apply_speed(engine, speed_for(engine, "cpu", args.precision, args.threads, "off"))
    with torch.no_grad():  # the stop head never fires: every run makes the steps asked for
        engine.talker.stop_head.bias.fill_(-30.0)
    configs = ("base", "penalty", "probe", "both")
    print(f"{'tiny' if args.quick else 'full size'}, {args.precision}, {args.threads} threads, "
          f"{args.steps} steps x {args.rounds} rounds; "
          f"CPU flags: {' '.join(detect_hardware('cpu').cpu_flags)}")
    print(f"{'batch':>5} {'config':>8} {'sample ms':>10} {'step ms':>9} {'added ms':>9} {'share of a step':>16}")
    for rows in (1, 4):
        got = {c: ([], []) for c in configs}
        for _ in range(args.rounds):
            for c in configs:  # interleaved: each round times every config once
                s, t = run(engine, rows, c, args.steps)
                got[c][0].append(s)
                got[c][1].append(t)
        med = {c: (statistics.median(got[c][0]), statistics.median(got[c][1])) for c in configs}
        base_sample, base_step = med["base"]
        for c in configs:
            s, t = med[c]
            added = s - base_sample
            share = "" if c == "base" else f"{100 * added / base_step:+.2f}%"
            print(f"{rows:>5} {c:>8} {1000 * s:>10.3f} {1000 * t:>9.2f} {1000 * added:>9.3f} {share:>16}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
