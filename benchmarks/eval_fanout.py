"""Served eval throughput: one run of the same utterances and seeds against 1, 2 and 4 of our
speech servers (`python -m gepard_demo serve --model tiny`, one process each, one torch
thread each), side by side in one run. Prints utterances per minute and the ratio to one
server, and checks that every pool made the same audio as the single server.

    python benchmarks/eval_fanout.py [--utts 8] [--max-frames 40] [--concurrency 1] [--rounds 2] [--out runs/bench-fanout]

On a machine with C cores, servers past C share cores: the ratio shows where scaling stops.
--quick: 1 and 2 servers, 2 utterances of 8 frames, one timed run a pool.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

import numpy as np  # noqa: E402
import soundfile as sf  # noqa: E402

from eval.engines.request import SynthesisItem  # noqa: E402
from eval.engines.served import load_server_engine  # noqa: E402
from eval.runs.run import RunConfig, run  # noqa: E402
from gepard_demo.settings import SamplingSettings  # noqa: E402
from tests.support.processes import spawn, stop_process  # noqa: E402
from quick import add_quick  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(cache: str | None) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [sys.executable, "-m", "gepard_demo", "serve", "--model", "tiny", "--port", str(port), "--log-level", "warning"]
    if cache:
        cmd += ["--cache-dir", cache]
    proc = spawn(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, f"http://127.0.0.1:{port}"


def wait_ready(url: str, timeout: float = 120.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/v1/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise TimeoutError(f"{url} did not start")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--utts", type=int, default=8)
    ap.add_argument("--max-frames", type=int, default=40)
    ap.add_argument("--concurrency", type=int, default=1, help="requests in flight per server")
    ap.add_argument("--rounds", type=int, default=2, help="timed runs per pool (alternating order)")
    ap.add_argument("--out", default="runs/bench-fanout")
    ap.add_argument("--model-cache", default=os.environ.get("GEPARD_CACHE_DIR"))
    add_quick(ap)
    args = ap.parse_args()
    pools = (1, 2) if args.quick else (1, 2, 4)
    if args.quick:
        args.utts, args.max_frames, args.rounds = 2, 8, 1
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    started = [start_server(args.model_cache) for _ in range(max(pools))]
    try:
        for _, url in started:
            wait_ready(url)
        urls = [u for _, u in started]
        sampling = SamplingSettings(max_frames=args.max_frames)
        # warm every server once (first-call setup is not throughput)
        warm = load_server_engine(urls, "tiny", concurrency=1, log=lambda m: None)
        list(warm.synthesize_each([SynthesisItem("Warm up.", i) for i in range(len(urls))], SamplingSettings(max_frames=4),
                                  RunConfig().stream))
        results: dict = {"utts": args.utts, "max_frames": args.max_frames, "concurrency": args.concurrency,
                         "rounds": args.rounds, "cpu_count": os.cpu_count()}
        def timed_run(n: int, folder: Path, limit: int = args.utts) -> float:
            cfg = RunConfig(engine="server", model="tiny", set="core", limit=limit, sampling=sampling,
                            batch_size=1, server_urls=tuple(urls[:n]), server_concurrency=args.concurrency)
            shutil.rmtree(folder, ignore_errors=True)
            t0 = time.perf_counter()
            run(cfg, folder, log=lambda m: None)
            return time.perf_counter() - t0

        # The first eval run in a process pays one-time client costs (imports, the set, the
        # writers; it was ~8 s while the text rules imported transformers); a throwaway run
        # takes them first, so the 1-server pool is not charged for them.
        timed_run(1, out / "warm-up", limit=2)
        # Rounds in order 1-2-4 then 4-2-1, the median per pool, so drift hits every pool alike
        # (a quick run: one round, in order).
        rounds: dict[int, list[float]] = {n: [] for n in pools}
        for order in [pools] if args.quick else [pools, pools[::-1]] * max(1, args.rounds // 2):
            for n in order:
                rounds[n].append(timed_run(n, out / f"servers{n}"))
        times = {n: statistics.median(ts) for n, ts in rounds.items()}
        same = True
        for n in pools[1:]:
            for row in (out / "servers1" / "rows.jsonl").read_text().splitlines():
                wav = json.loads(row)["wav"]
                same &= bool(np.array_equal(sf.read(out / "servers1" / wav, dtype="int16")[0],
                                            sf.read(out / f"servers{n}" / wav, dtype="int16")[0]))
        for n in pools:
            results[f"servers{n}"] = {"wall_s": round(times[n], 2), "utt_per_min": round(60 * args.utts / times[n], 1),
                                      "speedup_vs_1": round(times[1] / times[n], 2)}
        results["same_audio_as_1_server"] = same
        print(json.dumps(results, indent=2))
        return 0 if same else 1
    finally:
        for proc, _ in started:
            stop_process(proc)


if __name__ == "__main__":
    sys.exit(main())
