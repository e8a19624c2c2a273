"""Percentile bootstrap confidence intervals over utterances.

Resampling unit: the utterance. A corpus WER replicate is sum(errors[idx]) / sum(n_ref[idx])
over one resample idx (with replacement, same size), so long sentences weigh by their words
as in the point estimate. 95% interval = the 2.5th and 97.5th percentiles of the replicates.
The generator is numpy's PCG64 seeded with `seed`: same inputs and seed, same interval.
Paired bootstrap (compare): one index draw is applied to both runs over their common ids,
so the interval is for the difference, not for two independent samples.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_REPLICATES = 2000
DEFAULT_SEED = 20260101
ALPHA = 0.05


@dataclass(frozen=True)
class Interval:
    value: float
    low: float
    high: float

    def as_dict(self) -> dict:
        return {"value": self.value, "ci_low": self.low, "ci_high": self.high}


def _indices(n: int, replicates: int, seed: int) -> np.ndarray:
    if n <= 0:
        raise ValueError("bootstrap needs at least one utterance")
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, size=(replicates, n))


def _interval(value: float, reps: np.ndarray) -> Interval:
    reps = reps[np.isfinite(reps)]
    if reps.size == 0:
        return Interval(value, float("nan"), float("nan"))
    lo, hi = np.quantile(reps, [ALPHA / 2, 1 - ALPHA / 2])
    return Interval(float(value), float(lo), float(hi))


def ratio_ci(num, den, replicates: int = DEFAULT_REPLICATES, seed: int = DEFAULT_SEED) -> Interval:
    """CI of sum(num) / sum(den), e.g. corpus WER with num = errors, den = reference words."""
    num, den = np.asarray(num, float), np.asarray(den, float)
    idx = _indices(len(num), replicates, seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        reps = num[idx].sum(1) / den[idx].sum(1)
        value = num.sum() / den.sum() if den.sum() > 0 else float("nan")
    return _interval(value, reps)


def mean_ci(values, replicates: int = DEFAULT_REPLICATES, seed: int = DEFAULT_SEED) -> Interval:
    """CI of the mean (a rate when values are 0/1)."""
    v = np.asarray(values, float)
    idx = _indices(len(v), replicates, seed)
    return _interval(float(v.mean()), v[idx].mean(1))


def paired_ratio_diff_ci(num_a, den_a, num_b, den_b, replicates: int = DEFAULT_REPLICATES,
                         seed: int = DEFAULT_SEED) -> Interval:
    """CI of sum(num_b)/sum(den_b) - sum(num_a)/sum(den_a), rows paired by position."""
    na, da, nb, db = (np.asarray(x, float) for x in (num_a, den_a, num_b, den_b))
    if not (len(na) == len(da) == len(nb) == len(db)):
        raise ValueError("paired bootstrap needs rows aligned one to one")
    idx = _indices(len(na), replicates, seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        reps = nb[idx].sum(1) / db[idx].sum(1) - na[idx].sum(1) / da[idx].sum(1)
    value = nb.sum() / db.sum() - na.sum() / da.sum()
    return _interval(float(value), reps)


def paired_mean_diff_ci(a, b, replicates: int = DEFAULT_REPLICATES, seed: int = DEFAULT_SEED) -> Interval:
    """CI of mean(b) - mean(a), rows paired by position."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) != len(b):
        raise ValueError("paired bootstrap needs rows aligned one to one")
    d = b - a
    idx = _indices(len(d), replicates, seed)
    return _interval(float(d.mean()), d[idx].mean(1))
