"""Our speech server under load as `vllm bench serve --omni` measures it (issue 43), side by side in one run.

For each model size (tiny; full: a random model with Gepard-1.0's shape), each admission rule
(`realtime`, `cap`) and each chunk schedule (`ramp`, `fixed`: vLLM-Omni's 10 then 86), a server is
started (a real second process, `--serve` below: `--max-batch 4`, vLLM-Omni's 10 / 86 frames, a
stop head that cannot fire so each request runs its whole budget) and loaded by `python -m eval
load`'s own runner at each concurrency (closed loop), one point after another. The figures are
the bench's (eval/load/metrics.py); each configuration's knee chart and folder go to --out.

    .venv/bin/python benchmarks/load_knee.py [--sizes tiny full] [--concurrency 1 2 4 8] \
        [--prompts 12] [--frames 300] [--admissions realtime cap] [--schedules ramp fixed] \
        [--device cuda --max-batch 64]    # the GPU knee: benchmarks/gpu_check.sh runs it
--quick: tiny, realtime, ramp, concurrency 1 and 2, 2 requests of 20 frames a point; a failed request fails it.
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

from eval.load.folder import run_load  # noqa: E402
from eval.load.runner import LoadConfig  # noqa: E402
from eval.runs.sets import load_set  # noqa: E402
from tests.support.processes import start_server, stop_process  # noqa: E402
from quick import add_quick  # noqa: E402


def serve(size: str, port: int, admission: str, schedule: str, device: str, max_batch: int) -> None:
    """The server side (runs until terminated)."""
    import uvicorn

    from gepard_demo.serving.server import build_speech_app
    from gepard_demo.settings import StreamSettings
    from gepard_demo.host_settings import BatchingSettings
    from tests.support.random_models import random_engine

    engine, codec = random_engine(size, device)
    sampling = engine.default_sampling().replace(stop_threshold=0.999)  # random weights: the budget ends each request
    app = build_speech_app(engine, codec, sampling, StreamSettings(chunk_schedule=schedule),
                           batching=BatchingSettings(max_batch=max_batch, admission=admission))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def start(size: str, admission: str, schedule: str, device: str, max_batch: int) -> tuple[subprocess.Popen, str]:
    return start_server(lambda port: [sys.executable, __file__, "--serve", size, str(port), admission, schedule,
                                      device, str(max_batch)], cwd=REPO)


def main() -> int:
    if len(sys.argv) == 8 and sys.argv[1] == "--serve":
        serve(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6], int(sys.argv[7]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", nargs="+", default=["tiny", "full"], choices=["tiny", "full"])
    ap.add_argument("--concurrency", nargs="+", type=int, default=[1, 2, 4, 8])
    ap.add_argument("--prompts", type=int, default=12, help="requests a point")
    ap.add_argument("--frames", type=int, default=300, help="each request's max_new_tokens (its whole length)")
    ap.add_argument("--admissions", nargs="+", default=["realtime", "cap"], choices=["realtime", "cap"])
    ap.add_argument("--schedules", nargs="+", default=["ramp", "fixed"], choices=["ramp", "fixed"])
    ap.add_argument("--out", default="runs/load-knee")
    ap.add_argument("--device", default="cpu", help="where the server's engine runs (cuda: the GPU knee, docs/PERFORMANCE.md §13)")
    ap.add_argument("--max-batch", type=int, default=4, help="the server's running batch (vLLM-Omni's Gepard deploy: 4)")
    add_quick(ap)
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.concurrency, args.prompts, args.frames = ["tiny"], [1, 2], 2, 20
        args.admissions, args.schedules = ["realtime"], ["ramp"]
    failed = 0
    texts = tuple(u.text for u in load_set("core"))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    print("| size | admission | schedule | concurrency | audio_ttfp p50 / p95 | audio_rtf p50 | underrun p50 / p95 | "
          "continuity OK | audio throughput | goodput (ttfp <= 1 s) |")
    print("| --- | --- | --- | ---: | --- | ---: | --- | ---: | ---: | ---: |")
    for size in args.sizes:
        for admission in args.admissions:
            for schedule in args.schedules:
                proc, url = start(size, admission, schedule, args.device, args.max_batch)
                try:
                    base = LoadConfig(urls=(url,), texts=texts, num_prompts=args.prompts, num_warmups=1,
                                      extra_body={"max_new_tokens": args.frames}, goodput={"audio_ttfp": 1000.0})
                    points = [dataclasses.replace(base, max_concurrency=c) for c in args.concurrency]
                    out = Path(args.out) / f"{stamp}-{size}-{admission}-{schedule}"
                    outcome = run_load(points, out, log=lambda m: print(m, file=sys.stderr))
                finally:
                    stop_process(proc)
                failed += sum(s["failed"] for s in outcome.summaries)
                for s in outcome.summaries:
                    print(f"| {size} | {admission} | {schedule} | {s['max_concurrency']} | "
                          f"{s['median_audio_ttfp_ms']:.0f} / {s['p95_audio_ttfp_ms']:.0f} ms | {s['median_audio_rtf']:.2f} | "
                          f"{s['median_audio_underrun_s']:.2f} / {s['p95_audio_underrun_s']:.2f} s | "
                          f"{s['audio_continuity_ok_rate']:.0%} | {s['audio_throughput']:.1f} s/s | "
                          f"{s['request_goodput']:.2f} req/s |", flush=True)
    # Under a full run's load a request may time out; in a quick run's two, one that fails is a fault.
    return 1 if args.quick and failed else 0


if __name__ == "__main__":
    sys.exit(main())
