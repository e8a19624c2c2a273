"""Several samples per sentence (`--seeds K`): does a sentence always fail, or fail by chance?

The authors found Gepard's failures to be sampling instability: over several sampled rollouts of
a sentence the minimum WER stays zero (gepard-train docs/MODEL_GUIDE.md §5.1). With K
samples of every sentence:

- p_fail of a sentence: the share of its samples with any failure (eval/report/failures.py);
  always / sometimes / never: how many sentences fail in all, some, none of their samples.
- wer_single_sample: corpus WER of sample 0 of every sentence (what a one-sample run reports),
  with a bootstrap CI over sentences.
- wer_best_of_k: corpus WER when every sentence keeps its sample with the fewest word errors:
  the floor resampling could reach.
- duration_spread_s, f0_spread_hz: for every sentence the standard deviation of its samples'
  duration (and F0 median), the median over sentences: how much a seed changes the reading.
- wer_best_by_reward: corpus WER when every sentence keeps its sample with the highest reward
  (the authors' score.py, eval/scoring/reward.py; ties: the lower sample): the best of K a
  reranker that reads only the transcript and the length would pick, where best-of-K above
  needs the reference.
- oracle_wer / mean_wer: the mean over sentences of their samples' minimum (the oracle) and mean
  per-utterance WER: MODEL_GUIDE §5.1's "the minimum WER across multiple rollouts remains zero"
  is an oracle WER near 0 beside a high mean.
- reward_best / reward_mean: the mean over sentences of their best and mean reward;
  any_clean: sentences with at least one clean sample (k/n, Wilson 95%): what a DPO stage needs
  to have a "chosen" rollout for the sentence.
- worst: the sentences with the highest p_fail (then highest mean WER), for the report.
Every bootstrap CI elsewhere in a multi-sample summary resamples sentences (summary.py).
"""

from __future__ import annotations

from typing import TypedDict

import pandas as pd

from eval.report.failures import flags
from eval.scoring.bootstrap import ratio_ci
from eval.scoring.rates import Count


class _Always(TypedDict):
    """summary.json's "seeds" but its worst sentences (the module docstring says what each key is):
    the keys every run has."""

    samples_per_sentence: int
    sentences: int
    p_fail_mean: float
    always_fail: int
    sometimes_fail: int
    never_fail: int
    duration_spread_s: float
    f0_spread_hz: float | None


class _Measures(_Always, total=False):
    """And those there only when the run has the columns they need (NotRequired is 3.11's)."""

    wer_single_sample: dict  # Interval.as_dict() (eval/scoring/bootstrap.py)
    wer_best_of_k: dict
    oracle_wer: float
    mean_wer: float
    wer_best_by_reward: dict
    reward_best: float
    reward_mean: float
    any_clean: dict  # Count.as_dict() (eval/scoring/rates.py)


class SeedsSummary(_Measures):
    worst: list[dict[str, object]]  # {"sentence", "p_fail", "samples", "wer_mean", "wer_min", "reward_best"}


def seeds_summary(df: pd.DataFrame, replicates: int, seed: int, worst: int = 10) -> SeedsSummary | None:
    if "sentence" not in df or df["sentence"].isna().any() or df["sentence"].nunique() == len(df):
        return None
    d = df.assign(failed=flags(df)["any"].astype("boolean"))
    per = d.groupby("sentence", sort=True)
    p_fail = per["failed"].mean()
    out: _Measures = {
        "samples_per_sentence": int(per.size().median()), "sentences": int(per.ngroups),
        "p_fail_mean": float(p_fail.mean()),
        "always_fail": int((p_fail == 1).sum()), "sometimes_fail": int(((p_fail > 0) & (p_fail < 1)).sum()),
        "never_fail": int((p_fail == 0).sum()),
        "duration_spread_s": float(per["duration_s"].std().median()),
        "f0_spread_hz": float(per["f0_median_hz"].std().median()) if "f0_median_hz" in d else None,
    }
    if "errors" in d and d["errors"].notna().any():
        scored = d[d["errors"].notna()]
        first = scored[scored["sample"] == 0]
        best = scored.loc[scored.groupby("sentence")["errors"].idxmin()]
        out["wer_single_sample"] = ratio_ci(first["errors"], first["n_ref"], replicates, seed).as_dict()
        out["wer_best_of_k"] = ratio_ci(best["errors"], best["n_ref"], replicates, seed).as_dict()
        per_wer = scored.groupby("sentence")["wer"]
        out["oracle_wer"], out["mean_wer"] = float(per_wer.min().mean()), float(per_wer.mean().mean())
    if "reward" in d and d["reward"].notna().any():
        rw = d[d["reward"].notna()].sort_values(["sentence", "sample"])
        picked = rw.loc[rw.groupby("sentence")["reward"].idxmax()]
        if "errors" in picked and picked["errors"].notna().all():
            out["wer_best_by_reward"] = ratio_ci(picked["errors"], picked["n_ref"], replicates, seed).as_dict()
        per_r = rw.groupby("sentence")["reward"]
        out["reward_best"], out["reward_mean"] = float(per_r.max().mean()), float(per_r.mean().mean())
        clean = rw.groupby("sentence")["clean"].apply(lambda c: bool(c.fillna(False).astype(bool).any()))
        out["any_clean"] = Count(int(clean.sum()), int(clean.size)).as_dict()
    table = pd.DataFrame({"p_fail": p_fail, "samples": per.size(),
                          "wer_mean": per["wer"].mean() if "wer" in d else None,
                          "wer_min": per["wer"].min() if "wer" in d else None,
                          "reward_best": per["reward"].max() if "reward" in d else None})
    table = table.sort_values(["p_fail", "wer_mean"], ascending=False).head(worst)
    return SeedsSummary(**out, worst=[{"sentence": s, **{k: (None if pd.isna(v) else float(v)) for k, v in r.items()}}
                                      for s, r in table.iterrows()])
