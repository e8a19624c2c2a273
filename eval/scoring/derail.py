"""Derailment from the onset-entropy probe: a rule with thresholds a researcher sets.

The probe (gepard_demo/model/guards/probe.py) gives, per committed frame, the mean belief entropy over
the 32 heads. The authors (gepard-train MODEL_GUIDE §5.1): a clean utterance's entropy "drops
rapidly within the first 50 frames as the model locks onto speech"; a derailed one "remains flat
and elevated". The rule here (`DerailRule`, defaults in brackets):

- onset = the mean entropy over frames [0, onset_frames) [10];
- a row is **derailed** when some window of `window` [20] frames ending at frame t, for
  t = judge_from [60], judge_from + window, judge_from + 2 x window, ... up to the row's frames,
  has a mean entropy >= fraction [0.8] x onset. A flat trace (never dropped) is caught at its
  first window, a late derailment (a drop, then a rise back) at the window where it rose;
- a row with fewer than judge_from frames is **not judged** (None; left out of n): it ended before
  the rule could tell a settled run from a flat one. So is a row without a trace (Piper, files,
  a server that sends none) or with onset 0.

`probe_at(entropy, n)` is the same window test at frame n alone (the window
[max(onset_frames, n - window), n)): what an early stop acting at frame n would see. A row that
ended before frame n is "not flagged" there (an early stop at n never acts on it).

Only committed frames count: the trace is cut to the row's frames (the stop step's own belief,
which commits nothing, is not a frame). Windows are whole: frames after the last full window are
not judged (at most window - 1 of them).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TypedDict


class DerailRuleError(ValueError):
    """A derail threshold out of its range (the CLI exits 2 on it, naming the flag's setting)."""


@dataclass(frozen=True)
class DerailRule:
    fraction: float = 0.8  # a window at or above this share of the onset entropy has not settled
    judge_from: int = 60  # the first window ends here; shorter rows are not judged
    window: int = 20  # frames per window (21.5 frames a second: about 0.9 s)
    onset_frames: int = 10  # the onset: frames [0, onset_frames)

    def __post_init__(self) -> None:
        self.validate()  # checked when made: no unchecked instance exists

    def validate(self) -> "DerailRule":
        if not (isinstance(self.fraction, (int, float)) and 0 < self.fraction <= 10):
            raise DerailRuleError(f"derail fraction must be in (0, 10] (a share of the onset entropy), got {self.fraction}")
        if not (isinstance(self.onset_frames, int) and self.onset_frames >= 1):
            raise DerailRuleError(f"derail onset frames must be a whole number >= 1, got {self.onset_frames}")
        if not (isinstance(self.window, int) and self.window >= 1):
            raise DerailRuleError(f"derail window must be a whole number of frames >= 1, got {self.window}")
        if not (isinstance(self.judge_from, int) and self.judge_from >= self.onset_frames + self.window):
            raise DerailRuleError(f"derail judge_from must be >= onset frames + window = {self.onset_frames + self.window} "
                             f"(its first window must lie after the onset), got {self.judge_from}")
        return self

    def as_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        return (f"mean probe entropy over a {self.window}-frame window ending at frame {self.judge_from}, "
                f"{self.judge_from + self.window}, ... >= {self.fraction:g} x its mean over frames 0-{self.onset_frames - 1} "
                f"(the onset); rows under {self.judge_from} frames are not judged (eval/scoring/derail.py)")


def _mean(values: list[float]) -> float | None:
    good = [v for v in values if v is not None and math.isfinite(v)]
    return sum(good) / len(good) if good and len(good) == len(values) else None


def onset(entropy: list[float], rule: DerailRule) -> float | None:
    if len(entropy) < rule.onset_frames:
        return None
    m = _mean(list(entropy[: rule.onset_frames]))
    return m if m is not None and m > 0 else None


class Verdict(TypedDict):
    """One row's judgement: its keys become the report's columns (eval/report/columns.py)."""

    derail: bool | None
    derail_ratio: float | None
    derail_at: int | None


def judge(entropy: list[float] | None, frames: int | None, rule: DerailRule = DerailRule()) -> Verdict:
    """{"derail": True / False / None, "derail_ratio": the highest window mean / onset (None: not
    judged), "derail_at": the end frame of the first window over the threshold (None: none)}."""
    out: Verdict = {"derail": None, "derail_ratio": None, "derail_at": None}
    if not entropy or frames is None:
        return out
    trace = list(entropy[: int(frames)])
    start = onset(trace, rule)
    if start is None:  # (a row under judge_from frames has no whole window below: not judged)
        return out
    ratios = []
    for t in range(rule.judge_from, len(trace) + 1, rule.window):
        m = _mean(trace[t - rule.window: t])
        if m is None:
            continue
        ratios.append(m / start)
        if out["derail_at"] is None and m >= rule.fraction * start:
            out["derail_at"] = t
    if not ratios:
        return out
    out["derail"] = out["derail_at"] is not None
    out["derail_ratio"] = round(max(ratios), 4)
    return out


def probe_at(entropy: list[float] | None, frames: int | None, n: int, rule: DerailRule = DerailRule()) -> bool | None:
    """Flagged by frame n: the window [max(onset_frames, n - window), n) has a mean >= fraction x
    onset. False for a row that ended before frame n; None without a trace (or n inside the onset)."""
    if not entropy or frames is None or n <= rule.onset_frames:
        return None
    trace = list(entropy[: int(frames)])
    if len(trace) < n:
        return False
    start = onset(trace, rule)
    if start is None:
        return None
    m = _mean(trace[max(rule.onset_frames, n - rule.window): n])
    return None if m is None else m >= rule.fraction * start


def add_derail_flags(p) -> None:
    """--derail-fraction / --derail-from / --derail-window / --derail-onset (argparse), each unset by default."""
    g = p.add_argument_group("derail rule (eval/scoring/derail.py; unset: the defaults)")
    d = DerailRule()
    g.add_argument("--derail-fraction", type=float, default=None,
                   help=f"a window at or above this share of the onset entropy has not settled (default {d.fraction:g})")
    g.add_argument("--derail-from", type=int, default=None,
                   help=f"the first judged window ends at this frame; shorter rows are not judged (default {d.judge_from})")
    g.add_argument("--derail-window", type=int, default=None, help=f"frames per window (default {d.window})")
    g.add_argument("--derail-onset", type=int, default=None, help=f"onset frames [0, N) (default {d.onset_frames})")


def rule_from_args(args) -> DerailRule:
    """The rule the flags give (ValueError naming the bad one)."""
    given = {"fraction": getattr(args, "derail_fraction", None), "judge_from": getattr(args, "derail_from", None),
             "window": getattr(args, "derail_window", None), "onset_frames": getattr(args, "derail_onset", None)}
    return DerailRule(**{k: v for k, v in given.items() if v is not None})
