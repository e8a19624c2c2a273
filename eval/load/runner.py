"""A load run: requests sent as `vllm bench serve` sends them, at one or several loads.

- Closed loop (`max_concurrency` N, rate inf): every request is released at once and N are in
  flight at a time, each next one as one ends.
- Open loop (`request_rate` R): request i+1 is released a gamma-distributed interval after
  request i (shape `burstiness`, mean 1/R: Poisson arrivals at burstiness 1, as the bench's
  get_request draws them), whether or not the earlier ones ended; `max_concurrency` caps both.
- A request's clock starts when it is sent (after the cap lets it through), as the bench's does.

A sweep runs its points one after another on one set of servers (a pool: request i goes to
server i mod n). Warm-ups are sent once, before the first point, and not measured. Each row is
appended to rows.jsonl as its request ends, so an interrupted run keeps every finished request.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from eval.load.client import LoadError, Server, check_server, send, stream_body
from eval.load.metrics import PERCENTILES, RequestRow, p_word, summarize


@dataclass(frozen=True)
class LoadConfig:
    """One load point; a sweep is several, differing in max_concurrency."""

    urls: tuple[str, ...]
    texts: tuple[str, ...]
    num_prompts: int = 12
    max_concurrency: int | None = 1  # None: no cap (an open loop at request_rate)
    request_rate: float = math.inf  # requests per second; inf releases them all at once
    burstiness: float = 1.0
    num_warmups: int = 1
    extra_body: dict = field(default_factory=dict)
    goodput: dict = field(default_factory=dict)  # metrics.parse_goodput's: SLO key -> ms
    percentiles: tuple[float, ...] = PERCENTILES
    seed: int = 0  # the open loop's intervals
    timeout_s: float = 600.0  # one request's longest silence before it counts as failed

    def __post_init__(self) -> None:
        self.validate()  # checked when made: no unchecked instance exists

    def validate(self) -> "LoadConfig":
        def bad(name: str, why: str) -> None:
            raise LoadError(f"--{name.replace('_', '-')}: {why}")

        if not self.urls:
            bad("url", "name at least one speech server")
        if not self.texts:
            bad("set", "the set has no texts")
        if self.num_prompts < 1:
            bad("num_prompts", f"must be at least 1, got {self.num_prompts}")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            bad("max_concurrency", f"must be at least 1, got {self.max_concurrency}")
        if not self.request_rate > 0:
            bad("request_rate", f"must be > 0 requests per second (inf: all at once), got {self.request_rate}")
        if self.max_concurrency is None and math.isinf(self.request_rate):
            bad("max_concurrency", "an open loop needs --request-rate; without one, name a concurrency")
        if not self.burstiness > 0:
            bad("burstiness", f"must be > 0, got {self.burstiness}")
        if self.num_warmups < 0:
            bad("num_warmups", f"must be >= 0, got {self.num_warmups}")
        if not self.timeout_s > 0:
            bad("timeout", f"must be > 0 s, got {self.timeout_s}")
        if not all(0 < p < 100 for p in self.percentiles):
            bad("percentiles", f"each must be in (0, 100), got {self.percentiles}")
        return self

    @property
    def label(self) -> str:
        """The point's name in rows, reports and gates: "concurrency 4", "rate 2", "rate 2, concurrency 4"."""
        parts = [] if math.isinf(self.request_rate) else [f"rate {self.request_rate:g}"]
        if self.max_concurrency is not None:
            parts.append(f"concurrency {self.max_concurrency}")
        return ", ".join(parts)

    def meta(self, servers: list[Server]) -> dict:
        """The run description `vllm bench serve --save-result` writes beside its figures."""
        return {"date": time.strftime("%Y%m%d-%H%M%S"), "backend": "openai-audio-speech",
                "endpoint": "/v1/audio/speech", "model_id": servers[0].model if servers else None,
                "servers": list(self.urls), "num_prompts": self.num_prompts,
                "request_rate": self.request_rate if math.isfinite(self.request_rate) else "inf",
                "burstiness": self.burstiness, "max_concurrency": self.max_concurrency, "label": self.label,
                "sample_rate": sorted({s.sample_rate for s in servers}), "extra_body": self.extra_body,
                "goodput": self.goodput or None, "percentiles": list(self.percentiles)}


