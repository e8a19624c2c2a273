"""What the stop head does near the end of speech, from recorded p_stop traces.

Source traces: the rows of a sweep's highest-threshold point of each group of the other axes:
every lower threshold's outcome is a prefix of them (eval.sweeps.thresholds), so a
fine threshold curve costs no generation at all.

Charts (per category, because short texts behave differently; "all" is the whole set):
- calibration_tradeoff: premature stops (truncation: derived duration under half the expected
  length) against runaways (frame budget hit) as the threshold moves from low to high, one
  line per group of the other axes, Wilson 95% intervals (k of n utterances) as bars on both axes at
  the sweep's own thresholds, the engine's default threshold (0.5) ringed whenever the source
  runs can derive it (it is at most the highest threshold).
- calibration_stop_aligned: p_stop in the steps before the stop (step 0 = the stop step) at
  the default point (median and 25-75% band); for trained weights also aligned to the speech
  end that Silero VAD finds in the audio (on random weights there is no speech to find).
- calibration_max_inside: from the source traces of the default group, the highest p_stop
  inside the speech (steps 1 .. end-END_MARGIN-1) against the highest at its end (the last
  END_MARGIN+1 steps up to the end); end = the speech end Silero VAD finds (trained weights),
  else the source run's stop step. The default threshold is drawn: inside values above it are
  premature stops at the default. (Not from a lower point's rows: there every step before the
  stop is at most that point's threshold by construction, so the two would always separate
  exactly at it.)
Each PNG has its CSV beside it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from eval.charts.style import RunContext, finish, fmt_value, new_figure, save_chart, series_style
from eval.scoring.metrics import TRUNCATION_RATIO
from eval.scoring.rates import wilson
from eval.sweeps.thresholds import derive
from gepard_demo.declare import tags
from gepard_demo.model.guards.stop_rule import THRESHOLD, threshold_of
from gepard_demo.settings import SamplingSettings
from gepard_demo.units import SAMPLE_RATE, SAMPLES_PER_FRAME, expected_speech_s

DEFAULT_THRESHOLD = threshold_of(SamplingSettings())  # the engine's default, marked on the charts
WINDOW = 30  # steps before the stop shown in the aligned chart
CURVE_POINTS = 40  # evenly spaced thresholds of the trade-off curve (derived: they cost no generation)
# Steps before the speech end that still count as "at the end" in the max-inside chart. 2 frames
# = 93 ms at 21.5 frames/s: less than a short word (~200 ms), so a stop this close cuts no word,
# and about the end's own uncertainty (VAD's 32 ms windows rounded down to a 46 ms frame; the
# stop step is one past the last committed frame).
END_MARGIN = 2


def _trace(p) -> list[float]:
    return json.loads(p) if isinstance(p, str) else list(p)


def _label_panels(axs, used: int, xlabel: str, ylabel: str) -> None:
    """A grid of per-category panels: hide the unused ones, label the outer axes."""
    for ax in axs.flat[used:]:
        ax.set_visible(False)
    for ax in axs[-1]:
        ax.set_xlabel(xlabel)
    for ax in axs[:, 0]:
        ax.set_ylabel(ylabel)


def curve_thresholds(top: float, grid) -> list[float]:
    """Thresholds of the trade-off curve: an even grid up to `top`, the sweep's own and the default.

    The default is added whenever the source runs (at `top`) can derive it, so its ring is drawn
    whatever the grid (an even grid rarely hits 0.5 exactly).
    """
    ts = {float(t) for t in np.round(np.linspace(0.02, top, CURVE_POINTS), 4)} | {float(t) for t in grid}
    if DEFAULT_THRESHOLD <= top:
        ts.add(DEFAULT_THRESHOLD)
    return sorted(ts)


def tradeoff(rows: pd.DataFrame, source_threshold: float, max_frames: int, thresholds, silence_ms: float = 0.0) -> pd.DataFrame:
    """Truncation and runaway rates (with 95% CIs) per category and threshold, derived from the traces."""
    rows = rows[rows["p_stop"].notna()]
    out = []
    cats = [("all", rows)] + list(rows.groupby("category", sort=True))
    for cat, g in cats:
        for t in thresholds:
            if t > source_threshold:
                continue
            trunc: list[bool] = []
            run: list[bool] = []
            for _, r in g.iterrows():
                p = _trace(r["p_stop"])
                cap = r.get("force_stop")  # a force-stopped source tells every lower threshold too (stop_rule)
                d = derive(p, int(r["frames"]), source_threshold, float(t), max_frames,
                           force_stop=None if cap is None or pd.isna(cap) else int(cap))
                sr = r.get("sample_rate")
                dur = d.frames * SAMPLES_PER_FRAME / float(sr if sr and not pd.isna(sr) else SAMPLE_RATE) + silence_ms / 1000.0
                trunc.append(dur / expected_speech_s(int(r["words"])) < TRUNCATION_RATIO)
                assert d.runaway is not None  # a derived utterance knows how it ended (Derived.ended_by is a str)
                run.append(d.runaway)
            if not trunc:
                continue
            # rates of events, k of n with Wilson 95% intervals (eval.scoring.rates)
            n, kt, kr = len(trunc), int(sum(trunc)), int(sum(run))
            (tl, th), (rl, rh) = wilson(kt, n), wilson(kr, n)
            out.append({"category": cat, "threshold": float(t), "n": n,
                        "truncation_rate": kt / n, "truncation_ci_low": tl, "truncation_ci_high": th,
                        "runaway_rate": kr / n, "runaway_ci_low": rl, "runaway_ci_high": rh})
    return pd.DataFrame(out)


def stop_aligned(rows: pd.DataFrame, window: int = WINDOW) -> pd.DataFrame:
    """p_stop at steps -window..0 relative to the stop step, rows where the stop fired."""
    out = []
    for _, r in rows[rows["p_stop"].notna()].iterrows():
        if not bool(r["stop_fired"]):
            continue
        p = _trace(r["p_stop"])
        stop = len(p) - 1
        for k in range(max(0, stop - window), stop + 1):
            out.append({"id": r["id"], "category": r["category"], "offset": k - stop, "p_stop": p[k]})
    return pd.DataFrame(out, columns=["id", "category", "offset", "p_stop"])


def speech_end(row, p: list[float], ends: dict[str, int]) -> tuple[int, str] | None:
    """(step where the speech ends, what says so): the VAD end where known, else the stop step.

    None: a run that never stopped and has no VAD end (random weights running away), whose end
    nothing tells.
    """
    if row["id"] in ends:
        return min(ends[row["id"]], len(p) - 1), "vad"
    if bool(row["stop_fired"]):
        return len(p) - 1, "stop"
    return None


def _max(values: list[float]) -> float:
    return max(values) if values else np.nan


def max_inside(rows: pd.DataFrame, ends: dict[str, int] | None = None, margin: int = END_MARGIN) -> pd.DataFrame:
    """Per row of a source run: the highest p_stop inside the speech and the highest at its end.

    rows: the one-pass source run (the highest threshold), so no step before its own stop was
    cut off and an inside value above a lower threshold is a premature stop at that threshold.
    Inside = steps 1 .. end-margin-1 (step 0 always commits); at the end = steps end-margin ..
    end. ends: id -> VAD speech-end step (speech_end).
    """
    out = []
    for _, r in rows[rows["p_stop"].notna()].iterrows():
        p = _trace(r["p_stop"])
        found = speech_end(r, p, ends or {})
        if found is None:
            continue
        end, source = found
        out.append({"id": r["id"], "category": r["category"], "end": end, "end_from": source,
                    "max_inside": _max(p[1 : max(1, end - margin)]), "at_end": _max(p[max(1, end - margin) : end + 1])})
    return pd.DataFrame(out, columns=["id", "category", "end", "end_from", "max_inside", "at_end"])


def vad_end_step(audio: np.ndarray, sample_rate: int) -> int | None:
    """The decode step at which Silero VAD's last speech span ends (None: no speech found)."""
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    from eval.scoring.audio import ASR_RATE, to_16k

    # min_silence 100 ms: the trailing padding ends the last span (the default, 2 s, would swallow it)
    spans = get_speech_timestamps(to_16k(audio, sample_rate), VadOptions(threshold=0.5, min_silence_duration_ms=100, speech_pad_ms=0),
                                  sampling_rate=ASR_RATE)
    if not spans:
        return None
    return int(spans[-1]["end"] / ASR_RATE * sample_rate // SAMPLES_PER_FRAME)


def vad_ends(rows: pd.DataFrame, run_dir: Path) -> dict[str, int]:
    """id -> the VAD speech-end step of each row whose audio has speech (trained weights only)."""
    from eval.scoring.audio import read_mono

    out = {}
    for _, r in rows[rows["p_stop"].notna()].iterrows():
        end = vad_end_step(*read_mono(run_dir / r["wav"]))
        if end is not None:
            out[r["id"]] = end
    return out


def vad_aligned(rows: pd.DataFrame, ends: dict[str, int], window: int = WINDOW) -> pd.DataFrame:
    """p_stop at steps relative to the VAD speech end (ends: vad_ends)."""
    out = []
    for _, r in rows[rows["p_stop"].notna()].iterrows():
        end = ends.get(r["id"])
        if end is None:
            continue
        p = _trace(r["p_stop"])
        for k in range(max(0, end - window), min(len(p), end + window // 3 + 1)):
            out.append({"id": r["id"], "category": r["category"], "offset": k - end, "p_stop": p[k]})
    return pd.DataFrame(out, columns=["id", "category", "offset", "p_stop"])


def _panels(n: int):
    ncols = min(n, 4)
    nrows = (n + ncols - 1) // ncols
    return nrows, ncols


def tradeoff_chart(curves: dict[str, pd.DataFrame], grid_thresholds, context, path: Path) -> Path | None:
    """curves: label (a group of the other axes) -> tradeoff() frame."""
    curves = {k: v for k, v in curves.items() if not v.empty}
    if not curves:
        return None
    cats = list(dict.fromkeys(c for v in curves.values() for c in v["category"]))
    nrows, ncols = _panels(len(cats))
    fig, axs = new_figure(nrows, ncols, width=3.6 * ncols, height=3.1 * nrows + 0.9, sharex=True, sharey=True)
    for ax, cat in zip(axs.flat, cats):
        for i, (label, c) in enumerate(curves.items()):
            st = series_style(i)
            d = c[c["category"] == cat].sort_values("threshold")
            if d.empty:
                continue
            ax.plot(100 * d["runaway_rate"], 100 * d["truncation_rate"], "-", color=st["color"], lw=1.3, label=label)
            at = d[d["threshold"].round(6).isin([round(float(t), 6) for t in grid_thresholds])]
            ax.errorbar(100 * at["runaway_rate"], 100 * at["truncation_rate"],
                        xerr=[100 * (at["runaway_rate"] - at["runaway_ci_low"]), 100 * (at["runaway_ci_high"] - at["runaway_rate"])],
                        yerr=[100 * (at["truncation_rate"] - at["truncation_ci_low"]), 100 * (at["truncation_ci_high"] - at["truncation_rate"])],
                        fmt=st["marker"], color=st["color"], ms=4, capsize=2, lw=0.8)
            dflt = d[np.isclose(d["threshold"], DEFAULT_THRESHOLD)]
            if len(dflt):
                ax.plot(100 * dflt["runaway_rate"], 100 * dflt["truncation_rate"], "o", ms=11, mfc="none", mec="#D55E00", mew=1.8)
        ax.set_title(f"{cat} (n={int(c[c['category'] == cat]['n'].max()) if (c['category'] == cat).any() else 0})")
        ax.set_xlim(-3, 103)
        ax.set_ylim(-3, 103)
    _label_panels(axs, len(cats), "runaways (% hitting the frame budget)", "premature stops (% truncated)")
    axs.flat[0].legend(fontsize=7, title="group", title_fontsize=7)
    finish(fig, "Stop head trade-off: premature stops against runaways as the threshold moves", context,
           note="curve: thresholds from low (top left) to high (bottom right), derived from one generation; "
                f"markers with 95% CIs: the sweep's thresholds; ringed: the default {DEFAULT_THRESHOLD:g}")
    data = pd.concat([v.assign(group=k) for k, v in curves.items()], ignore_index=True)
    return save_chart(fig, path, data)


def aligned_chart(data: pd.DataFrame, threshold: float | None, xlabel: str, title: str, context, path: Path) -> Path | None:
    if data.empty:
        return None
    cats = ["all"] + sorted(data["category"].unique())
    nrows, ncols = _panels(len(cats))
    fig, axs = new_figure(nrows, ncols, width=3.6 * ncols, height=2.9 * nrows + 0.9, sharex=True, sharey=True)
    drawn = []
    for ax, cat in zip(axs.flat, cats):
        d = data if cat == "all" else data[data["category"] == cat]
        q = d.groupby("offset")["p_stop"].quantile([0.25, 0.5, 0.75]).unstack()
        ax.fill_between(q.index, q[0.25], q[0.75], color="#56B4E9", alpha=0.4, lw=0, label="25-75%")
        ax.plot(q.index, q[0.5], color="#0072B2", lw=1.5, label="median")
        if threshold is not None:
            ax.axhline(threshold, color="#D55E00", ls="--", lw=1, label=f"threshold {threshold:g}")
        ax.set_title(f"{cat} (n={d['id'].nunique()})")
        ax.set_ylim(0, 1)
        drawn.append(q.reset_index().assign(category=cat))
    _label_panels(axs, len(cats), xlabel, "p_stop")
    axs.flat[0].legend(fontsize=7)
    finish(fig, title, context)
    out = pd.concat(drawn, ignore_index=True).rename(columns={0.25: "p25", 0.5: "median", 0.75: "p75"})
    return save_chart(fig, path, out)


def _premature_at_default(d: pd.DataFrame, source_threshold: float) -> str:
    """Panel-title count of inside values above the default (premature stops at the default)."""
    if DEFAULT_THRESHOLD > source_threshold:  # inside values stop at the source threshold: nothing to count
        return ""
    return f", {int((d['max_inside'] > DEFAULT_THRESHOLD).sum())} above {DEFAULT_THRESHOLD:g}"


def max_inside_chart(data: pd.DataFrame, source_threshold: float, context, path: Path,
                     margin: int = END_MARGIN) -> Path | None:
    """data: max_inside() of the default group's source run (at source_threshold)."""
    if data.empty:
        return None
    cats = ["all"] + sorted(data["category"].unique())
    nrows, ncols = _panels(len(cats))
    fig, axs = new_figure(nrows, ncols, width=3.6 * ncols, height=2.9 * nrows + 0.9, sharex=True)
    bins = np.linspace(0, 1, 26)
    for ax, cat in zip(axs.flat, cats):
        d = data if cat == "all" else data[data["category"] == cat]
        ax.hist(d["max_inside"].dropna(), bins=bins, color="#0072B2", alpha=0.7, label=f"inside (steps 1 .. end-{margin + 1})")
        ax.hist(d["at_end"].dropna(), bins=bins, color="#E69F00", alpha=0.7, hatch="//", label=f"at the end (last {margin + 1} steps)")
        if DEFAULT_THRESHOLD <= source_threshold:
            ax.axvline(DEFAULT_THRESHOLD, color="#D55E00", ls="--", lw=1.2, label=f"default threshold {DEFAULT_THRESHOLD:g}")
        # why no inside value passes it: the source run would have stopped there
        ax.axvline(source_threshold, color="#777777", ls=":", lw=1, label=f"source threshold {source_threshold:g}")
        ax.set_title(f"{cat} (n={len(d)}{_premature_at_default(d, source_threshold)})")
        ax.yaxis.get_major_locator().set_params(integer=True)
    _label_panels(axs, len(cats), "highest p_stop in the span", "utterances")
    axs.flat[0].legend(fontsize=7)
    ends = data["end_from"].value_counts()
    finish(fig, f"Highest p_stop inside the speech against at its end, from the source runs (threshold {source_threshold:g})",
           context,
           note=f"end: the speech end Silero VAD finds ({int(ends.get('vad', 0))} utterances), else the source run's "
                f"stop step ({int(ends.get('stop', 0))}); runs that never stopped and have no VAD end are left out. "
                f"Inside values right of the dashed default line are premature stops at the default (more than "
                f"{margin} frames before the end); a threshold between the two distributions stops only at the end.")
    return save_chart(fig, path, data)


def _default_view(df: pd.DataFrame, tables: dict[str, pd.DataFrame], dflt: dict, group_axes: list[str]) -> tuple[str, float, str]:
    """(run, threshold, words for the title) of the stop-aligned view: the default point, or
    where nothing stopped there (random weights run away), the default group's threshold
    nearest the default where something did."""
    d = df
    for k in group_axes:
        d = d[d[k] == dflt[k]]
    d = d.assign(_dist=(d[THRESHOLD] - float(dflt[THRESHOLD])).abs()).sort_values(["_dist", THRESHOLD])
    stopped = [r for r in d["run"] if tables[r]["stop_fired"].fillna(False).astype(bool).any()]
    run = stopped[0] if stopped else d["run"].iloc[0]
    thr = float(d.set_index("run").loc[run, THRESHOLD])
    where = "the default point" if thr == float(dflt[THRESHOLD]) else \
        f"threshold {thr:g} (nothing stopped at the default {float(dflt[THRESHOLD]):g})"
    return run, thr, where


def calibration_charts(out: Path, df: pd.DataFrame, tables: dict[str, pd.DataFrame], axes: dict[str, list],
                       context: RunContext, charts: Path) -> list[Path]:
    """All calibration charts of a sweep folder (called by eval.sweeps.heatmaps.sweep_charts)."""
    from eval.sweeps.grid import default_point

    group_axes = [k for k in axes if k != THRESHOLD]
    top = max(axes[THRESHOLD])
    dflt = default_point(axes)
    short = tags(SamplingSettings)
    curves, default_rows = {}, None
    for _, r in df[np.isclose(df[THRESHOLD], top)].iterrows():
        rows = tables[r["run"]]
        cfg = json.loads((out / r["run"] / "config.json").read_text())["run"]
        label = ", ".join(f"{short.get(k, k)} {fmt_value(r[k])}" for k in group_axes)
        curves[label] = tradeoff(rows, top, cfg["sampling"]["max_frames"], curve_thresholds(top, axes[THRESHOLD]),
                                 cfg["stream"]["silence_ms"])
        if all(r[k] == dflt[k] for k in group_axes):
            default_rows = (r["run"], rows)
    made = [tradeoff_chart(curves, axes[THRESHOLD], context, charts / "calibration_tradeoff.png")]
    run, thr, where = _default_view(df, tables, dflt, group_axes)
    made.append(aligned_chart(stop_aligned(tables[run]), thr, "decode steps relative to the stop step (0 = stop)",
                              f"p_stop in the steps before the stop, at {where}", context,
                              charts / "calibration_stop_aligned.png"))
    if default_rows is not None:
        src_run, src = default_rows
        # VAD only on trained weights: random weights make noise, with no speech end to find
        ends = vad_ends(src, out / src_run) if context.random_weights is False else {}
        made.append(max_inside_chart(max_inside(src, ends), top, context, charts / "calibration_max_inside.png"))
        if context.random_weights is False:
            made.append(aligned_chart(vad_aligned(src, ends), thr, "decode steps relative to the VAD speech end (0 = end)",
                                      "p_stop around the end of speech found by VAD", context,
                                      charts / "calibration_vad_aligned.png"))
    return [p for p in made if p is not None]
