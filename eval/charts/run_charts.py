"""PNG charts of one run (matplotlib, Agg backend), each with a CSV of its numbers beside it.

Style, titles and the run-context subtitle: eval.charts.style. Each chart has a `*_figure`
function returning the matplotlib figure (tests read what was drawn) and a writer.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from eval.charts.budget_chart import token_budget
from eval.charts.probe_charts import entropy_curves, probe_prediction
from eval.charts.style import GREY, OKABE_ITO, RunContext, finish, new_figure, save_chart
from eval.scoring.derail import DerailRule
from eval.scoring.metrics import OVERLONG_RATIO, TRUNCATION_RATIO
from gepard_demo.model.guards.stop_rule import THRESHOLD
from gepard_demo.units import EXPECTED_BASE_S, EXPECTED_PER_WORD_S, FRAME_RATE_HZ, expected_speech_s



def save_figure(fig, path: Path) -> Path:
    """Write a PNG atomically (a report never links a half-written chart) and free the figure."""
    import matplotlib.pyplot as plt

    from eval.jsonio import replace_atomic

    replace_atomic(Path(path), lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    plt.close(fig)
    return Path(path)


def wer_by_category_data(summary: dict) -> pd.DataFrame | None:
    cats = {c: s["wer_corpus"] for c, s in summary["by_category"].items() if "wer_corpus" in s}
    if not cats:
        return None
    rows = [{"category": c, "wer": w["value"], "ci_low": w["ci_low"], "ci_high": w["ci_high"],
             "n": summary["by_category"][c].get("n_scored")} for c, w in cats.items()]
    o = summary["overall"]["wer_corpus"]
    rows.append({"category": "ALL", "wer": o["value"], "ci_low": o["ci_low"], "ci_high": o["ci_high"],
                 "n": summary["overall"].get("n_scored")})
    return pd.DataFrame(rows)


def wer_by_category_figure(data: pd.DataFrame, context):
    """Horizontal bars with 95% CIs; every category gets a value label and a marker, 0% included
    (a zero-width bar alone would draw nothing)."""
    n = len(data)
    fig, axs = new_figure(width=8, height=0.42 * n + 2.0)
    ax = axs[0, 0]
    y = np.arange(n)
    vals = 100 * data["wer"].to_numpy(float)
    lo = np.nan_to_num(vals - 100 * data["ci_low"].to_numpy(float))
    hi = np.nan_to_num(100 * data["ci_high"].to_numpy(float) - vals)
    colors = [OKABE_ITO[0]] * (n - 1) + [GREY]
    ax.barh(y, vals, xerr=[np.maximum(lo, 0), np.maximum(hi, 0)], color=colors, capsize=3, ecolor="#333333")
    ax.scatter(vals, y, marker="|", s=120, color=colors, zorder=3)  # visible even at 0%
    right = max(float(np.nanmax(100 * data["ci_high"].to_numpy(float))) if n else 0.0, 1.0)
    for yi, v, h in zip(y, vals, hi):
        ax.text(v + h + 0.01 * right, yi, f"{v:.1f}%", va="center", fontsize=8)
    ax.set_yticks(y, [f"{c} (n={int(k)})" if pd.notna(k) else c for c, k in zip(data["category"], data["n"])])
    ax.invert_yaxis()
    ax.set_xlim(0, right * 1.15)
    ax.set_xlabel("corpus WER (%), bars: 95% bootstrap CI")
    finish(fig, "Word error rate by text category", context)
    return fig


def wer_by_category(summary: dict, path: Path, context=None) -> Path | None:
    data = wer_by_category_data(summary)
    if data is None:
        return None
    return save_chart(wer_by_category_figure(data, context), path, data)


def duration_ratio_figure(df: pd.DataFrame, context):
    fig, axs = new_figure(width=7, height=4.2)
    ax = axs[0, 0]
    r = df["duration_ratio"].dropna()
    ax.hist(np.clip(r, 0, 5), bins=40, range=(0, 5), color=OKABE_ITO[0])
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts of utterances: whole numbers only
    for x, lab in ((TRUNCATION_RATIO, "truncation"), (1.0, "expected"), (OVERLONG_RATIO, "overlong")):
        ax.axvline(x, color="#D55E00", ls="--", lw=1)
        ax.text(x, 0.97, f" {lab}", fontsize=8, transform=ax.get_xaxis_transform(), va="top")
    ax.set_xlabel(f"duration / expected, expected = {EXPECTED_BASE_S} s + {EXPECTED_PER_WORD_S} s x words (clipped at 5)")
    ax.set_ylabel("utterances")
    finish(fig, "How long the audio is against the length the text needs", context)
    return fig


def duration_ratio_hist(df: pd.DataFrame, path: Path, context=None) -> Path:
    data = df[["id", "category", "words", "duration_s", "duration_ratio"]]
    return save_chart(duration_ratio_figure(df, context), path, data)


def frames_vs_words(df: pd.DataFrame, path: Path, context=None) -> Path:
    fig, axs = new_figure(width=7, height=4.5)
    ax = axs[0, 0]
    has_frames = df["frames"].notna().any()
    frames = df["frames"].astype(float) if has_frames else df["duration_s"] * FRAME_RATE_HZ
    runaway = df["runaway"].fillna(False).astype(bool).to_numpy()
    ax.scatter(df["words"][~runaway], frames[~runaway], s=14, color=OKABE_ITO[0], marker="o", alpha=0.8, label="ended by itself")
    ax.scatter(df["words"][runaway], frames[runaway], s=18, color=OKABE_ITO[5], marker="x", label="frame budget or force stop hit (runaway)")
    w = np.linspace(0, max(df["words"].max(), 1), 50)
    ax.plot(w, np.array([expected_speech_s(int(n)) for n in w]) * FRAME_RATE_HZ, "k--", lw=1, label="expected length")
    ax.set_xlabel("words in the text")
    ax.set_ylabel("frames (21.5 per second of audio)" if has_frames else "audio seconds x 21.5 (frame equivalents)")
    ax.legend(fontsize=7)
    finish(fig, "Audio length against text length", context)
    data = df[["id", "category", "words", "frames", "duration_s", "runaway"]]
    return save_chart(fig, path, data)


def stop_head(df: pd.DataFrame, path: Path, threshold: float | None, context=None) -> Path | None:
    traces = [(i, json.loads(p)) for i, p in zip(df["id"], df["p_stop"]) if isinstance(p, str)]
    if not traces:
        return None
    fig, axs = new_figure(1, 2, width=11, height=4.2)
    a1, a2 = axs[0]
    for _, t in traces:
        a1.plot(t, lw=0.6, alpha=0.5, color=OKABE_ITO[0])
    if threshold is not None:
        a1.axhline(threshold, color="#D55E00", ls="--", lw=1, label=f"threshold {threshold}")
        a1.legend(fontsize=7)
    a1.set_xlabel("decode step (21.5 per second)")
    a1.set_ylabel("p_stop (stop head probability)")
    a1.set_title("p_stop of every utterance")
    sf = df["stop_frame"].dropna()
    if len(sf):
        a2.hist(sf, bins=30, color=OKABE_ITO[2])
    a2.yaxis.set_major_locator(MaxNLocator(integer=True))
    a2.set_xlabel("frames committed when the stop fired")
    a2.set_ylabel("utterances")
    a2.set_title(f"Where the stop fired ({len(sf)} of {len(df)} stopped)")
    finish(fig, "What the stop head did", context)
    data = pd.DataFrame([{"id": i, "step": k, "p_stop": p} for i, t in traces for k, p in enumerate(t)])
    return save_chart(fig, path, data)


def write_charts(run_dir: str | Path, df: pd.DataFrame, summary: dict, derail: DerailRule = DerailRule()) -> list[Path]:
    out = Path(run_dir) / "charts"
    out.mkdir(exist_ok=True)
    threshold = (summary.get("run") or {}).get("run", {}).get("sampling", {}).get(THRESHOLD)
    context = RunContext.from_run(run_dir, n=len(df), asr=summary.get("asr"))
    made = [
        wer_by_category(summary, out / "wer_by_category.png", context),
        duration_ratio_hist(df, out / "duration_ratio.png", context),
        frames_vs_words(df, out / "frames_vs_words.png", context),
        stop_head(df, out / "stop_head.png", threshold, context),
        token_budget(df, out / "token_budget.png", context),
        entropy_curves(df, out / "entropy_curves.png", derail, context),
        probe_prediction(df, out / "probe_prediction.png", context),
    ]
    return [p for p in made if p is not None]
