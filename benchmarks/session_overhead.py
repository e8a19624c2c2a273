"""The session's own work per frame, and the ops a whole stream launches per audio second.

A GPU makes a frame in a few ms (docs/PERFORMANCE.md §7's targets), so what the session does per
frame on the host beside the talker's step and the codec's decode (its bookkeeping, the pacing,
copies, the stop's read, its Python per chunk) and every op it launches count there. Measured on a
CPU at Gepard-1.0's real shape (random weights, the full-size random NanoCodec; stop head off, so
every run makes the frames asked for), for the page's chunks (10 then 10) and the server's ramp
(10, 10, 20, 40, 80, then 86), two ways:

- eager: the growing cache and the codec's eager exact stream (a CPU's default);
- talker-graphed: the fixed-shape step (a replay counts one launch), the codec eager (before issue 66);
- graphed: the fixed-shape step and the codec's chunk graphs (`cuda_graphs` on: what a GPU runs),
  eager here under the replay scopes, so a replay counts one launch (benchmarks/stream_timeline.py).

Figures: session host time per frame (wall - the talker's reads - the codec's pushes, from the
session's own stats; the median of --rounds unprofiled runs), the talker's and the codec's ms per
frame beside it, and the ops launched per audio second by part (talker / codec / session), with the
host reads (a sync each on a GPU) per frame.

Run: .venv/bin/python benchmarks/session_overhead.py [--frames 64] [--rounds 3] [--ways eager graphed] [--json FILE]
--quick: the tiny model and codec, 12 frames (a whole chunk and a partial one), one round.
Measure on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from decode_loops import stop_head_off  # noqa: E402
from quick import add_quick, codec_for, engine_for  # noqa: E402
from stream_timeline import TEXT, profile_stream, summarise  # noqa: E402

from gepard_demo.model.checkpoints.tiny import ensure_tiny  # noqa: E402
from gepard_demo.settings import SamplingSettings, StreamSettings  # noqa: E402
from gepard_demo.streaming.session import SynthesisSession  # noqa: E402
from gepard_demo.streaming.seams import SessionRequest  # noqa: E402

SCHEDULES = {"page 10+10": StreamSettings(first_chunk_frames=10, chunk_frames=10, chunk_schedule="fixed"),
             "server ramp 10..86": StreamSettings(first_chunk_frames=10, chunk_frames=86, chunk_schedule="ramp")}
# way -> (the talker's cuda_graphs, the codec's chunk graphs)
WAYS = {"eager": ("off", False), "talker-graphed": ("on", False), "graphed": ("on", True)}


def use(engine, codec, way: tuple[str, bool]) -> None:
    engine.use_loop(way[0])
    codec.use_chunk_graphs(way[1])


def host_times(engine, codec, stream: StreamSettings, frames: int, rounds: int) -> dict:
    """Median over `rounds` unprofiled sessions: session host us per frame, talker and codec ms per frame."""
    runs = []
    for r in range(rounds):
        session = SynthesisSession(
            engine, codec, SessionRequest(TEXT, SamplingSettings(seed=1 + r, max_frames=frames), stream)
        )
        session.run()
        st = session.stats
        runs.append(((st.wall_s - st.gen_time_s - st.decode_time_s) / st.frames * 1e6,
                     st.gen_time_s / st.frames * 1e3, st.decode_time_s / st.frames * 1e3))
    return {"session_us_per_frame": statistics.median(r[0] for r in runs),
            "session_us_runs": [round(r[0], 1) for r in runs],
            "talker_ms_per_frame": statistics.median(r[1] for r in runs),
            "codec_ms_per_frame": statistics.median(r[2] for r in runs)}


def measure(engine, codec, frames: int, rounds: int, ways: list[str]) -> dict:
    out: dict = {}
    for way in ways:
        setting = WAYS[way]
        use(engine, codec, setting)
        for name, stream in SCHEDULES.items():
            SynthesisSession(
                engine, codec, SessionRequest("Warm up.", SamplingSettings(seed=0, max_frames=22), stream)
            ).run()
            row = host_times(engine, codec, stream, frames, rounds)
            evs, made = profile_stream(engine, codec, frames, stream, "cpu")
            s = summarise(evs, codec.frame_rate_hz, made)
            t = s["totals"]
            row.update(ops_per_audio_s=t["ops_per_audio_s"], ops_per_frame=t["ops_per_frame"],
                       host_reads_per_frame=t["host_reads_per_frame"],
                       session_launches={k: v / s["frames"] for k, v in s["launched"]["session"].items()})
            out[f"{way}, {name}"] = row
    use(engine, codec, ("auto", False))
    return out


def table(o: dict) -> str:
    lines = ["| way, chunks | session host us / frame (runs) | talker ms / frame | codec ms / frame | "
             "ops / audio s: all (talker, codec, session) | session ops / frame | host reads / frame |",
             "| --- | ---: | ---: | ---: | --- | ---: | ---: |"]
    for k, r in o["runs"].items():
        a = r["ops_per_audio_s"]
        lines.append(f"| {k} | {r['session_us_per_frame']:.0f} ({', '.join(f'{x:.0f}' for x in r['session_us_runs'])}) | "
                     f"{r['talker_ms_per_frame']:.1f} | {r['codec_ms_per_frame']:.1f} | {a['all']:.0f} ({a['talker']:.0f}, "
                     f"{a['codec']:.0f}, {a['session']:.0f}) | {r['ops_per_frame']['session']:.1f} | "
                     f"{r['host_reads_per_frame']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frames", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's own choice)")
    p.add_argument("--ways", nargs="+", default=list(WAYS), choices=list(WAYS))
    p.add_argument("--json", default=None)
    add_quick(p)
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    frames, rounds = (12, 1) if args.quick else (args.frames, args.rounds)
    engine = engine_for(args.quick, ensure_tiny(Path(tempfile.gettempdir()) / "gepard-bench-cache"))
    stop_head_off(engine)
    codec = codec_for(args.quick)
    out = {"torch": torch.__version__, "threads": torch.get_num_threads(), "model": engine.model_info.name,
           "frames": frames, "runs": measure(engine, codec, frames, rounds, args.ways)}
    print(table(out))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
