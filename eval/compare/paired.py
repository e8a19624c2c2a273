"""Paired statistics for two runs over the same sentences: every interval is for the difference.

Two runs of one set share their sentences (and, with --seeds K, their seeds), so each figure's
change is estimated on the pairs, not from two independent samples:

- a ratio (corpus WER = sum of edits / sum of reference words) or a mean (mean per-utterance WER,
  DNSMOS, duration ratio, ...): a paired percentile bootstrap that resamples *sentences* (a
  sentence's samples stay together, as make-speech-benchmark's cluster bootstrap does; with one
  sample each that is the plain paired bootstrap), 2000 replicates, a fixed seed;
- a rate of events (a failure entry): the rates' difference new - base with Newcombe's interval
  for paired proportions (his method 10: Wilson intervals of both margins, combined through the
  pairs' correlation; Newcombe 1998), and McNemar's counts: `worse` = pairs that failed only in
  the new run, `better` = only in the base, with the exact two-sided McNemar p-value. With several
  samples per sentence the pairs are not independent, so the interval is the cluster bootstrap's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from eval.scoring.bootstrap import DEFAULT_REPLICATES, DEFAULT_SEED
from eval.scoring.rates import wilson

ALPHA = 0.05


@dataclass(frozen=True)
class Delta:
    """new - base of one figure, with its 95% interval; `worse`/`better`/`p` for rates of events."""

    base: float
    new: float
    delta: float
    low: float
    high: float
    n: int  # pairs (rows) compared
    worse: int | None = None  # pairs failing only in the new run (McNemar's discordant counts)
    better: int | None = None
    p: float | None = None  # exact McNemar two-sided p-value

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def _groups(clusters: np.ndarray) -> tuple[np.ndarray, int]:
    _, inverse = np.unique(clusters, return_inverse=True)
    return inverse, int(inverse.max()) + 1 if len(inverse) else 0


def _draws(n_clusters: int, replicates: int, seed: int) -> np.ndarray:
    """(replicates, clusters) counts: how often each sentence is drawn in each replicate."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n_clusters, size=(replicates, n_clusters))
    counts = np.zeros((replicates, n_clusters))
    np.add.at(counts, (np.arange(replicates)[:, None], idx), 1)
    return counts


def _interval(reps: np.ndarray) -> tuple[float, float]:
    reps = reps[np.isfinite(reps)]
    if reps.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.quantile(reps, [ALPHA / 2, 1 - ALPHA / 2])
    return float(lo), float(hi)


def _per_cluster(values: np.ndarray, inverse: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros(k)
    np.add.at(out, inverse, values)
    return out


def ratio_delta(num_a, den_a, num_b, den_b, clusters, replicates: int = DEFAULT_REPLICATES,
                seed: int = DEFAULT_SEED) -> Delta:
    """sum(num_b)/sum(den_b) - sum(num_a)/sum(den_a) (corpus WER, CER), sentences resampled."""
    na, da, nb, db = (np.asarray(x, float) for x in (num_a, den_a, num_b, den_b))
    inverse, k = _groups(np.asarray(clusters))
    draws = _draws(k, replicates, seed)
    sums = [_per_cluster(x, inverse, k) for x in (na, da, nb, db)]
    ra, rb = na.sum() / da.sum(), nb.sum() / db.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        reps = draws @ sums[2] / (draws @ sums[3]) - draws @ sums[0] / (draws @ sums[1])
    low, high = _interval(reps)
    return Delta(float(ra), float(rb), float(rb - ra), low, high, len(na))


def mean_delta(a, b, clusters, replicates: int = DEFAULT_REPLICATES, seed: int = DEFAULT_SEED) -> Delta:
    """mean(b) - mean(a) over the pairs (a figure per utterance), sentences resampled."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    inverse, k = _groups(np.asarray(clusters))
    draws = _draws(k, replicates, seed)
    counts, sa, sb = (_per_cluster(x, inverse, k) for x in (np.ones(len(a)), a, b))
    with np.errstate(divide="ignore", invalid="ignore"):
        reps = (draws @ sb - draws @ sa) / (draws @ counts)
    low, high = _interval(reps)
    return Delta(float(a.mean()), float(b.mean()), float(b.mean() - a.mean()), low, high, len(a))


def rate_delta(a, b, clusters, replicates: int = DEFAULT_REPLICATES, seed: int = DEFAULT_SEED) -> Delta:
    """Rate of an event in new - in base, over paired rows (booleans): Newcombe's paired interval
    with one row per sentence, the cluster bootstrap with several; McNemar's counts and p."""
    a, b = np.asarray(a, bool), np.asarray(b, bool)
    n = len(a)
    both, worse, better = int((a & b).sum()), int((~a & b).sum()), int((a & ~b).sum())
    neither = n - both - worse - better
    pa, pb = (both + better) / n, (both + worse) / n
    if len(np.unique(np.asarray(clusters))) < n:  # several samples per sentence
        d = mean_delta(a.astype(float), b.astype(float), clusters, replicates, seed)
        low, high = d.low, d.high
    else:
        low, high = newcombe_paired(both, better, worse, neither)
    return Delta(pa, pb, pb - pa, low, high, n, worse, better, mcnemar_p(worse, better))


def newcombe_paired(both: int, base_only: int, new_only: int, neither: int) -> tuple[float, float]:
    """95% interval of p_new - p_base from paired counts (Newcombe 1998, method 10)."""
    n = both + base_only + new_only + neither
    if n == 0:
        return float("nan"), float("nan")
    kb, kn = both + base_only, both + new_only
    pb, pn = kb / n, kn / n
    lb, ub = wilson(kb, n)
    ln, un = wilson(kn, n)
    den = math.sqrt((kb) * (n - kb) * (kn) * (n - kn))
    if den == 0:
        phi = 0.0
    else:
        ad_bc = both * neither - base_only * new_only
        phi = (max(ad_bc - n / 2, 0.0) if ad_bc > 0 else ad_bc) / den  # Newcombe's continuity step
    delta = math.sqrt(max(0.0, (pn - ln) ** 2 - 2 * phi * (pn - ln) * (ub - pb) + (ub - pb) ** 2))
    eps = math.sqrt(max(0.0, (un - pn) ** 2 - 2 * phi * (un - pn) * (pb - lb) + (pb - lb) ** 2))
    d = pn - pb
    return max(-1.0, d - delta), min(1.0, d + eps)


def mcnemar_p(worse: int, better: int) -> float:
    """Exact two-sided McNemar p-value: the discordant pairs as Binomial(worse + better, 1/2)."""
    m = worse + better
    if m == 0:
        return 1.0
    tail = sum(math.comb(m, i) for i in range(min(worse, better) + 1)) / 2**m
    return min(1.0, 2 * tail)
