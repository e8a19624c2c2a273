"""Text that streams in (issue 42): the speech WebSocket against REST, side by side in one run.

A server (a real second process: `--serve SIZE PORT` below, our speech server on the tiny model or
on a full-size random model with Gepard-1.0's shape) is fed a paragraph word by word at a set rate
(words per second) over `/v1/audio/speech/stream` (sentence splitting, stream_audio, PCM).
Per sentence: its wait, from when its last word was sent to its first audio byte; against it,
the REST time to first audio of the same sentence and seed (`POST /v1/audio/speech`, raw stream,
request sent -> first byte), measured alone on the same server. And the gaps a player would hear:
it starts at the first byte and plays each frame's samples in real time; a gap is where the next
samples had not arrived when the previous ran out (counted after the start).

Target: p50 of the wait <= REST TTFA p50 + 50 ms when the text comes at least as fast as speech.
Random weights never stop by themselves: each unit is held to --frames frames (--frames 40:
1.9 s of audio per sentence), a speaking rate of about 3-4 words a second for these sentences.

    .venv/bin/python benchmarks/speech_stream.py [--sizes tiny full] [--rates 3 10 50] [--frames 40]
--quick: tiny, 50 words a second, 10 frames a sentence.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

import httpx  # noqa: E402

from gepard_demo.serving.stream_client import StreamingSpeech  # noqa: E402
from gepard_demo.streaming.segments import segment_seed  # noqa: E402
from gepard_demo.units import SAMPLE_RATE  # noqa: E402
from tests.support.processes import start_server, stop_process  # noqa: E402
from quick import add_quick  # noqa: E402

PARAGRAPH = ("The river was quiet this morning. A heron stood in the shallows and watched the water. "
             "Two boats drifted past without a sound. Somewhere upstream a dog was barking at the geese. "
             "By noon the wind had turned and the clouds came in low. Everyone on the bank went home early.")
SEED = 11


def serve(size: str, port: int) -> None:
    """The server side: our speech server on `size` (runs until terminated)."""
    import uvicorn

    from gepard_demo.serving.server import build_speech_app
    from gepard_demo.settings import StreamSettings
    from gepard_demo.host_settings import BatchingSettings
    from tests.support.random_models import random_engine

    engine, codec = random_engine(size)
    sampling = engine.default_sampling().replace(stop_threshold=0.999)  # random weights: the budget ends each unit
    app = build_speech_app(engine, codec, sampling, StreamSettings(first_chunk_frames=10, chunk_frames=10),
                           batching=BatchingSettings(max_batch=4))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def start(size: str) -> tuple[subprocess.Popen, str]:
    return start_server(lambda port: [sys.executable, __file__, "--serve", size, str(port)], cwd=REPO)


def rest_ttfa(url: str, text: str, seed: int, frames: int) -> float:
    """REST: request sent -> first audio byte of a raw stream."""
    body = {"input": text, "response_format": "pcm", "stream": True, "stream_format": "audio", "seed": seed,
            "max_new_tokens": frames}
    t0 = time.perf_counter()
    first = None
    with httpx.stream("POST", url + "/v1/audio/speech", json=body, timeout=300) as r:
        for chunk in r.iter_bytes():
            if chunk and first is None:
                first = time.perf_counter() - t0
    if first is None:
        raise RuntimeError("no audio")
    return first


async def fed(url: str, rate_wps: float, frames: int) -> dict:
    """The paragraph word by word at rate_wps; per unit its wait, and the player's gaps."""
    words = PARAGRAPH.split(" ")
    arrivals: list[tuple[float, int]] = []  # (when, samples) of every audio frame, in order
    waits: list[float] = []
    async with StreamingSpeech(url, seed=SEED, max_new_tokens=frames) as speech:

        async def feed():
            for i, w in enumerate(words):
                await speech.send(w if i == 0 else " " + w)
                await asyncio.sleep(1 / rate_wps)
            await speech.finish()

        feeding = asyncio.create_task(feed())
        async for unit in speech.units(on_audio=lambda n: arrivals.append((time.perf_counter(), n))):
            waits.append(unit.wait_s)
        await feeding
    clock, gaps, gap_s = None, 0, 0.0
    for when, samples in arrivals:
        if clock is None:
            clock = when
        elif when > clock + 1e-3:
            gaps, gap_s, clock = gaps + 1, gap_s + (when - clock), when
        clock += samples / SAMPLE_RATE
    return {"waits": waits, "gaps": gaps, "gap_s": round(gap_s, 3)}


def measure(size: str, rates: list[float], frames: int) -> dict:
    proc, url = start(size)
    try:
        sentences = [s.strip() + "." for s in PARAGRAPH.split(".") if s.strip()]
        asyncio.run(fed(url, 100.0, frames))  # warm-up
        rest = [rest_ttfa(url, s, segment_seed(SEED, k), frames) for k, s in enumerate(sentences)]
        out = {"rest_ttfa_ms": _pcts(rest)}
        for rate in rates:
            r = asyncio.run(fed(url, rate, frames))
            out[f"{rate:g} words/s"] = {"wait_ms": _pcts(r["waits"]), "gaps_after_start": r["gaps"],
                                        "gap_s": r["gap_s"]}
            print(f"[{size}] {rate:g} words/s: {out[f'{rate:g} words/s']}", file=sys.stderr, flush=True)
        return out
    finally:
        stop_process(proc)


def _pcts(values: list[float]) -> dict:
    ms = sorted(1000 * v for v in values)
    return {"p50": round(statistics.median(ms)), "p95": round(ms[min(len(ms) - 1, int(0.95 * len(ms)))]),
            "n": len(ms)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", nargs=2, metavar=("SIZE", "PORT"), help=argparse.SUPPRESS)
    ap.add_argument("--sizes", nargs="+", default=["tiny", "full"], choices=["tiny", "full"])
    ap.add_argument("--rates", nargs="+", type=float, default=[3.0, 10.0, 50.0])
    ap.add_argument("--frames", type=int, default=40)
    add_quick(ap)
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.rates, args.frames = ["tiny"], [50.0], 10
    if args.serve:
        serve(args.serve[0], int(args.serve[1]))
        return 0
    results = {size: measure(size, args.rates, args.frames) for size in args.sizes}
    for size, r in results.items():
        base = r["rest_ttfa_ms"]["p50"]
        for key, v in r.items():
            if key != "rest_ttfa_ms":
                v["target"] = "met" if v["wait_ms"]["p50"] <= base + 50 else f"missed (REST p50 {base} ms + 50)"
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
