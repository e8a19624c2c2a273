"""Several streams on one engine (gepard_demo.batching), measured side by side in one run.

1. tiny, 4 seeded 300-frame requests sent together to our speech server against 1 alone
   (HTTP, the real server; both warmed, median of 3 each, alternated): the wall-time ratio. Target <= 2.2x (it was 4.1x when the server
   took one request at a time).
2. The issue's protocol, tiny and the full-size random model at the CPU's picked precision:
   1, 2 and 4 streams of the same ~20 s utterance (430 frames; the stop threshold keeps random
   weights going) started 1 s apart, each a SynthesisSession on one BatchScheduler (admission
   "cap", so all of them run: what the hardware does with N at once) and one CodecPool, page
   chunking (10 then 10 frames). Per stream: time to first audio, RTF (wall / audio), and the
   gaps a player starting at the first chunk (plus --start-buffer-ms) would hear; aggregate
   frames/s against one stream; a newcomer's time to first audio against the solo request's.
   Where the ceiling is: the scheduler's measured step per frame (talker) against the codec's
   decode per frame, on the same cores. Target at full size: >= 2x aggregate frames/s at 4.
   What the "realtime" admission rule would do with the costs measured: admit or hold; and the
   rule at work on 2 streams 1 s apart: the first's RTF against solo, the second's wait.
3. Codec: 1, 2 and 4 streams' chunks of 10 and 43 frames through the full-size decoder, one
   call together (codec/batched.py) against one push per stream; and the exactness promise
   (docs/DESIGN.md): a pooled chunk against its solo push (max difference, in float and in
   16-bit LSB), and what bit-equality would cost instead (a lone chunk in a fixed batch of 4).

    .venv/bin/python benchmarks/concurrency.py [--sizes tiny full] [--frames 430] [--threads 0] [--codec-only]
--quick: tiny only, 20 frames a stream 0.2 s apart, sections 1-3 all on tiny (its codec for 3).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from gepard_demo.batching.admission import Newcomer, Running, refusal  # noqa: E402
from gepard_demo.batching.codec_pool import CodecPool  # noqa: E402
from gepard_demo.batching.scheduler import BatchScheduler  # noqa: E402
from gepard_demo.codec import build_random_codec, load_codec  # noqa: E402
from gepard_demo.codec.batched import decode_together  # noqa: E402
from gepard_demo.model.engine import GepardEngine  # noqa: E402
from gepard_demo.model.checkpoints.full_size import build_full_size_engine  # noqa: E402
from gepard_demo.model.checkpoints.tiny import ensure_tiny  # noqa: E402
from gepard_demo.serving.protocol import pcm16_array  # noqa: E402
from gepard_demo.settings import SamplingSettings, StreamSettings  # noqa: E402
from gepard_demo.host_settings import BatchingSettings  # noqa: E402
from gepard_demo.units import FRAME_RATE_HZ  # noqa: E402
from gepard_demo.speed.flags import speed_for  # noqa: E402
from gepard_demo.speed.select import apply_speed  # noqa: E402
from gepard_demo.streaming.session import SynthesisSession  # noqa: E402
from gepard_demo.streaming.seams import SessionRequest  # noqa: E402
from quick import add_quick  # noqa: E402

TEXT = ("The old lighthouse keeper climbed the narrow spiral staircase every evening, lit the great lamp, "
        "and watched the ships pass safely through the night.")
PAGE_STREAM = StreamSettings(first_chunk_frames=10, chunk_frames=10)


def gaps(chunks: list[tuple[float, float]], start_buffer_s: float) -> tuple[int, float]:
    """(gaps, silent seconds) of a player that starts start_buffer_s after the first chunk arrives
    and then plays in real time, waiting whenever the next chunk is not there yet.
    chunks: (arrival s, duration s) in order."""
    if not chunks:
        return 0, 0.0
    clock = chunks[0][0] + start_buffer_s  # when playback starts
    n, silent = 0, 0.0
    for arrival, duration in chunks:
        if arrival > clock + 1e-6:
            n, silent, clock = n + 1, silent + arrival - clock, arrival
        clock += duration
    return n, silent


def one_stream(scheduler, codec, seed: int, frames: int, out: dict, key: int, t_zero: float) -> None:
    sampling = SamplingSettings(seed=seed, max_frames=frames, stop_threshold=0.999)
    start = time.perf_counter()
    session = SynthesisSession(scheduler, codec, SessionRequest(TEXT, sampling, PAGE_STREAM, request_start=start))
    arrivals = [(c.wall_s, c.duration_s) for c in session if c.duration_s > 0]
    st = session.stats
    out[key] = {"start_s": start - t_zero, "end_s": time.perf_counter() - t_zero, "ttfa_s": st.ttfa_s,
                "rtf": st.rtf, "frames": st.frames, "chunks": arrivals}


def protocol(engine, codec, n: int, frames: int, stagger_s: float, start_buffer_s: float, admission: str = "cap") -> dict:
    """n streams started stagger_s apart on one scheduler and one codec pool."""
    scheduler = BatchScheduler(engine, BatchingSettings(max_batch=4, admission=admission))
    pool = CodecPool(codec)
    out: dict = {}
    t_zero = time.perf_counter()
    threads = []
    for k in range(n):
        th = threading.Thread(target=one_stream, args=(scheduler, pool, 100 + k, frames, out, k, t_zero))
        th.start()
        threads.append(th)
        if k < n - 1:
            time.sleep(stagger_s)
    for th in threads:
        th.join()
    costs = scheduler.costs
    scheduler.close()
    streams = []
    for k in range(n):
        s = out[k]
        g, silent = gaps(s["chunks"], start_buffer_s)
        streams.append({"ttfa_s": round(s["ttfa_s"], 3), "rtf": round(s["rtf"], 3), "gaps": g,
                        "gap_s": round(silent, 2), "frames": s["frames"]})
    span = max(s["end_s"] for s in out.values()) - min(s["start_s"] for s in out.values())
    total = sum(s["frames"] for s in out.values())
    # Mean seconds a step took at each row count (all steps of the run), per frame it made; and
    # the codec pool's decoding time per frame (its own thread, waiting excluded).
    step_per_frame = {rows: round(1000 * t / k / rows, 2) for rows, (t, k) in sorted(costs.step_totals.items())}
    return {"streams": streams, "aggregate_frames_per_s": round(total / span, 1),
            "codec_calls": dict(pool.calls), "talker_ms_per_frame_by_rows": step_per_frame,
            "codec_ms_per_frame": round(1000 * pool.busy_s / max(pool.frames, 1), 2), "costs": costs}


def admission_verdict(costs, rows: int) -> str:
    """What the realtime rule says about one more stream next to rows - 1 running ones."""
    why = refusal(BatchingSettings(max_batch=8), costs, Running(rows - 1, rows - 1, rows - 1, 10.0),
                  Newcomer(1, 40, True))
    return "admits" if why is None else f"holds: {why}"


def server_ratio(engine, codec, frames: int = 300) -> dict:
    """4 seeded requests sent together to the real speech server against 1 alone (tiny)."""
    import httpx
    import uvicorn

    from gepard_demo.serving.server import build_speech_app

    sampling = engine.default_sampling().replace(stop_threshold=0.999)
    app = build_speech_app(engine, codec, sampling, StreamSettings(first_chunk_frames=10, chunk_frames=86))
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    th = threading.Thread(target=server.run, daemon=True)
    th.start()
    while not server.started:
        time.sleep(0.05)
    url = f"http://127.0.0.1:{port}/v1/audio/speech"

    def ask(seed):
        r = httpx.post(url, json={"input": TEXT, "seed": seed, "max_new_tokens": frames, "response_format": "pcm"},
                       timeout=300)
        assert r.status_code == 200 and len(r.content) == 2 * frames * 1024, r.text[:200]

    def together(seeds):
        t0 = time.perf_counter()
        with ThreadPoolExecutor(len(seeds)) as pool:
            list(pool.map(ask, seeds))  # a failed request raises here (a plain thread's error was lost)
        return time.perf_counter() - t0

    # Warm both shapes first (a batch of 4 rows meets new tensor sizes on its first steps),
    # then the median of 3 of each, alternated, so both sides see the same machine.
    together([1])
    together([2, 3, 4, 5])
    ones, fours = [], []
    for rep in range(3):
        ones.append(together([10 + rep]))
        fours.append(together([20 + 4 * rep + i for i in range(4)]))
    one, four = float(np.median(ones)), float(np.median(fours))
    server.should_exit = True
    th.join(10)
    app.state.scheduler.close()
    return {"one_s": round(one, 2), "four_together_s": round(four, 2), "ratio": round(four / one, 2), "target": 2.2,
            "runs": {"one_s": [round(x, 2) for x in ones], "four_together_s": [round(x, 2) for x in fours]}}


def codec_section(codec, reps: int = 4) -> list[dict]:
    rng = np.random.default_rng(0)
    levels = list(codec.layout.levels_per_group) * codec.layout.num_groups

    def codes(n):
        return torch.from_numpy(np.stack([rng.integers(0, lv, size=n) for lv in levels], 1))

    rows = []
    for n in (10, 43):
        for b in (1, 2, 4):
            together, alone = [codec.streamer() for _ in range(b)], [codec.streamer() for _ in range(b)]
            decode_together(together, [codes(n) for _ in range(b)])
            for s in alone:
                s.push(codes(n))
            t0 = time.perf_counter()
            for _ in range(reps):
                decode_together(together, [codes(n) for _ in range(b)])
            tog = (time.perf_counter() - t0) / reps
            t0 = time.perf_counter()
            for _ in range(reps):
                for s in alone:
                    s.push(codes(n))
            sep = (time.perf_counter() - t0) / reps
            rows.append({"chunk_frames": n, "streams": b, "together_ms": round(1000 * tog), "one_by_one_ms": round(1000 * sep),
                         "speedup": round(sep / tog, 2)})
    return rows


def exactness_section(codec, width: int = 4, reps: int = 4) -> dict:
    """The pooled decode's promise (docs/DESIGN.md): within rounding of a solo push, not bit-equal.
    What bit-equality would cost: a stream's samples stop depending on its neighbours only if
    every push, a lone one too, runs at one fixed batch shape (here `width` rows)."""
    rng = np.random.default_rng(1)
    levels = list(codec.layout.levels_per_group) * codec.layout.num_groups

    def codes(n=10):
        return torch.from_numpy(np.stack([rng.integers(0, lv, size=n) for lv in levels], 1))

    mine = codes()

    def in_fixed_batch(neighbours):
        return decode_together([codec.streamer() for _ in range(width)], [mine] + neighbours)[0]

    solo = codec.streamer().push(mine)
    a, b = in_fixed_batch([codes() for _ in range(width - 1)]), in_fixed_batch([codes() for _ in range(width - 1)])
    timed = {}
    for name, fn in (("solo_push_ms", lambda: codec.streamer().push(mine)),
                     (f"fixed_batch_of_{width}_ms", lambda: in_fixed_batch([codes() for _ in range(width - 1)]))):
        fn()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        timed[name] = round(1000 * (time.perf_counter() - t0) / reps)
    return {"pooled_vs_solo_max_abs": float(np.abs(a - solo).max()),
            "pooled_vs_solo_max_pcm16_lsb": int(np.abs(pcm16_array(a).astype(int) - pcm16_array(solo).astype(int)).max()),
            f"fixed_batch_of_{width}_bit_equal_across_neighbours": bool(np.array_equal(a, b)), **timed,
            "fixed_shape_cost_for_a_lone_stream": round(timed[f"fixed_batch_of_{width}_ms"] / timed["solo_push_ms"], 2)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", nargs="+", default=["tiny", "full"], choices=["tiny", "full"])
    ap.add_argument("--frames", type=int, default=430, help="~20 s of audio per stream")
    ap.add_argument("--stagger-s", type=float, default=1.0)
    ap.add_argument("--start-buffer-ms", type=float, default=0.0, help="the player's start buffer for the gap count")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: the speed pick's)")
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--codec-only", action="store_true", help="only section 3 (the full-size codec), a minute")
    add_quick(ap)
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.frames, args.stagger_s = ["tiny"], 20, 0.2
    if args.codec_only:
        codec = build_random_codec(seed=0)
        print(json.dumps({"codec": codec_section(codec), "exactness": exactness_section(codec)}, indent=2))
        return 0
    cache = Path(args.cache_dir) if args.cache_dir else Path.home() / ".cache" / "gepard-demo"
    results: dict = {}
    for size in args.sizes:
        if size == "tiny":
            engine = GepardEngine.load(str(ensure_tiny(cache)))
            codec = load_codec(engine.codec_source())
        else:
            engine = build_full_size_engine(ensure_tiny(cache))  # the tiny tokenizer is enough here
            codec = build_random_codec(seed=0)
        engine = apply_speed(engine, speed_for(engine, "cpu", "auto", args.threads, "off"))
        section: dict = {"speed": engine.model_info.speed, "torch_threads": torch.get_num_threads()}
        if size == "tiny":
            section["server_4_together"] = server_ratio(engine, codec, 20 if args.quick else 300)
        protocol(engine, codec, 1, 20, 0.0, 0.0)  # warm-up
        runs = {}
        for n in (1, 2, 4):
            runs[n] = protocol(engine, codec, n, args.frames, args.stagger_s, args.start_buffer_ms / 1000)
            print(f"[{size}] {n} stream(s): {runs[n]['aggregate_frames_per_s']} frames/s", file=sys.stderr, flush=True)
        solo = runs[1]
        for n, r in runs.items():
            costs = r.pop("costs")
            r["aggregate_vs_one"] = round(r["aggregate_frames_per_s"] / solo["aggregate_frames_per_s"], 2)
            r["newcomer_ttfa_vs_solo"] = [round(s["ttfa_s"] / solo["streams"][0]["ttfa_s"], 2) for s in r["streams"][1:]]
            talker = r["talker_ms_per_frame_by_rows"].get(n) or max(r["talker_ms_per_frame_by_rows"].values())
            r["ceiling"] = ("codec" if r["codec_ms_per_frame"] > talker else "talker") + \
                f" (talker {talker} ms, codec {r['codec_ms_per_frame']} ms a frame; real time is {1000 / FRAME_RATE_HZ:.1f})"
            r["realtime_admission_of_stream_%d" % n] = admission_verdict(costs, n)
        section["streams"] = runs
        # The realtime rule with two streams 1 s apart: does the first keep its solo pace, and how
        # long does the second wait for its first audio?
        held = protocol(engine, codec, 2, args.frames, args.stagger_s, args.start_buffer_ms / 1000, "realtime")
        held.pop("costs")
        section["realtime_admission_2_streams"] = {
            "first_rtf_vs_solo": round(held["streams"][0]["rtf"] / solo["streams"][0]["rtf"], 2),
            "second_ttfa_s": held["streams"][1]["ttfa_s"], "solo_ttfa_s": solo["streams"][0]["ttfa_s"],
            "streams": held["streams"]}
        if size == "full":
            section["target_4_streams_vs_one"] = 2.0
        if size == "full" or args.quick:  # a quick run has no full size: section 3 on tiny's codec
            section["codec"] = codec_section(codec, reps=1 if args.quick else 4)
            section["exactness"] = exactness_section(codec, reps=1 if args.quick else 4)
        results[size] = section
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
