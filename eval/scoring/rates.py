"""Counts of rare events, k of n, with Wilson score intervals.

A failure rate is a count: 0 of 30 runaways does not mean the rate is 0 (the bootstrap of 30
zeros gives [0, 0], a claim no sample of 30 supports). The Wilson 95% interval of k/n is

    centre = (k + z^2/2) / (n + z^2),  half = z / (n + z^2) * sqrt(k (n - k) / n + z^2 / 4)

with z = 1.96: for 0 of 30 it is [0, 11.4%], for 30 of 30 [88.6%, 100%], and it stays inside
[0, 1] where the normal approximation does not (Wilson 1927; Brown, Cai and DasGupta 2001
recommend it for small n).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

Z95 = 1.959963984540054


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of k successes in n trials; (nan, nan) for n = 0."""
    if n <= 0:
        return float("nan"), float("nan")
    if not 0 <= k <= n:
        raise ValueError(f"k must be in [0, n], got k={k}, n={n}")
    z2 = z * z
    centre = (k + z2 / 2) / (n + z2)
    half = z / (n + z2) * math.sqrt(k * (n - k) / n + z2 / 4)
    # The bounds at k = 0 and k = n are exactly 0 and 1 (centre = half there, up to rounding).
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return low, high


@dataclass(frozen=True)
class Count:
    """k of n utterances, their rate, its Wilson 95% interval and which utterances they were."""

    k: int
    n: int
    ids: tuple[str, ...] = field(default=())

    @classmethod
    def of(cls, flags: dict[str, bool | None]) -> "Count":
        """id -> flag (None: not measured for that utterance, left out of n)."""
        known = {i: bool(f) for i, f in flags.items() if f is not None}
        return cls(sum(known.values()), len(known), tuple(i for i, f in known.items() if f))

    @property
    def rate(self) -> float:
        return self.k / self.n if self.n else float("nan")

    def as_dict(self) -> dict:
        low, high = wilson(self.k, self.n)
        return {"k": self.k, "n": self.n, "rate": self.rate, "ci_low": low, "ci_high": high, "ids": list(self.ids)}
