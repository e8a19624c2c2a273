"""A long text in the demo, its segments one after another against ahead of playback, side by side
in one run (issue 34), in headless Chromium.

The real app (PCM route + Gradio page) with Gepard-1.0's real shape and a full-size NanoCodec, both
with random weights (their stop heads silenced, so every segment runs to --max-frames), one visitor,
a text of 5-8 segments. Each mode gets its own host over the same engine and codec: `--look-ahead 0`
(today's one after another) and `--look-ahead N` (the next segments as rows of the running batch).
Per mode, after a warm-up click:

  effective_rtf    the whole text's wall time (request start -> last chunk ready) / its speech
  underruns        gaps the player heard after it started (its start wait excluded)
  ttfa_ms          request start -> the first segment's first chunk ready (server side)
  click_to_sound_ms / start_wait_s   what the visitor waited, the player's automatic start buffer
  smallest_gapless_wait_s            the least start wait this run's arrivals needed

Targets (issue 34, 2 vCPU, AVX-512): effective RTF at most 0.5 where one stream runs at about 1.0;
0 gaps after the start wait; the first segment's time to first audio no worse than one after
another. Writes artifacts/long_text.json. Measure on a quiet machine.

    .venv/bin/python benchmarks/long_text.py [--max-frames 120] [--look-ahead 3] [--chars 2400]
    .venv/bin/python benchmarks/long_text.py --chars 2000 --ttfa-rounds 6   # TTFA alone, interleaved
--quick: tiny, 2 segments of 10 frames.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from demo_latency import (  # noqa: E402  (the same app, browser and measures as the latency benchmark)
    CHROMIUM,
    CHROMIUM_ARGS,
    click_and_wait,
    full_size_host,
    smallest_gapless_buffer_s,
    start_server,
)

from gepard_demo.speed.select import detect_hardware  # noqa: E402
from gepard_demo.speed.flags import add_speed_flags  # noqa: E402
from quick import add_quick  # noqa: E402

SENTENCE = ("The river ran slowly past the old mill, and the miller's children watched the boats go by while "
            "their father counted sacks of flour in the yard.")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--chars", type=int, default=2400, help="text length (about 400 characters a segment)")
    p.add_argument("--max-frames", type=int, default=120, help="frames per segment (the stop head is silenced)")
    p.add_argument("--look-ahead", type=int, default=3, help="segments ahead in the 'ahead' mode")
    p.add_argument("--max-batch", type=int, default=4)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--chromium", default=CHROMIUM)
    p.add_argument("--ttfa-rounds", type=int, default=0,
                   help="instead: the first segment's TTFA only, both modes interleaved for N rounds, no browser")
    add_speed_flags(p)
    p.add_argument("--out", default=str(ROOT / "artifacts" / "long_text.json"))
    p.add_argument("--cache-dir", default=None, help="where tiny is built (its tokenizer; default: a fresh folder)")
    add_quick(p)
    args = p.parse_args()
    if args.quick:
        args.chars, args.max_frames = 500, 10
    return args


def run_mode(engine_host, look_ahead: int, max_batch: int, text: str, args) -> dict:
    from playwright.sync_api import sync_playwright

    from app import DEMO_STREAM
    from gepard_demo.host_settings import BatchingSettings, TrafficSettings
    from gepard_demo.ui.hosts.model_host import ModelHost
    from gepard_demo.ui.server import build_app

    host = ModelHost(engine_host.engine, engine_host.codec, requested=engine_host.requested)
    host.batch(BatchingSettings(max_batch=max_batch, look_ahead=look_ahead))
    demo = build_app(host, stream=DEMO_STREAM, traffic=TrafficSettings.for_batch(max_batch, max_text_chars=50_000))
    server, thread, port = start_server(demo.app)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium, headless=True, args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{port}/", wait_until="load")
            page.wait_for_function("() => window.gepardPlayer && document.querySelector('#gepard-generate')",
                                   timeout=60_000)
            page.locator("#gepard-random-seed input").uncheck()
            for elem, value in (("gepard-max-frames", args.max_frames), ("gepard-seed", args.seed)):
                box = page.locator(f"#{elem} input").first
                box.fill(str(value))
                box.press("Enter")
            page.fill("#gepard-text textarea", "Warm up the page and the engine.")
            click_and_wait(page)
            page.fill("#gepard-text textarea", text)
            job_id, player = click_and_wait(page, timeout_ms=1_200_000)
            browser.close()
        st = demo.controller.stats_for(job_id)
    finally:
        server.should_exit = True
        thread.join(10)
        host.scheduler.close()
    sr = int(host.sample_rate)
    waited = (player["firstPlayAt"] - player["firstByteAt"]) / 1000 - (player["outputLatencyMs"] or 0) / 1000
    return {
        "look_ahead": look_ahead, "segments": st.segments, "frames": st.frames, "speech_s": round(st.speech_s, 2),
        "wall_s": round(st.wall_s, 2), "effective_rtf": round(st.rtf, 3), "ttfa_ms": round(st.ttfa_s * 1000, 1),
        "click_to_sound_ms": round(player["clickToSoundMs"], 1), "underruns": player["underruns"],
        "gap_ms": round(player["gapMs"], 1), "start_wait_s": round(waited, 2),
        "smallest_gapless_wait_s": round(smallest_gapless_buffer_s(player["arrivals"], sr), 2),
        "player_rate": (player.get("auto") or {}).get("rate"), "preemptions": host.scheduler.load()["preemptions"],
    }


def ttfa_rounds(base, text: str, args) -> int:
    """The first segment's time to first audio in both modes, interleaved round by round on one
    engine (the browser run gives one sample per mode, each on its own host, in a fixed order).
    Each request is cancelled once its first chunk is out; the first round is a warm-up."""
    import statistics
    import time

    from app import DEMO_STREAM
    from gepard_demo.host_settings import BatchingSettings
    from gepard_demo.streaming.seams import SessionRequest
    from gepard_demo.ui.hosts.model_host import ModelHost

    hosts = {}
    for n in (0, args.look_ahead):
        hosts[n] = ModelHost(base.engine, base.codec, requested=base.requested)
        hosts[n].batch(BatchingSettings(max_batch=args.max_batch, look_ahead=n))
    ttfa = {n: [] for n in hosts}
    sampling = base.engine.default_sampling().replace(max_frames=args.max_frames, seed=args.seed)
    try:
        for r in range(args.ttfa_rounds + 1):
            for n in (sorted(hosts) if r % 2 else sorted(hosts, reverse=True)):
                session = hosts[n].new_session(SessionRequest(text, sampling, DEMO_STREAM,
                                                              request_start=time.perf_counter(), max_text_chars=50_000))
                chunks = iter(session)
                next(chunks)
                if r:
                    ttfa[n].append(session.stats.ttfa_s * 1000)
                session.cancel()
                for _ in chunks:  # drains at once: every segment's request was let go
                    pass
                time.sleep(0.5)
    finally:
        for host in hosts.values():
            host.scheduler.close()
    for n, values in ttfa.items():
        name = "one after another" if n == 0 else f"ahead ({n})"
        print(f"{name:>20} TTFA ms median {statistics.median(values):.0f}  rounds {[round(v) for v in values]}")
    return 0


def main() -> int:
    args = parse_args()
    from gepard_demo.speed.flags import speed_for
    from gepard_demo.speed.select import apply_codec_speed, apply_speed
    from gepard_demo.streaming.text_input import split_text
    from gepard_demo.ui.hosts.model_host import load_model_host

    text = ""
    while len(text) < args.chars:
        text += SENTENCE + " "
    text = text.strip()
    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="gepard-bench-")
    base = load_model_host("tiny", cache_dir, fallback=None) if args.quick else full_size_host(cache_dir)
    speed = speed_for(base.engine, "cpu", args.precision, args.threads, args.pipeline, args.codec_precision)
    base.engine = apply_speed(base.engine, speed)
    base.codec = apply_codec_speed(base.codec, speed)
    print(f"{len(text)} characters, {len(split_text(text))} segments, {args.max_frames} frames each; "
          f"speed: {base.engine.model_info.speed}", flush=True)
    if args.ttfa_rounds:
        return ttfa_rounds(base, text, args)
    rows = [run_mode(base, n, args.max_batch, text, args) for n in (0, args.look_ahead)]
    seq, ahead = rows
    result = {"cpu": " ".join(detect_hardware("cpu").cpu_flags),
              "speed": base.engine.model_info.speed, "one_after_another": seq, "ahead": ahead,
              "rtf_ratio": round(ahead["effective_rtf"] / seq["effective_rtf"], 3),
              "targets": {"effective_rtf<=0.5": ahead["effective_rtf"] <= 0.5,
                          "zero_gaps": ahead["underruns"] == 0,
                          "ttfa_no_worse": ahead["ttfa_ms"] <= seq["ttfa_ms"] * 1.1 + 50}}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"{'mode':>20} {'eff RTF':>8} {'wall s':>7} {'speech s':>8} {'TTFA ms':>8} {'gaps':>5} {'start wait s':>12} "
          f"{'least gapless s':>15}")
    for name, r in (("one after another", seq), (f"ahead ({args.look_ahead})", ahead)):
        print(f"{name:>20} {r['effective_rtf']:>8.3f} {r['wall_s']:>7.1f} {r['speech_s']:>8.1f} {r['ttfa_ms']:>8.0f} "
              f"{r['underruns']:>5} {r['start_wait_s']:>12.2f} {r['smallest_gapless_wait_s']:>15.2f}")
    print(f"ahead / one after another, effective RTF: {result['rtf_ratio']:.2f}; targets: {result['targets']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
