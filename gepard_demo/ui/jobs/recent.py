"""The last few Generates' stats by job id: what the page's wait line and start buffer estimate
from, and what the latency benchmark and the tests read back. Any thread may note or read."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from gepard_demo.bounded import Bounded

if TYPE_CHECKING:
    from gepard_demo.streaming.chunks import SynthesisStats


class RecentRuns:
    def __init__(self, keep: int = 32):
        self._stats: Bounded[str, SynthesisStats] = Bounded(keep)
        self._lock = threading.Lock()

    def note(self, job_id: str, stats: SynthesisStats) -> None:
        with self._lock:
            self._stats[job_id] = stats

    def get(self, job_id: str) -> SynthesisStats | None:
        with self._lock:
            return self._stats.get(job_id)

    def typical_wall_s(self) -> float | None:
        """The median wall time of the runs kept (None before any)."""
        with self._lock:
            walls = sorted(st.wall_s for st in self._stats.values() if st.wall_s)
        return walls[len(walls) // 2] if walls else None

    def stream_rate(self) -> float | None:
        """Audio seconds made per wall second for one stream: the median of the last few
        single-segment runs (speech / wall, first-audio wait included: on the low side). A long
        text's speech / wall is its rows' pace together, not the pace its audio comes in order
        (streaming/segments.progress), so it is left out. None before any."""
        with self._lock:
            rates = sorted(st.speech_s / st.wall_s for st in list(self._stats.values())[-5:]
                           if st.wall_s and st.speech_s and not st.cancelled and st.segments == 1)
        return rates[len(rates) // 2] if rates else None
