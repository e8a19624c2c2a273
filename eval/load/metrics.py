"""The load figures, each under vLLM's name and computed as `vllm bench serve --omni` computes it.

Per request (the wheel's benchmarks/patch/patch.py, `async_request_openai_audio_speech`):
- audio_ttfp: the first non-empty chunk's arrival minus the request's start (s);
- e2el: the last byte's arrival minus the start (s);
- audio_duration: samples / sample rate, samples = PCM bytes // (2 bytes x 1 channel);
- audio_rtf: e2el / audio_duration (0 when there is no audio: metrics/definitions.py);
- audio_underrun: the worst starvation of a player that starts at the first chunk and plays in
  real time (benchmarks/audio_continuity.py); audio_continuity_ok: that underrun <= 0.1 s.

Over a run (benchmarks/metrics/metrics.py, `calculate_metrics`, over the successful requests):
mean / median / std (numpy's, population) and numpy percentiles of each; audio_throughput = the
audio seconds made / the run's wall time; request_throughput = completed / wall time;
request_goodput = the requests within every SLO of --goodput / wall time;
audio_continuity_ok_rate = the share of completed requests with audio_continuity_ok.

The one departure: the sample rate is the server's (its X-Gepard-Sample-Rate header, or the WAV
header of the check request), where the bench assumes 24 kHz unless an environment variable
says otherwise (on Gepard's 22,050 Hz that reads every duration 8% short).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

import numpy as np

SAMPLE_WIDTH = 2  # s16le, as the bench's DEFAULT_AUDIO_SAMPLE_WIDTH
CHANNELS = 1
CONTINUITY_THRESHOLD_S = 0.1  # the bench's AUDIO_CONTINUITY_DEFAULT_THRESHOLD_S: an audible gap
PERCENTILES = (50.0, 95.0, 99.0)  # the bench's --metric-percentiles for audio runs

# The SLOs --goodput takes, by the bench's key -> the row's field (seconds). The wheel's
# calculate_metrics names the first-audio SLO "audio_ttft"; audio_ttfp is its metric's name.
GOODPUT_KEYS = {"audio_ttfp": "audio_ttfp", "audio_ttft": "audio_ttfp", "e2el": "e2el"}

# The per-request figures summarized as mean / median / std / percentiles, with the unit the
# bench's result JSON gives each (its process_one_metric suffixes) and the scale to that unit.
SUMMARIZED = {"audio_ttfp": ("_ms", 1000.0), "e2el": ("_ms", 1000.0), "audio_rtf": ("", 1.0),
              "audio_duration": ("_s", 1.0), "audio_underrun": ("_s", 1.0)}


@dataclass(frozen=True)
class Continuity:
    max_underrun_s: float
    underrun_event_count: int
    is_continuous: bool


def continuity(arrivals_s: list[float], sizes: list[int], sample_rate: int,
               threshold_s: float = CONTINUITY_THRESHOLD_S) -> Continuity:
    """A player that starts when the first chunk arrives and plays in real time: at each later
    arrival, how far the audio it should have played runs ahead of the bytes received before
    it. The worst such deficit, the number of arrivals that found it starved, and whether the
    worst stayed within `threshold_s`."""
    if not arrivals_s or len(arrivals_s) != len(sizes):
        return Continuity(0.0, 0, True)
    bytes_per_s = sample_rate * SAMPLE_WIDTH * CHANNELS
    received = 0
    worst, events = 0.0, 0
    for i, (t, n) in enumerate(zip(arrivals_s, sizes)):
        if i:
            deficit = (t - arrivals_s[0]) * bytes_per_s - received
            if deficit > 0:
                worst = max(worst, deficit / bytes_per_s)
                events += 1
        received += n
    return Continuity(worst, events, worst <= threshold_s)


@dataclass
class RequestRow:
    """One request of a load run, as rows.jsonl keeps it (times in seconds from its start)."""

    index: int
    text: str
    server: str
    start_time: float  # seconds since the run began
    success: bool = False
    error: str = ""  # why it failed ("" when it did not)
    status: int | None = None  # the HTTP status, when one came
    sample_rate: int | None = None
    audio_ttfp: float = 0.0
    e2el: float = 0.0
    audio_bytes: int = 0
    audio_frames: int = 0  # samples, the bench's audio_frames
    audio_duration: float = 0.0
    audio_rtf: float = 0.0
    audio_underrun: float = 0.0
    audio_underrun_event_count: int = 0
    audio_continuity_ok: bool = True
    chunk_arrivals: list[float] = field(default_factory=list)
    chunk_bytes: list[int] = field(default_factory=list)

    def finish(self, e2el: float, sample_rate: int, threshold_s: float = CONTINUITY_THRESHOLD_S) -> "RequestRow":
        """The figures of a request whose stream ended after `e2el` seconds."""
        self.success, self.e2el, self.sample_rate = True, e2el, sample_rate
        self.audio_bytes = sum(self.chunk_bytes)
        self.audio_ttfp = self.chunk_arrivals[0] if self.chunk_arrivals else 0.0
        self.audio_frames = self.audio_bytes // (SAMPLE_WIDTH * CHANNELS)
        self.audio_duration = self.audio_frames / sample_rate if self.audio_frames and sample_rate > 0 else 0.0
        self.audio_rtf = e2el / self.audio_duration if self.audio_duration > 0 else 0.0
        c = continuity(self.chunk_arrivals, self.chunk_bytes, sample_rate, threshold_s)
        self.audio_underrun, self.audio_underrun_event_count = c.max_underrun_s, c.underrun_event_count
        self.audio_continuity_ok = c.is_continuous
        return self

    def to_json(self) -> dict:
        return asdict(self)


def parse_goodput(items: list[str] | None) -> dict[str, float]:
    """`--goodput audio_ttfp:500 e2el:20000` -> {key: milliseconds}, as the bench parses it."""
    out: dict[str, float] = {}
    for item in items or []:
        key, sep, value = item.partition(":")
        if not sep or key not in GOODPUT_KEYS:
            raise ValueError(f"--goodput: {item!r} is not KEY:MILLISECONDS with KEY one of {', '.join(GOODPUT_KEYS)}")
        try:
            ms = float(value)
        except ValueError:
            raise ValueError(f"--goodput: {key}'s limit {value!r} is not a number of milliseconds") from None
        if not ms > 0:
            raise ValueError(f"--goodput: {key}'s limit must be > 0 ms, got {value}")
        out[key] = ms
    return out


def summary_keys(percentiles: tuple[float, ...] = PERCENTILES) -> list[str]:
    """Every number a summary holds (what a gate may name)."""
    keys = ["completed", "failed", "request_throughput", "request_goodput", "total_audio_duration_s",
            "total_audio_frames", "audio_throughput", "audio_continuity_ok_rate", "max_concurrent_requests"]
    for name, (unit, _) in SUMMARIZED.items():
        keys += [f"{stat}_{name}{unit}" for stat in ("mean", "median", "std")]
        keys += [f"p{p_word(p)}_{name}{unit}" for p in percentiles]
    return keys


def p_word(p: float) -> str:
    """A percentile as the bench's keys spell it: 95 -> "95", 99.9 -> "99.9"."""
    return str(int(p)) if int(p) == p else str(p)