@dataclass
class Point:
    config: LoadConfig
    rows: list[RequestRow]
    duration_s: float
    summary: dict


Sink = Callable[[LoadConfig, RequestRow], None]


def run_points(points: list[LoadConfig], on_row: Sink, log: Callable[[str], None] = print) -> list[Point]:
    """Check the servers, warm them up, then run each point in turn (raises LoadError before
    the first measured request when a server or the body is refused)."""
    return asyncio.run(_run(points, on_row, log))


async def _run(points: list[LoadConfig], on_row: Sink, log) -> list[Point]:
    import httpx

    first = points[0]
    timeout = httpx.Timeout(first.timeout_s, connect=10.0)
    async with httpx.AsyncClient(timeout=timeout, limits=httpx.Limits(max_connections=None)) as client:
        servers = [await check_server(client, url, first.texts[0], first.extra_body) for url in first.urls]
        log("servers: " + "; ".join(f"{s.url} ({s.model}, {s.sample_rate} Hz)" for s in servers))
        if first.num_warmups:
            warm = dataclasses.replace(first, num_prompts=first.num_warmups, request_rate=math.inf,
                                       max_concurrency=min(first.max_concurrency or first.num_warmups, first.num_warmups))
            rows, _ = await _point(client, warm, servers, lambda row: None)
            failed = [r for r in rows if not r.success]
            if failed:
                raise LoadError(f"a warm-up request failed: {failed[0].error}")
            log(f"warm-up: {len(rows)} requests")
        done = []
        for cfg in points:
            rows, duration = await _point(client, cfg, servers, lambda row, c=cfg: on_row(c, row))
            summary = {**cfg.meta(servers), **summarize(rows, duration, cfg.goodput, cfg.percentiles)}
            done.append(Point(cfg, rows, duration, summary))
            log(line(summary))
        return done


async def _point(client, cfg: LoadConfig, servers: list[Server], on_row) -> tuple[list[RequestRow], float]:
    cap = asyncio.Semaphore(cfg.max_concurrency) if cfg.max_concurrency else None
    rng = np.random.default_rng(cfg.seed)
    t_run = time.perf_counter()

    async def one(i: int) -> RequestRow:
        server = servers[i % len(servers)]
        text = cfg.texts[i % len(cfg.texts)]
        row = RequestRow(index=i, text=text, server=server.url, start_time=0.0)
        body = stream_body(text, server.model, cfg.extra_body)
        if cap is None:
            await send(client, server, body, row, t_run)
        else:
            async with cap:
                await send(client, server, body, row, t_run)
        on_row(row)
        return row

    tasks = []
    for i in range(cfg.num_prompts):
        if i and math.isfinite(cfg.request_rate):
            await asyncio.sleep(float(rng.gamma(cfg.burstiness, 1.0 / (cfg.request_rate * cfg.burstiness))))
        tasks.append(asyncio.create_task(one(i)))
    try:
        rows = await asyncio.gather(*tasks)
    finally:
        for t in tasks:  # an interrupted point hangs up on the requests still in flight
            t.cancel()
    return list(rows), time.perf_counter() - t_run


def line(s: dict) -> str:
    """One point in one line, for the log (the median and the highest percentile measured)."""
    p = p_word(max(s["percentiles"]))
    return (f"{s['label']}: {s['completed']} done, {s['failed']} failed in {s['duration']:.1f} s; "
            f"audio_ttfp p50 {s['median_audio_ttfp_ms']:.0f} ms, p{p} {s[f'p{p}_audio_ttfp_ms']:.0f} ms; "
            f"audio_rtf p50 {s['median_audio_rtf']:.2f}; underrun p{p} {s[f'p{p}_audio_underrun_s']:.2f} s; "
            f"continuity OK {s['audio_continuity_ok_rate']:.0%}; audio throughput {s['audio_throughput']:.1f} s/s")
