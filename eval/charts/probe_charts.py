"""Charts of the onset-entropy probe (gepard_demo/model/guards/probe.py; eval/scoring/derail.py), with the
numbers drawn in a CSV beside each:

- `probe_prediction`: is "flagged by frame N" (derail.probe_at, N = 20, 50, 100) an early sign of
  the row's eventual outcome? Per outcome (runaway, catastrophic, force stop), precision = flagged
  rows that had it / flagged rows, recall = flagged rows that had it / rows that had it, each k/n
  with a Wilson 95% interval. A row that ended before frame N is not flagged (an early stop at N
  would never act on it); a row whose outcome is unknown (catastrophic needs ASR) is left out of
  that outcome's counts. These are the numbers to read before trusting an early stop on the probe.
- `entropy_curves`: the probe's entropy per frame, median and 25-75% band over the rows still
  running at that frame, runaways against the rest; the derail rule's onset window and threshold
  over the median onset drawn for reference.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from eval.charts.style import GREY, OKABE_ITO, finish, new_figure, save_chart, series_style
from eval.scoring.derail import DerailRule
from eval.scoring.rates import Count

PROBE_FRAMES = (20, 50, 100)
OUTCOMES = {"runaway": "fail_runaway", "catastrophic": "fail_catastrophic", "force_stop": "fail_force_stop"}


def _known(v) -> bool:
    return v is not None and not pd.isna(v)


def probe_prediction_data(df: pd.DataFrame) -> pd.DataFrame | None:
    """One line per (frame N, outcome): tp, fp, fn, tn and precision / recall as k/n with Wilson 95%."""
    rows = []
    for n in PROBE_FRAMES:
        col = f"probe_{n}"
        if col not in df:
            continue
        for outcome, fcol in OUTCOMES.items():
            if fcol not in df:
                continue
            pairs = [(bool(p), bool(o)) for p, o in zip(df[col], df[fcol]) if _known(p) and _known(o)]
            if not pairs or not any(o for _, o in pairs):
                continue  # nothing to predict: no row had this outcome (or none could be judged)
            tp = sum(p and o for p, o in pairs)
            fp = sum(p and not o for p, o in pairs)
            fn = sum(o and not p for p, o in pairs)
            prec, rec = Count(tp, tp + fp).as_dict(), Count(tp, tp + fn).as_dict()
            rows.append({"frame": n, "outcome": outcome, "n": len(pairs), "flagged": tp + fp, "had_outcome": tp + fn,
                         "tp": tp, "fp": fp, "fn": fn, "tn": len(pairs) - tp - fp - fn,
                         **{f"precision{k}": prec[key] for k, key in (("", "rate"), ("_low", "ci_low"), ("_high", "ci_high"))},
                         **{f"recall{k}": rec[key] for k, key in (("", "rate"), ("_low", "ci_low"), ("_high", "ci_high"))}})
    return pd.DataFrame(rows) if rows else None


def probe_prediction(df: pd.DataFrame, path, context=None):
    data = probe_prediction_data(df)
    if data is None:
        return None
    outcomes = list(dict.fromkeys(data["outcome"]))
    fig, axs = new_figure(1, len(outcomes), width=4.2 * len(outcomes) + 0.6, height=4.0)
    for ax, outcome in zip(axs[0], outcomes):
        d = data[data["outcome"] == outcome]
        for i, (what, label) in enumerate((("precision", "precision (flagged that had it)"),
                                           ("recall", "recall (had it and were flagged)"))):
            v = 100 * d[what].astype(float)
            err = [v - 100 * d[f"{what}_low"].astype(float), 100 * d[f"{what}_high"].astype(float) - v]
            x = np.arange(len(d)) + (i - 0.5) * 0.12
            ax.errorbar(x, v, yerr=np.nan_to_num(err), capsize=3, ls="-", label=label, **series_style(i))
        ax.set_xticks(np.arange(len(d)), [f"frame {n}" for n in d["frame"]])
        ax.set_ylim(-5, 105)
        ax.set_ylabel("% (Wilson 95% interval)")
        ax.set_title(f"{outcome.replace('_', ' ')}: {int(d['had_outcome'].iloc[0])} of {int(d['n'].iloc[0])} rows")
        ax.legend(fontsize=7)
    finish(fig, "Does the probe at frame N predict the outcome?", context,
           note="flagged at frame N: the mean entropy of the window before N is >= the derail rule's fraction of the "
                "onset's (eval/scoring/derail.py); rows that ended before N are not flagged")
    return save_chart(fig, path, data)


def entropy_curves_data(df: pd.DataFrame, most_frames: int = 300) -> pd.DataFrame | None:
    if "entropy" not in df:
        return None
    groups: dict[str, list[list[float]]] = {"runaway": [], "the rest": []}
    for e, f, r in zip(df["entropy"], df["frames"], df.get("runaway", pd.Series([None] * len(df), index=df.index))):
        if not isinstance(e, str) or not _known(f):
            continue
        trace = [np.nan if v is None else v for v in json.loads(e)[: int(f)]]
        groups["runaway" if _known(r) and bool(r) else "the rest"].append(trace)
    rows = []
    for name, traces in groups.items():
        length = min(max((len(t) for t in traces), default=0), most_frames)
        for i in range(length):
            at = np.array([t[i] for t in traces if len(t) > i], float)
            at = at[np.isfinite(at)]
            if len(at):
                q25, q50, q75 = np.percentile(at, [25, 50, 75])
                rows.append({"group": name, "frame": i, "rows": len(at), "median": q50, "q25": q25, "q75": q75})
    return pd.DataFrame(rows) if rows else None


def entropy_curves(df: pd.DataFrame, path, rule: DerailRule = DerailRule(), context=None):
    data = entropy_curves_data(df)
    if data is None:
        return None
    fig, axs = new_figure(1, 1, width=7.5, height=4.3)
    ax = axs[0][0]
    for i, (name, d) in enumerate(data.groupby("group", sort=False)):
        color = OKABE_ITO[5] if name == "runaway" else OKABE_ITO[0]
        ax.plot(d["frame"], d["median"], color=color, lw=1.6, label=f"{name}: median ({int(d['rows'].iloc[0])} rows)")
        ax.fill_between(d["frame"], d["q25"], d["q75"], color=color, alpha=0.2, lw=0, label=f"{name}: 25-75%")
    onset = data[data["frame"] < rule.onset_frames]["median"].median()
    if np.isfinite(onset):
        ax.axhline(rule.fraction * onset, color=GREY, ls="--", lw=1,
                   label=f"{rule.fraction:g} x the median onset (the derail threshold)")
    ax.axvspan(0, rule.onset_frames, color=GREY, alpha=0.1)
    ax.axvline(rule.judge_from, color=GREY, ls=":", lw=1, label=f"judged from frame {rule.judge_from}")
    ax.set_xlabel("frame (21.5 per second)")
    ax.set_ylabel("belief entropy, mean over 32 heads (nats)")
    ax.legend(fontsize=7)
    finish(fig, "The probe's entropy over the utterance: runaways against the rest", context,
           note="each frame: the rows still running there; a clean run's entropy drops within ~50 frames, a "
                "derailed one stays flat (MODEL_GUIDE §5.1); shaded: the onset window")
    return save_chart(fig, path, data)
