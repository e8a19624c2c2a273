"""Click-to-first-sound and playback gaps of the streaming demo, in headless Chromium.

One run: start the real app (PCM route + Gradio page) on a free port in this process, open it
in Debian's Chromium through Playwright, click Generate once to warm the page and the engine
up, then click again and measure:

  click_to_sound_ms  click -> first sample at the audio output (player's own stats: the
                     worklet's frame clock mapped through AudioContext.getOutputTimestamp,
                     so it includes the output latency the browser reports)
  engine_ttfa_ms     the same request's server-side time to first audio (handler start ->
                     first chunk's samples ready: prefill, first_chunk_frames decode steps,
                     codec), from SynthesisSession.stats
  overhead_ms        click_to_sound - engine_ttfa: page, queue, HTTP and player cost
  underruns / gap_ms gaps heard in the middle of the utterance
  rtf                server wall time / speech seconds (< 1: generated faster than real time)

  start_wait_s       first bytes -> first sample played (output latency excluded): the player's
                     automatic start buffer, against smallest_gapless_wait_s, the least wait that
                     would have played this run's arrivals without a gap

Targets (issue 4): overhead <= 300 ms; zero underruns for an utterance made faster than
real time. Issue 10, with the real-shape model on 2 CPU threads: click-to-sound <= 600 ms and
zero gaps over a 20-second utterance (--full-size --max-frames 430). The engine runs the speed
path the app picks on this machine (printed; `--precision`, `--threads`, `--pipeline` override).
Issue 21: with --full-size (slower than real time here) 0 gaps and a start wait within 25% of
the smallest gapless one. Writes artifacts/demo_latency.json.

    .venv/bin/python benchmarks/demo_latency.py [--model tiny | --full-size] [--max-frames 200]
        [--precision auto|fp32|fp16w|int8|bf16] [--pipeline auto|on|off]
--quick: tiny, 30 frames a click (never --full-size).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from tests.support.app_fixtures import CHROMIUM, CHROMIUM_ARGS  # noqa: E402  (the browser tests' Chromium and its flags)
from gepard_demo.speed.flags import add_speed_flags  # noqa: E402
from quick import add_quick  # noqa: E402
TARGET_OVERHEAD_MS = 300.0
TARGET_CLICK_TO_SOUND_MS = 600.0  # issue 10, real-shape model on 2 CPU threads

WAIT_DONE = """(jobId) => {
  const p = window.gepardPlayer;
  const s = p.history.find((h) => h.jobId === jobId);
  return s && ['ended', 'stopped', 'failed', 'error'].includes(s.state) ? s : null;
}"""


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="tiny")
    p.add_argument("--full-size", action="store_true",
                   help="instead of --model: a random model with Gepard-1.0's full backbone and a full-size "
                        "random NanoCodec, in memory (real per-frame cost; its stop head is silenced)")
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--text", default=None, help="default: a 15-word sentence; with --full-size a 52-word text, "
                   "whose expected length (0.7 + 0.4 s a word: 21.5 s) is about what 430 frames make (20 s)")
    p.add_argument("--max-frames", type=int, default=200, help="frames to generate (tiny never stops on its own)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--chromium", default=CHROMIUM)
    add_speed_flags(p)  # --precision / --threads / --pipeline: the app's own pick unless given
    p.add_argument("--out", default=str(ROOT / "artifacts" / "demo_latency.json"))
    p.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    add_quick(p)
    args = p.parse_args()
    if args.quick:
        args.model, args.full_size, args.max_frames = "tiny", False, 30
    return args


def start_server(demo_app):
    import socket

    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(demo_app, host="127.0.0.1", port=port, log_level="warning",
                                           timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline:
            raise TimeoutError("server did not start")
        time.sleep(0.05)
    return server, thread, port


def full_size_host(cache_dir):
    """Full-size shapes with random weights: what the real model costs per frame on this box."""
    import torch

    from gepard_demo.codec import build_random_codec
    from gepard_demo.model.checkpoints.full_size import build_full_size_engine
    from gepard_demo.model.checkpoints.tiny import ensure_tiny
    from gepard_demo.ui.hosts.model_host import ModelHost

    engine = build_full_size_engine(ensure_tiny(Path(cache_dir)))  # the tiny tokenizer is enough here
    with torch.no_grad():  # random stop heads fire at random; make every run its full length
        engine.talker.stop_head.weight.zero_()
        engine.talker.stop_head.bias.fill_(-30.0)
    return ModelHost(engine, build_random_codec(seed=0), requested="full-size-random")


LONG_TEXT = ("The old lighthouse keeper climbed the narrow spiral staircase every evening, lit the great lamp, and "
             "watched the ships pass safely through the night. In the morning he wrote down every vessel he had seen, "
             "the weather, the wind, and the colour of the sea, in a book that nobody ever read.")
SHORT_TEXT = "Hello! This is Gepard, a text to speech model that starts talking almost at once."


def smallest_gapless_buffer_s(arrivals: list, sample_rate: int) -> float:
    """The least wait after the first bytes that plays this run's stream without a gap: playback
    reaches a chunk's first sample at wait + (samples before it) / rate, which must not come
    before the chunk does. arrivals: [performance.now() ms, samples received so far]."""
    t0 = arrivals[0][0]
    need, before = 0.0, 0
    for t, total in arrivals:
        need = max(need, (t - t0) / 1000 - before / sample_rate)
        before = total
    return need


def click_and_wait(page, timeout_ms=300_000):
    page.click("#gepard-generate")
    page.wait_for_function("() => window.gepardPlayer.stats.jobId")
    job_id = page.evaluate("window.gepardPlayer.stats.jobId")
    stats = page.wait_for_function(WAIT_DONE, arg=job_id, timeout=timeout_ms).json_value()
    return job_id, stats


def main() -> int:
    args = parse_args()
    from playwright.sync_api import sync_playwright

    from app import DEMO_STREAM
    from gepard_demo.speed.flags import speed_for
    from gepard_demo.speed.select import apply_codec_speed, apply_speed
    from gepard_demo.ui.hosts.model_host import load_model_host
    from gepard_demo.ui.server import build_app

    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="gepard-bench-")
    if args.full_size:
        host = full_size_host(cache_dir)
    else:
        host = load_model_host(args.model, cache_dir=cache_dir, fallback=None)
    # The speed path app.py would pick here (printed), or the one the flags ask for.
    speed = speed_for(host.engine, "cpu", args.precision, args.threads, args.pipeline, args.codec_precision)
    host.engine = apply_speed(host.engine, speed)
    host.codec = apply_codec_speed(host.codec, speed)
    host.warm_up(DEMO_STREAM)
    demo = build_app(host, stream=DEMO_STREAM)
    server, thread, port = start_server(demo.app)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium, headless=True, args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{port}/", wait_until="load")  # not networkidle: the page keeps a heartbeat open (its gr.State)
            page.wait_for_function("() => window.gepardPlayer && document.querySelector('#gepard-generate') && document.querySelector('#gepard-recut')", timeout=60_000)
            text = args.text or (LONG_TEXT if args.full_size else SHORT_TEXT)
            page.fill("#gepard-text textarea", text)
            for elem, value in (("gepard-max-frames", args.max_frames),):
                box = page.locator(f"#{elem} input[type=number]")
                box.fill(str(value))
                box.press("Enter")
            page.locator("#gepard-random-seed input").uncheck()
            seed_box = page.locator("#gepard-seed input")
            seed_box.fill(str(args.seed))
            seed_box.press("Enter")
            warm_job, warm = click_and_wait(page)
            job_id, player = click_and_wait(page)
            browser.close()
        st = demo.controller.stats_for(job_id)
    finally:
        server.should_exit = True
        thread.join(10)

    engine_ttfa_ms = st.ttfa_s * 1000
    sr = int(host.sample_rate)
    # The player's automatic start buffer against the least this very run needed.
    minimum_s = smallest_gapless_buffer_s(player["arrivals"], sr)
    buffered = bool((player.get("auto") or {}).get("needS"))
    waited_s = (player["firstPlayAt"] - player["firstByteAt"]) / 1000 - (player["outputLatencyMs"] or 0) / 1000
    overhead_ms = player["clickToSoundMs"] - engine_ttfa_ms
    result = {
        "model": host.info.name,
        "random_weights": host.info.random_weights,
        "speed": host.info.speed,
        "stream": {"first_chunk_frames": DEMO_STREAM.first_chunk_frames, "chunk_frames": DEMO_STREAM.chunk_frames,
                   "decode_mode": DEMO_STREAM.decode_mode, "fade_ms": DEMO_STREAM.fade_ms},
        "frames": st.frames,
        "audio_s": round(st.audio_s, 3),
        "click_to_first_byte_ms": round(player["firstByteAt"] - player["clickAt"], 1),
        "click_to_sound_ms": round(player["clickToSoundMs"], 1),
        "engine_ttfa_ms": round(engine_ttfa_ms, 1),
        "overhead_ms": round(overhead_ms, 1),
        "output_latency_ms": player["outputLatencyMs"],
        "underruns": player["underruns"],
        "gap_ms": round(player["gapMs"], 1),
        "samples_played": player["samplesPlayed"],
        "samples_received": player["samplesReceived"],
        "rtf": round(st.rtf, 3),
        "auto_start_buffer": player.get("auto"),
        "start_wait_s": round(waited_s, 3),
        "smallest_gapless_wait_s": round(minimum_s, 3),
        "wait_vs_smallest": round(waited_s / minimum_s, 2) if minimum_s > 0.05 else None,
        "warmup_click_to_sound_ms": round(warm["clickToSoundMs"], 1) if warm.get("clickToSoundMs") else None,
        # Where the player chose to buffer (slower than real time), click-to-sound includes that
        # wait on purpose: the overhead and click-to-sound targets are for streams it starts at once.
        "buffered_on_purpose": buffered,
        "targets": {
            "overhead_ms<=300": None if buffered else overhead_ms <= TARGET_OVERHEAD_MS,
            "zero_gaps": player["underruns"] == 0,
            "faster_than_real_time": st.rtf < 1.0,
            "click_to_sound_ms<=600": None if buffered else player["clickToSoundMs"] <= TARGET_CLICK_TO_SOUND_MS,
            # Issue 21: gapless with the least wait, where generation is slower than real time.
            "wait_within_25%_of_smallest": minimum_s <= 0.05 or waited_s <= 1.25 * minimum_s + 0.05,
        },
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    print(f"\nclick-to-sound {result['click_to_sound_ms']:.0f} ms = engine TTFA {result['engine_ttfa_ms']:.0f} ms "
          f"+ {result['overhead_ms']:.0f} ms (target <= {TARGET_OVERHEAD_MS:.0f}); "
          f"gaps {result['underruns']} over {result['audio_s']:.1f} s at RTF {result['rtf']:.2f}; "
          f"start wait {waited_s:.2f} s against the smallest gapless {minimum_s:.2f} s")
    missed = [k for k, ok in result["targets"].items() if ok is False]
    if missed:
        print("targets missed: " + ", ".join(missed))
    return 1 if (missed and args.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
