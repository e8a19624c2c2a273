"""When a newcomer may join the running batch: the cap, and on slow hardware, real time.

A stream is real time when every frame costs less than its own duration, 1 / 21.5 s = 46.4 ms.
In a running batch one step makes a frame for every request, so a frame of each stream costs the
step (the backbone over every row) plus that stream's codec decode of a frame, and on a CPU the
codecs of all streams share the cores with the step. The rule, with the costs measured as the
batch runs (`Costs`):

    frame_s(rows, streams) = step_s(rows) + streams x decode_s_per_frame <= headroom / 21.5

step_s(rows) is the measured mean at that row count, or, unmeasured, extrapolated from the
nearest measured one as if a step's cost grew with its rows (the worst case: compute-bound;
batching is nearly free where a step is memory-bound, which the measurements then show). A
newcomer's prefill also stalls the running streams for its duration, so it waits until each
running stream is at least that far ahead of real time (its frames' audio minus the time since
its first frame). On a GPU both hold up to the cap; on a CPU that is barely real time alone,
newcomers wait, and the wait line says why.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from gepard_demo.host_settings import BatchingSettings
from gepard_demo.units import FRAME_RATE_HZ

EMA = 0.2  # weight of a new measurement in the running means


class Costs:
    """Running means of what a step, a frame's decode and a prompt token's prefill cost here."""

    def __init__(self):
        self._lock = threading.Lock()  # decode times come from the streams' own threads
        self.step_s: dict[int, float] = {}  # backbone rows -> seconds a step took (running mean)
        self.decode_s_per_frame: float | None = None
        self.prefill_s_per_token: float | None = None
        self.step_totals: dict[int, list[float]] = {}  # rows -> [seconds, steps] over the whole run (reports)

    @staticmethod
    def _mean(old: float | None, new: float) -> float:
        return new if old is None else (1 - EMA) * old + EMA * new

    def note_step(self, rows: int, seconds: float) -> None:
        with self._lock:
            self.step_s[rows] = self._mean(self.step_s.get(rows), seconds)
            total = self.step_totals.setdefault(rows, [0.0, 0])
            total[0] += seconds
            total[1] += 1

    def note_decode(self, seconds: float, frames: int) -> None:
        if frames > 0:
            with self._lock:
                self.decode_s_per_frame = self._mean(self.decode_s_per_frame, seconds / frames)

    def note_prefill(self, seconds: float, tokens: int) -> None:
        if tokens > 0:
            with self._lock:
                self.prefill_s_per_token = self._mean(self.prefill_s_per_token, seconds / tokens)

    def predict_step(self, rows: int) -> float | None:
        """Seconds a step of `rows` rows takes: measured, else scaled from the nearest measured."""
        with self._lock:
            if rows in self.step_s:
                return self.step_s[rows]
            if not self.step_s:
                return None
            near = min(self.step_s, key=lambda r: (abs(r - rows), -r))
            return self.step_s[near] * max(rows, near) / near if rows > near else self.step_s[near]


@dataclass(frozen=True)
class Running:
    """What the rule needs of the batch as it is."""

    requests: int
    rows: int
    streams: int
    min_lead_s: float | None  # the running stream least ahead of real time (None: no stream)


@dataclass(frozen=True)
class Newcomer:
    rows: int  # 2 for a guided request (its guidance row), else 1
    prompt_tokens: int  # its prefill's tokens, guidance row included
    stream: bool  # someone listens to it in real time


def refusal(settings: BatchingSettings, costs: Costs, now: Running, new: Newcomer) -> str | None:
    """None: admit. Otherwise why the newcomer waits, in words for the wait line."""
    if now.requests + 1 > settings.max_batch:
        places = "its one place is" if settings.max_batch == 1 else f"all {settings.max_batch} places are"
        return f"{places} taken in the running batch (--max-batch {settings.max_batch})"
    if settings.admission == "cap" or now.requests == 0:
        return None
    streams = now.streams + (1 if new.stream else 0)
    if streams == 0:
        return None  # batch work only: nobody listens, the cap is the rule
    budget = settings.headroom / FRAME_RATE_HZ
    step = costs.predict_step(now.rows + new.rows)
    if step is not None:
        frame = step + streams * (costs.decode_s_per_frame or 0.0)
        if frame > budget:
            return (f"{streams} streams would fall behind real time here: {1000 * frame:.0f} ms a frame predicted "
                    f"(step {1000 * step:.0f} ms), {1000 / FRAME_RATE_HZ:.1f} ms is real time")
    if now.min_lead_s is not None and costs.prefill_s_per_token is not None:
        stall = new.prompt_tokens * costs.prefill_s_per_token
        if stall > now.min_lead_s:
            return (f"the running streams are {1000 * max(now.min_lead_s, 0):.0f} ms ahead of real time; the "
                    f"newcomer's prefill would stall them {1000 * stall:.0f} ms")
    return None
