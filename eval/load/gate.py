"""A load gate: the figures a deployment must hold, per load point (YAML, beside compare's).

    "concurrency 4":              # the point measured at --max-concurrency 4
      p95_audio_ttfp_ms: "<= 500"
      audio_continuity_ok_rate: ">= 0.99"
    "*":                          # every point of the run
      failed: "<= 0"

A point is named as the run names it (runner.LoadConfig.label: "concurrency 4", "rate 2",
"rate 2, concurrency 4"). A figure is any number of the summary (metrics.summary_keys: the
bench's names, with the run's percentiles). Unlike compare's gate this one is a bound on one
run's figure, not on a change between runs: load figures have no pairs to test. A gate naming
a figure the summary does not have, or a point the run does not measure, is refused before
anything is sent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from eval.load.client import LoadError
from eval.load.metrics import summary_keys

_BOUND = re.compile(r"^\s*(<=|>=)\s*([-+0-9.eE]+)\s*$")
EVERY = "*"


@dataclass(frozen=True)
class Bound:
    point: str
    metric: str
    op: str  # "<=" or ">="
    limit: float

    def holds(self, value: float) -> bool:
        return value <= self.limit if self.op == "<=" else value >= self.limit


@dataclass(frozen=True)
class LoadGate:
    bounds: tuple[Bound, ...]

    @classmethod
    def load(cls, path: str | Path, percentiles: tuple[float, ...]) -> "LoadGate":
        try:
            raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise LoadError(f"--gate {path}: {exc}") from None
        return cls.parse(raw, percentiles, f"--gate {path}")

    @classmethod
    def parse(cls, raw, percentiles: tuple[float, ...], where: str = "the gate") -> "LoadGate":
        if not isinstance(raw, dict):
            raise LoadError(f"{where}: expected a point (\"concurrency 4\", \"*\") -> its bounds, got {raw!r}")
        known = summary_keys(percentiles)
        bounds = []
        for point, limits in raw.items():
            if not isinstance(limits, dict):
                raise LoadError(f"{where}: {point!r} must map figures to bounds like \"<= 500\"")
            for metric, bound in limits.items():
                if metric not in known:
                    raise LoadError(f"{where}: {point!r}: unknown figure {metric!r} (known: {', '.join(known)})")
                m = _BOUND.match(str(bound))
                if not m:
                    raise LoadError(f"{where}: {point!r}: {metric}'s bound must be \"<= N\" or \">= N\", got {bound!r}")
                bounds.append(Bound(str(point), metric, m.group(1), float(m.group(2))))
        return cls(tuple(bounds))

    def check_run(self, labels: list[str], goodput: bool) -> None:
        """Refuse a gate naming a point this run does not measure, or a goodput it has no SLO
        for (before the run)."""
        for b in self.bounds:
            if b.metric == "request_goodput" and not goodput:
                raise LoadError("the gate bounds request_goodput, which needs --goodput (its SLOs)")
            if b.point != EVERY and b.point not in labels:
                raise LoadError(f"the gate names point {b.point!r}, which this run does not measure "
                                f"(it measures: {', '.join(labels)})")

    def breaches(self, summaries: list[dict]) -> list[str]:
        """Each bound a measured point breaks, in words (empty: the gate holds)."""
        out = []
        for s in summaries:
            for b in self.bounds:
                if b.point in (EVERY, s["label"]) and not b.holds(float(s[b.metric])):
                    out.append(f"{s['label']}: {b.metric} = {s[b.metric]:.4g}, the gate wants {b.op} {b.limit:g}")
        return out
