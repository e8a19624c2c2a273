"""Cost of a stop-threshold sweep: brute force against one-pass, same grid, same run.

Brute force (what `eval sweep` did before): every grid point is its own run (generate,
decode, write) and is transcribed on its own. One-pass (`eval sweep`, default): one
generation per utterance per temperature at the highest threshold serves every threshold,
each distinct prefix is decoded once and each distinct audio transcribed once.
Both use batch size 1 (solo generation), so the rows must be identical; the script checks it.
The speed-up approaches the number of thresholds when generation dominates (long runaways).

    flock /tmp/gepard-heavy.lock python benchmarks/sweep_cost.py [--utts 4] [--max-frames 200] \
        [--thresholds 0.3 0.5 0.7] [--temperature 0.3] [--no-asr] [--full-size]
--quick: tiny, 2 utterances of at most 20 frames (ASR on).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from eval.engines.local import GepardLocal  # noqa: E402
from eval.runs.run import RunConfig, run  # noqa: E402
from eval.runs.score import score  # noqa: E402
from eval.scoring.asr import ASRSettings, Transcriber  # noqa: E402
from eval.sweeps.grid import SweepConfig, point_dir  # noqa: E402
from eval.sweeps.sweep import sweep  # noqa: E402
from gepard_demo.settings import SamplingSettings  # noqa: E402
from quick import add_quick  # noqa: E402


def rows(d: Path) -> list[dict]:
    keep = ("id", "frames", "stop_fired", "stop_frame", "runaway", "p_stop", "seed")
    return [{k: r[k] for k in keep} for r in map(json.loads, (d / "rows.jsonl").read_text().splitlines())]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--utts", type=int, default=4)
    ap.add_argument("--max-frames", type=int, default=200)
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.3, 0.5, 0.7])
    ap.add_argument("--temperature", type=float, default=0.3)
    ap.add_argument("--no-asr", action="store_true")
    ap.add_argument("--full-size", action="store_true",
                    help="a random talker with Gepard-1.0's real shape (0.5B) instead of tiny: generation then "
                         "costs what it does for the real model")
    ap.add_argument("--out", default="runs/bench-sweep")
    ap.add_argument("--model-cache", default=None)
    add_quick(ap)
    args = ap.parse_args()
    if args.quick:
        args.utts, args.max_frames, args.full_size = 2, 20, False
    torch.set_num_threads(1)
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    local = GepardLocal.load("tiny", cache_dir=args.model_cache)
    if args.full_size:
        from gepard_demo.model.checkpoints.full_size import build_full_size_engine

        local = GepardLocal(build_full_size_engine(Path(local.engine.model_info.path)), local.codec)
    asr = None if args.no_asr else ASRSettings()
    transcriber = Transcriber(asr) if asr else None  # loaded once, shared: only the work is timed
    base = RunConfig(set="smoke", limit=args.utts, batch_size=1, model_cache=args.model_cache,
                     sampling=SamplingSettings(max_frames=args.max_frames))
    quiet = lambda m: None  # noqa: E731

    t0 = time.perf_counter()
    for s in args.thresholds:
        cfg = dataclasses.replace(base, sampling=base.sampling.replace(temperature=args.temperature, stop_threshold=s))
        d = point_dir(out / "brute", temperature=args.temperature, stop_threshold=s)
        run(cfg, d, engine=local, log=quiet)
        if asr:
            score(d, asr, transcriber=transcriber, log=quiet)
    brute_s = time.perf_counter() - t0
    brute_audio_s = sum(r["duration_s"] for s in args.thresholds
                        for r in map(json.loads, (point_dir(out / "brute", temperature=args.temperature, stop_threshold=s) / "rows.jsonl").read_text().splitlines()))

    t0 = time.perf_counter()
    sc = SweepConfig(base=base, swept=(("temperature", (args.temperature,)), ("stop_threshold", tuple(args.thresholds))))
    sweep(sc, out / "one-pass", asr=asr, engine=local, transcriber=transcriber, log=quiet)
    one_total_s = time.perf_counter() - t0
    info = json.loads((out / "one-pass" / "sweep.json").read_text())["last_call"]
    one_s = info["synthesis_s"] + info.get("asr_s", 0.0)  # the same work as brute force (reports and charts apart)

    same = all(rows(point_dir(out / "brute", temperature=args.temperature, stop_threshold=s)) == rows(point_dir(out / "one-pass", temperature=args.temperature, stop_threshold=s))
               for s in args.thresholds)
    n = len(args.thresholds)
    print(f"model: {local.engine.model_info.name}; grid: temperature {args.temperature}, thresholds {args.thresholds}, {args.utts} utterances, "
          f"max_frames {args.max_frames}, ASR {'faster-whisper tiny.en' if asr else 'off'}")
    print(f"brute force: {brute_s:.1f} s synthesis + ASR ({n * args.utts} generations, {brute_audio_s:.0f} s of audio "
          f"made and transcribed)")
    print(f"one-pass:    {one_s:.1f} s synthesis + ASR ({info['sources_generated']} generations, {info['decodes']} decodes, "
          f"{info.get('asr_transcribed', 0)} transcriptions, {info.get('asr_cache_hits', 0)} cache hits); "
          f"{one_total_s:.1f} s with the sweep's reports and charts")
    print(f"speed-up one-pass / brute force (synthesis + ASR): {brute_s / one_s:.2f}x (number of thresholds: {n})")
    print(f"rows identical (frames, stop, runaway, p_stop): {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