def summarize(rows: list[RequestRow], duration_s: float, goodput: dict[str, float] | None = None,
              percentiles: tuple[float, ...] = PERCENTILES) -> dict:
    """The run's figures in the layout of `vllm bench serve --save-result` (its audio keys)."""
    ok = [r for r in rows if r.success]
    failed = [r for r in rows if not r.success]
    good = sum(all(getattr(r, GOODPUT_KEYS[k]) <= ms / 1000.0 for k, ms in goodput.items()) for r in ok) if goodput else 0
    out: dict = {
        "duration": duration_s,
        "completed": len(ok),
        "failed": len(failed),
        "request_throughput": len(ok) / duration_s if duration_s > 0 else 0.0,
        "request_goodput": (good / duration_s if duration_s > 0 else 0.0) if goodput else None,
        "total_audio_duration_s": float(sum(r.audio_duration for r in ok)),
        "total_audio_frames": int(sum(r.audio_frames for r in ok)),
        "audio_throughput": float(sum(r.audio_duration for r in ok)) / duration_s if duration_s > 0 else 0.0,
        "audio_continuity_ok_rate": sum(r.audio_continuity_ok for r in ok) / len(ok) if ok else 1.0,
        "max_concurrent_requests": _max_concurrent(ok),
        "num_audio_ttfp_samples": len(ok),
        "num_audio_rtf_samples": len(ok),
    }
    for name, (unit, scale) in SUMMARIZED.items():
        values = np.asarray([getattr(r, name) for r in ok] or [0.0], dtype=float) * scale
        out[f"mean_{name}{unit}"] = float(np.mean(values))
        out[f"median_{name}{unit}"] = float(np.median(values))
        out[f"std_{name}{unit}"] = float(np.std(values))
        for p in percentiles:
            out[f"p{p_word(p)}_{name}{unit}"] = float(np.percentile(values, p))
    out["start_times"] = [r.start_time for r in rows]
    out["errors"] = [r.error for r in rows]
    out["failed_reasons"] = dict(Counter(r.error.splitlines()[0] if r.error else "" for r in failed))
    return out


def _max_concurrent(rows: list[RequestRow]) -> int:
    """The most requests in flight at once (the bench's max_concurrent_requests, counted exactly
    from the starts and ends instead of per-second buckets)."""
    events = sorted([(r.start_time, 1) for r in rows] + [(r.start_time + r.e2el, -1) for r in rows],
                    key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most
