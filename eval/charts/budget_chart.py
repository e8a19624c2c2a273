"""The token-budget curve (gepard-train MODEL_GUIDE §5.3): failure rates against the text's length
in tokens, the text once (before the prompt repeats a short one; rows carry `text_tokens` where
the engine tokenizes: local, local-stream).

Bins: every count from 1 to 12 tokens on its own (where the authors found the cliff: 60-96%
failures at <= 6 tokens, falling over 7-12), then 13-24 and 25+ (their plateau: under 5%). Per bin
and measure (the failure table's catastrophic, runaway, derail and any), k of n rows with a
Wilson 95% interval; n counts the rows the measure could be judged on (catastrophic needs ASR,
derail a probe trace), so measures can have different n in one bin. The built-in `short` set
(80+ texts of 1-12 tokens) fills the cliff's bins; `core` has few of them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from eval.charts.style import finish, new_figure, save_chart, series_style
from eval.scoring.rates import Count

TOKEN_BINS = (*((n, n) for n in range(1, 13)), (13, 24), (25, 10_000))
BUDGET_MEASURES = ("catastrophic", "runaway", "derail", "any")


def bin_label(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}-{hi}" if hi < 10_000 else f"{lo}+"


def token_budget_data(df: pd.DataFrame) -> pd.DataFrame | None:
    """One line per (bin, measure) with rows in it: k, n, rate, ci_low, ci_high."""
    if "text_tokens" not in df or df["text_tokens"].isna().all() or "fail_any" not in df:
        return None
    rows = []
    for lo, hi in TOKEN_BINS:
        in_bin = df[(df["text_tokens"] >= lo) & (df["text_tokens"] <= hi)]
        for m in BUDGET_MEASURES:
            col = f"fail_{m}"
            if col not in in_bin:
                continue
            flags = [bool(v) for v in in_bin[col] if v is not None and not pd.isna(v)]
            if flags:
                c = Count(sum(flags), len(flags)).as_dict()
                rows.append({"tokens": bin_label(lo, hi), "lo": lo, "measure": m, "k": c["k"], "n": c["n"],
                             "rate": c["rate"], "ci_low": c["ci_low"], "ci_high": c["ci_high"]})
    return pd.DataFrame(rows) if rows else None


def token_budget(df: pd.DataFrame, path, context=None):
    data = token_budget_data(df)
    if data is None:
        return None
    bins = list(dict.fromkeys(data.sort_values("lo")["tokens"]))
    fig, axs = new_figure(1, 1, width=8.0, height=4.4)
    ax = axs[0][0]
    measures = [m for m in BUDGET_MEASURES if m in set(data["measure"])]
    for i, m in enumerate(measures):
        d = data[data["measure"] == m].set_index("tokens").reindex(bins)
        x = np.arange(len(bins)) + (i - (len(measures) - 1) / 2) * 0.12
        v = 100 * d["rate"].to_numpy(float)
        err = [v - 100 * d["ci_low"].to_numpy(float), 100 * d["ci_high"].to_numpy(float) - v]
        ax.errorbar(x, v, yerr=np.nan_to_num(err), capsize=2, lw=1.2, label=m, **series_style(i))
    ns = data[data["measure"] == "any"].set_index("tokens")["n"].reindex(bins)
    ax.set_xticks(np.arange(len(bins)), [f"{b}\nn={int(n)}" if n == n else b for b, n in zip(bins, ns)], fontsize=7)
    ax.set_ylim(-5, 105)
    ax.set_xlabel("text length (tokens, the text once)")
    ax.set_ylabel("utterances failing (%)")
    ax.legend(fontsize=7, title="failure-table entry", title_fontsize=7)
    finish(fig, "The token budget: failures against text length", context,
           note="k/n per bin with Wilson 95% intervals (n under each bin: rows judged for 'any'); the authors: 60-96% "
                "failures at <= 6 tokens, under 5% from 13 (MODEL_GUIDE §5.3)")
    return save_chart(fig, path, data)
