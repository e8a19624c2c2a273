"""Where a stream's time goes, frame by frame, under the torch profiler: the talker's step (one graph
replay on a GPU), the codec's chunks, the session's own host work, the device's idle gaps between
kernels, copies and syncs, and the top kernels by time; a Markdown table and a JSON.

The parts are scopes the instrumentation here adds around a session's calls (`traced`): talker =
one read of the engine's frames (FRAME_SCOPE; prefill, the step and its readback), codec = one push
into the codec stream (CODEC_SCOPE), session = the rest of a frame's wall time on the session's
thread. A frame runs from one talker read to the next. Ops launched: the aten calls that are
leaves (no aten call inside them, no mere view: decode_loops.VIEWS); a CUDA graph replay (the
talker's STEP_SCOPE, the codec's CHUNK_SCOPE) counts one and the ops it holds none: on a CPU both
run eagerly under the same scopes, so the count there is what a GPU would launch. Host reads:
`_local_scalar_dense` (a float() / .item() / .tolist(): a sync on a GPU). Syncs, copies, kernels
and the device's gaps need a device: on a CPU they read 0.

benchmarks/gpu_check.sh runs this on CUDA (its "timeline" section); benchmarks/session_overhead.py
counts ops with `summarise` on a CPU; tests/benchmarks/test_stream_timeline.py checks both paths on a CPU.

Run: python3 benchmarks/stream_timeline.py [--device cuda] [--frames 64] [--out DIR] [--quick]
--quick: the tiny model and codec, 24 frames (the device as given: the dry run uses the CPU).
"""

from __future__ import annotations

import argparse
import bisect
import json
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from decode_loops import VIEWS  # noqa: E402
from quick import add_quick, codec_for, engine_for  # noqa: E402

from gepard_demo.codec.graphed import CHUNK_SCOPE  # noqa: E402
from gepard_demo.model.fixed_shape.shapes import STEP_SCOPE  # noqa: E402
from gepard_demo.model.seams import WrappedEngine  # noqa: E402

FRAME_SCOPE = "bench::talker_read"
CODEC_SCOPE = "bench::codec_push"
REPLAYS = (STEP_SCOPE, CHUNK_SCOPE)
HOST_READ = "aten::_local_scalar_dense"
SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")
PARTS = ("talker", "codec", "session")
TEXT = ("The weather is sunny today, with a light breeze from the west and a few clouds over the hills. "
        "In the afternoon the wind turns, and by the evening there may be rain along the coast.")


# -- instrumentation ------------------------------------------------------------------------------

class _Frames:
    """A FrameSource whose every read runs under FRAME_SCOPE; the rest is the source's own."""

    def __init__(self, inner):
        self._inner = inner

    def __iter__(self):
        return self

    def __next__(self):
        with torch.profiler.record_function(FRAME_SCOPE):
            return next(self._inner)

    def __getattr__(self, name):
        return getattr(self._inner, name)


class _Engine(WrappedEngine):
    def stream_frames(self, request):
        return _Frames(self.engine.stream_frames(request))


class _Stream:
    def __init__(self, inner):
        self._inner = inner

    def push(self, codes):
        with torch.profiler.record_function(CODEC_SCOPE):
            return self._inner.push(codes)

    def push_last(self, codes):
        with torch.profiler.record_function(CODEC_SCOPE):
            return getattr(self._inner, "push_last", self._inner.push)(codes)

    def __getattr__(self, name):
        return getattr(self._inner, name)


class _Codec:
    def __init__(self, inner):
        self._inner = inner

    def streamer(self, *args, **kwargs):
        return _Stream(self._inner.streamer(*args, **kwargs))

    def __getattr__(self, name):
        return getattr(self._inner, name)


def traced(engine, codec):
    """The engine and codec a session reads through, their calls under this module's scopes."""
    return _Engine(engine), _Codec(codec)


# -- the profile as plain records -----------------------------------------------------------------

@dataclass(frozen=True)
class Ev:
    """One profiler event: start and end in us (one clock for host and device), its host thread,
    whether it ran on the device, whether it is an op the host launches (an aten leaf, no view)."""

    name: str
    start: float
    end: float
    thread: int = 0
    device: bool = False
    leaf: bool = False


def records(prof) -> list[Ev]:
    """A finished torch.profiler.profile's events as Ev records."""
    out = []
    for e in prof.events():
        device = e.device_type != torch.autograd.DeviceType.CPU
        leaf = (not device and e.name.startswith("aten::") and e.name not in VIEWS
                and not any(c.name.startswith("aten::") for c in e.cpu_children))
        out.append(Ev(e.name, e.time_range.start, e.time_range.end, e.thread, device, leaf))
    return out


