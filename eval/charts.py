"""PNG charts of one run (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from eval.metrics import EXPECTED_BASE_S, EXPECTED_PER_WORD_S, OVERLONG_RATIO, TRUNCATION_RATIO  # noqa: E402

FRAME_RATE_HZ = 21.5


def save_figure(fig, path: Path) -> Path:
    """Write a PNG atomically (a report never links a half-written chart) and free the figure."""
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)
    return path


def wer_by_category(summary: dict, path: Path) -> Path | None:
    cats = {c: s["wer_corpus"] for c, s in summary["by_category"].items() if "wer_corpus" in s}
    if not cats:
        return None
    overall = summary["overall"]["wer_corpus"]
    names = list(cats) + ["ALL"]
    vals = [cats[c]["value"] for c in cats] + [overall["value"]]
    lo = [v - (cats[c]["ci_low"] if c in cats else overall["ci_low"]) for c, v in zip(names, vals)]
    hi = [(cats[c]["ci_high"] if c in cats else overall["ci_high"]) - v for c, v in zip(names, vals)]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(names) + 1.5))
    y = np.arange(len(names))
    ax.barh(y, vals, xerr=[np.nan_to_num(lo), np.nan_to_num(hi)], color=["tab:blue"] * len(cats) + ["tab:gray"], capsize=3)
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.set_xlabel(f"corpus WER (95% bootstrap CI), ASR {summary['asr']}")
    ax.set_title("WER by category")
    return save_figure(fig, path)


def duration_ratio_hist(df: pd.DataFrame, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4))
    r = df["duration_ratio"].dropna()
    ax.hist(np.clip(r, 0, 5), bins=40, color="tab:blue")
    for x, lab in ((TRUNCATION_RATIO, "truncation"), (1.0, "expected"), (OVERLONG_RATIO, "overlong")):
        ax.axvline(x, color="k", ls="--", lw=1)
        ax.text(x, ax.get_ylim()[1] * 0.95, f" {lab}", fontsize=8)
    ax.set_xlabel(f"duration / ({EXPECTED_BASE_S} + {EXPECTED_PER_WORD_S} x words) s   (clipped at 5)")
    ax.set_ylabel("utterances")
    ax.set_title("Duration ratio")
    return save_figure(fig, path)


def frames_vs_words(df: pd.DataFrame, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    frames = df["frames"].astype(float) if df["frames"].notna().any() else df["duration_s"] * FRAME_RATE_HZ
    ylabel = "frames" if df["frames"].notna().any() else "duration x 21.5 (frame equivalents)"
    colors = np.where(df["runaway"].fillna(False).astype(bool), "tab:red", "tab:blue")
    ax.scatter(df["words"], frames, s=12, c=colors, alpha=0.7)
    w = np.linspace(0, max(df["words"].max(), 1), 50)
    ax.plot(w, (EXPECTED_BASE_S + EXPECTED_PER_WORD_S * w) * FRAME_RATE_HZ, "k--", lw=1, label="expected")
    ax.set_xlabel("words in text")
    ax.set_ylabel(ylabel)
    ax.set_title("Length against text (red: budget hit)")
    ax.legend()
    return save_figure(fig, path)


def stop_head(df: pd.DataFrame, path: Path, threshold: float | None) -> Path | None:
    traces = [json.loads(p) for p in df["p_stop"].dropna()]
    if not traces:
        return None
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    for t in traces:
        a1.plot(t, lw=0.6, alpha=0.5)
    if threshold is not None:
        a1.axhline(threshold, color="k", ls="--", lw=1, label=f"threshold {threshold}")
        a1.legend()
    a1.set_xlabel("decode step")
    a1.set_ylabel("p_stop")
    a1.set_title("p_stop traces")
    sf = df["stop_frame"].dropna()
    if len(sf):
        a2.hist(sf, bins=30, color="tab:green")
    a2.set_xlabel("stop frame (frames committed when the stop fired)")
    a2.set_ylabel("utterances")
    a2.set_title(f"Stop frame ({len(sf)}/{len(df)} stopped)")
    return save_figure(fig, path)


def write_charts(run_dir: str | Path, df: pd.DataFrame, summary: dict) -> list[Path]:
    out = Path(run_dir) / "charts"
    out.mkdir(exist_ok=True)
    threshold = (summary.get("run") or {}).get("run", {}).get("sampling", {}).get("stop_threshold")
    made = [
        wer_by_category(summary, out / "wer_by_category.png"),
        duration_ratio_hist(df, out / "duration_ratio.png"),
        frames_vs_words(df, out / "frames_vs_words.png"),
        stop_head(df, out / "stop_head.png", threshold),
    ]
    return [p for p in made if p is not None]