class _Spans:
    """Non-overlapping spans of one name per thread: which one holds a moment."""

    def __init__(self, evs: list[Ev]):
        self.by_thread: dict[int, list[Ev]] = defaultdict(list)
        for e in sorted(evs, key=lambda e: e.start):
            self.by_thread[e.thread].append(e)
        self.starts = {t: [e.start for e in v] for t, v in self.by_thread.items()}

    def holding(self, e: Ev) -> Ev | None:
        spans = self.by_thread.get(e.thread)
        if not spans:
            return None
        i = bisect.bisect_right(self.starts[e.thread], e.start) - 1
        return spans[i] if i >= 0 and e.end <= spans[i].end else None


def _busy(intervals: list[tuple[float, float]], lo: float, hi: float) -> tuple[float, float, float]:
    """(busy, summed gaps, largest gap) in us of device intervals clipped to [lo, hi), between the
    first and the last of them (time the device sat idle while the frame's work was queued)."""
    clipped = sorted((max(a, lo), min(b, hi)) for a, b in intervals if b > lo and a < hi)
    busy = gaps = largest = 0.0
    end = None
    for a, b in clipped:
        if end is not None and a > end:
            gaps += a - end
            largest = max(largest, a - end)
        if end is None or b > end:
            busy += b - max(a, end if end is not None else a)
            end = b
    return busy, gaps, largest


# -- the summary ----------------------------------------------------------------------------------

def summarise(evs: list[Ev], frame_rate_hz: float, audio_frames: int | None = None, top: int = 10) -> dict:
    """Per frame: wall, talker, codec and session ms; ops launched by each part; host reads, syncs,
    copies; the device's busy time and its gaps. Then the totals (per audio second of
    `audio_frames` frames; as many as the reads when not given) and the top kernels by time."""
    frames = sorted((e for e in evs if e.name == FRAME_SCOPE and not e.device), key=lambda e: e.start)
    if not frames:
        raise ValueError(f"no {FRAME_SCOPE} in the profile: was the session read through traced()?")
    main = frames[0].thread
    host = [e for e in evs if not e.device]
    end = max(e.end for e in host if e.thread == main)
    starts = [f.start for f in frames]
    bounds = list(zip(starts, starts[1:] + [end]))
    rows = [{"frame": i, "wall_ms": (b - a) / 1e3, "talker_ms": (frames[i].end - frames[i].start) / 1e3, "codec_ms": 0.0,
             "ops": dict.fromkeys(PARTS, 0), "host_reads": 0, "syncs": 0, "copies": 0}
            for i, (a, b) in enumerate(bounds)]
    part_spans = {FRAME_SCOPE: _Spans(frames), CODEC_SCOPE: _Spans([e for e in host if e.name == CODEC_SCOPE])}
    replays = _Spans([e for e in host if e.name in REPLAYS])
    names: dict[str, dict[str, int]] = {p: defaultdict(int) for p in PARTS}  # what each part launches

    def frame_of(t: float) -> int | None:
        i = bisect.bisect_right(starts, t) - 1
        return i if i >= 0 and t < bounds[i][1] else None

    def part_of(e: Ev) -> str:
        if part_spans[FRAME_SCOPE].holding(e):
            return "talker"
        return "codec" if part_spans[CODEC_SCOPE].holding(e) else "session"

    for e in host:
        i = frame_of(e.start)
        if i is None:
            continue
        row = rows[i]
        if e.name == CODEC_SCOPE and e.thread == main:
            row["codec_ms"] += (e.end - e.start) / 1e3
        elif e.name in REPLAYS or (e.leaf and not replays.holding(e)):
            part = part_of(e)
            row["ops"][part] += 1
            names[part][e.name] += 1
        row["host_reads"] += e.name == HOST_READ
        row["syncs"] += e.name in SYNCS
        row["copies"] += e.name.startswith("cudaMemcpy")
    device = [(e.start, e.end) for e in evs if e.device]
    for row, (a, b) in zip(rows, bounds):
        row["session_ms"] = row["wall_ms"] - row["talker_ms"] - row["codec_ms"]
        busy, gaps, largest = _busy(device, a, b)
        row.update(device_busy_ms=busy / 1e3, device_gaps_ms=gaps / 1e3, largest_gap_ms=largest / 1e3)
    audio_s = (audio_frames if audio_frames is not None else len(rows)) / frame_rate_hz
    return {"frames": len(rows), "rows": rows, "totals": _totals(rows, audio_s),
            "top": _top(evs, top), "top_on": "device" if device else "host",
            "launched": {p: dict(sorted(v.items(), key=lambda kv: -kv[1])[:top]) for p, v in names.items()}}


def _totals(rows: list[dict], audio_s: float) -> dict:
    n = len(rows)
    ops = {p: sum(r["ops"][p] for r in rows) for p in PARTS}
    out = {"audio_s": audio_s, "ops_per_frame": {p: v / n for p, v in ops.items()},
           "ops_per_audio_s": {**{p: v / audio_s for p, v in ops.items()}, "all": sum(ops.values()) / audio_s}}
    for key in ("wall_ms", "talker_ms", "codec_ms", "session_ms", "device_busy_ms", "device_gaps_ms"):
        out[f"{key}_per_frame"] = sum(r[key] for r in rows) / n
    for key in ("host_reads", "syncs", "copies"):
        out[f"{key}_per_frame"] = sum(r[key] for r in rows) / n
    return out


def _top(evs: list[Ev], top: int) -> list[dict]:
    """The device's kernels by total time (the host's leaf ops where there is no device)."""
    pool = [e for e in evs if e.device] or [e for e in evs if e.leaf]
    total: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for e in pool:
        total[e.name][0] += (e.end - e.start) / 1e3
        total[e.name][1] += 1
    ranked = sorted(total.items(), key=lambda kv: -kv[1][0])[:top]
    return [{"name": k, "total_ms": v[0], "count": v[1]} for k, v in ranked]


def table(s: dict, rows: int = 12) -> str:
    t = s["totals"]
    lines = ["| frame | wall ms | talker ms | codec ms | session ms | ops talker / codec / session | host reads | "
             "syncs | copies | device busy / gaps ms |", "| ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- |"]
    for r in s["rows"][:rows]:
        o = r["ops"]
        lines.append(f"| {r['frame']} | {r['wall_ms']:.2f} | {r['talker_ms']:.2f} | {r['codec_ms']:.2f} | "
                     f"{r['session_ms']:.3f} | {o['talker']} / {o['codec']} / {o['session']} | {r['host_reads']} | "
                     f"{r['syncs']} | {r['copies']} | {r['device_busy_ms']:.2f} / {r['device_gaps_ms']:.2f} |")
    per = t["ops_per_frame"]
    lines.append(f"| mean of {s['frames']} | {t['wall_ms_per_frame']:.2f} | {t['talker_ms_per_frame']:.2f} | "
                 f"{t['codec_ms_per_frame']:.2f} | {t['session_ms_per_frame']:.3f} | {per['talker']:.1f} / "
                 f"{per['codec']:.1f} / {per['session']:.1f} | {t['host_reads_per_frame']:.2f} | "
                 f"{t['syncs_per_frame']:.2f} | {t['copies_per_frame']:.2f} | {t['device_busy_ms_per_frame']:.2f} / "
                 f"{t['device_gaps_ms_per_frame']:.2f} |")
    a = t["ops_per_audio_s"]
    lines += ["", f"ops launched per audio second: {a['all']:.0f} (talker {a['talker']:.0f}, codec {a['codec']:.0f}, "
              f"session {a['session']:.0f})", "", f"| top {s['top_on']} ops by time | total ms | count |",
              "| --- | ---: | ---: |"]
    lines += [f"| {k['name'][:90]} | {k['total_ms']:.2f} | {k['count']} |" for k in s["top"]]
    return "\n".join(lines)


# -- the script -----------------------------------------------------------------------------------

def profile_stream(engine, codec, frames: int, stream, device: str) -> tuple[list[Ev], int]:
    """One session of `frames` frames read through `traced`, under the profiler: its Ev records and
    the frames it made."""
    from gepard_demo.settings import SamplingSettings
    from gepard_demo.streaming.session import SynthesisSession
    from gepard_demo.streaming.seams import SessionRequest

    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.startswith("cuda"):
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    e, c = traced(engine, codec)
    session = SynthesisSession(e, c, SessionRequest(TEXT, SamplingSettings(seed=1, max_frames=frames), stream))
    with torch.profiler.profile(activities=activities) as prof:
        session.run()
    return records(prof), session.stats.frames


def main(argv: list[str] | None = None) -> dict:
    from decode_loops import stop_head_off

    from gepard_demo.model.checkpoints.tiny import ensure_tiny
    from gepard_demo.settings import SamplingSettings, StreamSettings
    from gepard_demo.streaming.session import SynthesisSession
    from gepard_demo.streaming.seams import SessionRequest

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--frames", type=int, default=64)
    p.add_argument("--out", default=None, help="write timeline.md and timeline.json here")
    add_quick(p)
    args = p.parse_args(argv)
    frames = 24 if args.quick else args.frames
    engine = engine_for(args.quick, ensure_tiny(Path(tempfile.gettempdir()) / "gepard-bench-cache"))
    engine.talker.to(args.device)
    stop_head_off(engine)
    codec = codec_for(args.quick, device=args.device)
    engine.use_loop("on")  # the fixed-shape step: graphs on a GPU, eager under the same scope on a CPU
    codec.use_chunk_graphs(True)
    stream = StreamSettings(first_chunk_frames=10, chunk_frames=10, chunk_schedule="fixed")
    SynthesisSession(engine, codec, SessionRequest("Warm up.", SamplingSettings(seed=0, max_frames=22), stream)).run()
    evs, made = profile_stream(engine, codec, frames, stream, args.device)
    summary = summarise(evs, codec.frame_rate_hz, made)
    summary.update(device=args.device, model=engine.model_info.name, torch=torch.__version__)
    text = table(summary)
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "timeline.md").write_text(text + "\n")
        (out / "timeline.json").write_text(json.dumps(summary, indent=2))
    return summary


if __name__ == "__main__":
    main()
