"""Charts of a sweep: heatmaps over its two default axes (settings.py declares them), small
multiples per extra axis.

For corpus WER (with its 95% bootstrap CI in each cell), the failure table's runaway, truncation,
loop, long-pause and any-failure rates (Wilson 95% intervals, from sweep.csv), median duration
ratio and median stop lag; never DNSMOS (a MOS predictor scores a looped clip like a clean one:
eval/scoring/naturalness.py). Every point is compared with the default point by a paired bootstrap over the
utterances both scored (eval.scoring.bootstrap): a cell whose 95% CI of (point - default) excludes 0
is marked "+" (higher than the default) or "-" (lower); the default point is boxed.

Default point: eval/sweeps/grid.py's `default_point`.

Best point (sweep_best.json), on the tuning sentences only: the lowest corpus WER among the
points whose runaway rate is not significantly above the default's; ties go to the lower
runaway rate (on the tuning sentences too), then to the point nearest the default; a point
with no scored tuning sentence is not a candidate. HELD_OUT ids take no part in choosing;
the chosen point is then compared with the default on them alone (paired), which is the
honest estimate of what choosing it buys.

Files in <out>/charts/: sweep_<metric>.png + .csv (the drawn numbers, one row per cell).
"""

from __future__ import annotations

import json
from collections.abc import Set
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.patches import Rectangle

from eval.charts.style import HEATMAP_CMAP, RunContext, finish, fmt_value, new_figure, save_chart
from eval.jsonio import write_json_atomic
from eval.scoring.bootstrap import paired_mean_diff_ci, paired_ratio_diff_ci
from eval.sweeps.grid import FIXED_AXES, canonical, default_point
from gepard_demo.declare import declared
from gepard_demo.settings import SamplingSettings

# Held out of every tuning rule (best point): in the built-in core set the 7th, 14th and 21st
# sentence of each category (30 of 210), in smoke "smoke-6" (the dialogue line).
HELD_OUT = frozenset(
    [f"{p}-{i:02d}" for p in ("short", "cmd", "num", "name", "q", "long", "punct", "abbr", "twist", "dlg") for i in (7, 14, 21)]
    + ["smoke-6"])

METRICS = {
    "wer_corpus": ("Corpus WER", "corpus WER (%)", 100.0),
    "runaway_rate": ("Runaway rate (frame budget or force stop hit)", "runaways (% of utterances)", 100.0),
    "truncation_rate": ("Truncation rate (duration under half the expected)", "truncated (% of utterances)", 100.0),
    "duration_ratio_median": ("Median duration ratio (audio / expected length)", "duration ratio (1 = expected)", 1.0),
    "loop_rate": ("Loop rate (transcript or codec frames repeat)", "loops (% of utterances)", 100.0),
    "long_pause_rate": ("Long pause rate (1 s or more inside the speech)", "long pauses (% of utterances)", 100.0),
    "failure_rate": ("Any failure (the failure table's any)", "failed (% of utterances)", 100.0),
    "derail_rate": ("Derail rate (the probe's entropy never settled)", "derailed (% of judged utterances)", 100.0),
    "clean_rate": ("Clean rollouts (the authors' rule: WER <= 0.2, length in bounds, no runaway)",
                   "clean (% of utterances)", 100.0),
    "stop_lag_ms_median": ("Median stop lag (stop time - VAD end of speech)", "stop lag (ms)", 1.0),
}
# sweep.csv columns of each metric's 95% CI (a median duration ratio has none)
CI_COLUMNS = {"wer_corpus": ("wer_ci_low", "wer_ci_high"), "runaway_rate": ("runaway_ci_low", "runaway_ci_high"),
              "truncation_rate": ("truncation_ci_low", "truncation_ci_high"), "loop_rate": ("loop_ci_low", "loop_ci_high"),
              "long_pause_rate": ("long_pause_ci_low", "long_pause_ci_high"),
              "failure_rate": ("failure_ci_low", "failure_ci_high"), "derail_rate": ("derail_ci_low", "derail_ci_high"),
              "clean_rate": ("clean_ci_low", "clean_ci_high")}
# per-utterance column used by the paired comparison of each metric (None: not compared)
PAIRED = {"wer_corpus": "wer", "runaway_rate": "runaway", "truncation_rate": "truncated", "duration_ratio_median": "duration_ratio",
          "loop_rate": "fail_loop", "long_pause_rate": "fail_long_pause", "failure_rate": "fail_any",
          "stop_lag_ms_median": "stop_lag_ms", "derail_rate": "fail_derail", "clean_rate": "clean"}


def _tables(out: Path, df: pd.DataFrame, tag: str | None, derail=None) -> dict[str, pd.DataFrame]:
    from eval.report.summary import load_table

    return {run: load_table(out / run, tag, **({"derail": derail} if derail else {}))[0] for run in df["run"]}


def paired_marks(df: pd.DataFrame, tables: dict[str, pd.DataFrame], default_run: str, ids: Set[str] | None = None) -> pd.DataFrame:
    """Per point and metric: delta vs the default point, its 95% CI, and the mark (+, - or '')."""
    base = tables[default_run]
    rows = []
    for run in df["run"]:
        t = tables[run]
        m = base.merge(t, on="id", suffixes=("_a", "_b"))
        if ids is not None:
            m = m[m["id"].isin(ids)]
        rec = {"run": run}
        for metric, col in PAIRED.items():
            rec[f"{metric}_delta"] = rec[f"{metric}_ci_low_delta"] = rec[f"{metric}_ci_high_delta"] = np.nan
            rec[f"{metric}_mark"] = ""
            if f"{col}_a" not in m or run == default_run:
                continue
            mm = m[m[f"{col}_a"].notna() & m[f"{col}_b"].notna()]
            if mm.empty:
                continue
            if metric == "wer_corpus":
                iv = paired_ratio_diff_ci(mm["errors_a"], mm["n_ref_a"], mm["errors_b"], mm["n_ref_b"])
            else:
                iv = paired_mean_diff_ci(mm[f"{col}_a"].astype(float), mm[f"{col}_b"].astype(float))
            rec[f"{metric}_delta"], rec[f"{metric}_ci_low_delta"], rec[f"{metric}_ci_high_delta"] = iv.value, iv.low, iv.high
            rec[f"{metric}_mark"] = "+" if iv.low > 0 else "-" if iv.high < 0 else ""
        rows.append(rec)
    return pd.DataFrame(rows)


def tuned_wer(table: pd.DataFrame, tune: set) -> float:
    """Corpus WER over the scored tuning rows of one point; nan when none is scored."""
    t = table[table["id"].isin(tune) & table["wer"].notna()]
    n_ref = t["n_ref"].sum()
    return float(t["errors"].sum() / n_ref) if n_ref > 0 else np.nan


def tuned_runaway(table: pd.DataFrame, tune: set) -> float:
    """Runaway rate over the tuning rows of one point (sweep.csv's rate counts held-out ids too)."""
    if "runaway" not in table:
        return np.nan
    r = table.loc[table["id"].isin(tune), "runaway"].dropna()
    return float(r.astype(float).mean()) if len(r) else np.nan


def best_point(df: pd.DataFrame, tables: dict[str, pd.DataFrame], default_run: str, axes: dict[str, list]) -> dict | None:
    """The documented rule (module docstring), on tuning ids; None without WER."""
    if df["wer_corpus"].isna().all():
        return None
    tune = {i for t in tables.values() for i in t["id"]} - HELD_OUT
    marks = paired_marks(df, tables, default_run, tune).set_index("run")
    dflt = default_point(axes)

    def distance(row):
        return sum(abs(list(axes[k]).index(row[k]) - list(axes[k]).index(dflt[k])) for k in axes)

    cands = []
    for _, row in df.iterrows():
        if marks.loc[row["run"], "runaway_rate_mark"] == "+":
            continue
        wer = tuned_wer(tables[row["run"]], tune)
        if np.isnan(wer):  # nothing scored to judge it by (0 errors of 0 words is not a perfect score)
            continue
        cands.append((wer, tuned_runaway(tables[row["run"]], tune), distance(row), row["run"], row))
    if not cands:
        return None
    # no runaway flag (reference engines): last in that tie-break rather than a made-up 0
    cands.sort(key=lambda c: (c[0], np.inf if np.isnan(c[1]) else c[1], c[2], c[3]))
    wer, runaway, _, run, row = cands[0]
    held = paired_marks(df[df["run"] == run], tables, default_run, HELD_OUT)
    n_held = len({i for i in tables[run]["id"] if i in HELD_OUT})
    return {
        "rule": "lowest corpus WER on the tuning ids among points whose runaway rate is not significantly above "
                "the default's (paired bootstrap); ties: lower runaway rate on the tuning ids, then nearest the default",
        "point": {k: row[k] for k in axes}, "run": run, "tuning_wer": float(wer),
        "tuning_runaway_rate": None if np.isnan(runaway) else runaway, "tuning_ids": len(tune),
        "held_out_ids": sorted(HELD_OUT & set(tables[run]["id"])),
        "held_out_wer_delta_vs_default": None if not n_held or held.empty else
        {k: held.iloc[0][f"wer_corpus_{k}"] for k in ("delta", "ci_low_delta", "ci_high_delta")},
        "default_point": dflt, "default_run": default_run,
    }


def _cell_text(metric: str, row, mark: str) -> str:
    scale = METRICS[metric][2]
    v = row[metric]
    if v is None or pd.isna(v):
        return "n/a"
    main = f"{scale * v:.1f}" if scale == 100.0 else f"{v:.2f}"
    main += f" {mark}" if mark else ""
    low, high = CI_COLUMNS.get(metric, (None, None))
    if low and not pd.isna(row.get(low)):
        # a rate of events also says its count: k/n [Wilson 95%]; WER its bootstrap CI
        k, n = row.get(metric.removesuffix("_rate") + "_k"), row.get(metric.removesuffix("_rate") + "_n")
        counted = f"{int(k)}/{int(n)} " if metric != "wer_corpus" and not pd.isna(k) and not pd.isna(n) else ""
        main += f"\n{counted}[{scale * row[low]:.1f}, {scale * row[high]:.1f}]"
    return main


def heatmap(df: pd.DataFrame, marks: pd.DataFrame, metric: str, axes: dict[str, list], dflt: dict,
            context: RunContext | str, path: Path, best_run: str | None = None) -> Path | None:
    """One figure: the first default axis (rows) x the last (columns: the stop threshold, which varies
    fastest); one panel per extra-axis value combo."""
    if metric not in df or df[metric].isna().all():
        return None
    title, unit, scale = METRICS[metric]
    row_axis, col_axis = list(FIXED_AXES)[0], list(FIXED_AXES)[-1]
    extra = [k for k in axes if k not in FIXED_AXES]
    combos = [dict(zip(extra, c)) for c in (pd.MultiIndex.from_product([axes[k] for k in extra]) if extra else [()])]
    rows, cols = list(axes[row_axis]), list(axes[col_axis])
    d = df.merge(marks, on="run", how="left")
    vmin, vmax = np.nanmin(d[metric].astype(float)) * scale, np.nanmax(d[metric].astype(float)) * scale
    if vmin == vmax:
        vmin, vmax = vmin - 0.5, vmax + 0.5
    ncols = len(combos)
    fig, axs = new_figure(1, ncols, width=max(4.8, 1.25 * len(cols) + 2.2) * ncols, height=1.0 * len(rows) + 2.6)
    im = None
    drawn = []
    for ax, combo in zip(axs[0], combos):
        sel = d
        for k, v in combo.items():
            sel = sel[sel[k] == v]
        grid = np.full((len(rows), len(cols)), np.nan)
        for _, r in sel.iterrows():
            i, j = rows.index(r[row_axis]), cols.index(r[col_axis])
            grid[i, j] = float(r[metric]) * scale if not pd.isna(r[metric]) else np.nan
            mark = r.get(f"{metric}_mark") or ""
            is_default = all(r[k] == dflt[k] for k in axes)
            ax.text(j, i, _cell_text(metric, r, mark), ha="center", va="center", fontsize=7.5,
                    color="white" if grid[i, j] < (vmin + vmax) / 2 else "black")
            if is_default:
                ax.add_patch(Rectangle((j - 0.48, i - 0.48), 0.96, 0.96, fill=False, ec="#D55E00", lw=2.2))
            if r["run"] == best_run:
                ax.add_patch(Rectangle((j - 0.42, i - 0.42), 0.84, 0.84, fill=False, ec="#009E73", lw=2.2, ls="--"))
            low, high = CI_COLUMNS.get(metric, (None, None))
            drawn.append({**{k: r[k] for k in axes}, "metric": metric, "value": r[metric],
                          "ci_low": r.get(low) if low else None, "ci_high": r.get(high) if high else None,
                          "delta_vs_default": r.get(f"{metric}_delta"), "delta_ci_low": r.get(f"{metric}_ci_low_delta"),
                          "delta_ci_high": r.get(f"{metric}_ci_high_delta"), "mark": mark, "default": is_default,
                          "best": r["run"] == best_run})
        im = ax.imshow(grid, cmap=HEATMAP_CMAP, vmin=vmin, vmax=vmax, aspect="auto")
        ax.set_xticks(range(len(cols)), [f"{t:g}" for t in cols])
        ax.set_yticks(range(len(rows)), [f"{t:g}" for t in rows])
        ax.set_xlabel(f"{col_axis.replace('_', ' ')} ({declared(SamplingSettings)[col_axis].help})")
        ax.set_ylabel(row_axis.replace("_", " "))
        ax.grid(False)
        ax.set_title(", ".join(f"{k} = {fmt_value(v)}" for k, v in combo.items()) if combo else "")
    cb = fig.colorbar(im, ax=list(axs[0]), shrink=0.9, pad=0.02)
    cb.set_label(unit)
    finish(fig, f"{title} over the sampling grid", context,
           note="solid box: default point; dashed green box: best point (sweep_best.json rule); + / -: paired bootstrap 95% CI of the difference to the default excludes 0 "
                "(above / below it)" + ("; each cell: value [95% CI]" if metric == "wer_corpus" else ""))
    return save_chart(fig, path, pd.DataFrame(drawn))


def sweep_charts(out: str | Path, log=print, derail=None) -> list[Path]:
    """Heatmaps, paired marks and the best point of a finished sweep folder. derail: the derail
    rule (eval/scoring/derail.py; None: its defaults)."""
    out = Path(out)
    info = json.loads((out / "sweep.json").read_text())
    df = pd.read_csv(out / "sweep.csv")
    # Extra axes by one spelling of their values (sweep.json has None / "auto" / 200, sweep.csv NaN / "200").
    axes = {k: [v if k in FIXED_AXES else canonical(v, k) for v in vs] for k, vs in info["config"]["axes"].items()}
    for k in axes:
        if k not in FIXED_AXES and k in df:
            df[k] = pd.Series([canonical(v, k) for v in df[k]], index=df.index, dtype=object)
    tag = info.get("asr")
    tables = _tables(out, df, tag, derail)
    dflt = default_point(axes)
    sel = df
    for k, v in dflt.items():
        sel = sel[sel[k] == v]
    default_run = sel["run"].iloc[0]
    marks = paired_marks(df, tables, default_run)
    first = out / df["run"].iloc[0]
    context = RunContext.from_run(first, n=int(df["n"].max()), asr=tag)
    charts = out / "charts"
    best = best_point(df, tables, default_run, axes)
    best_run = best["run"] if best else None
    made = [heatmap(df, marks, m, axes, dflt, context, charts / f"sweep_{m}.png", best_run) for m in METRICS]
    write_json_atomic(out / "sweep_best.json", {"best": best, "default_run": default_run,
                                                "marks": json.loads(marks.to_json(orient="records"))})
    from eval.sweeps.calibration import calibration_charts

    made += calibration_charts(out, df, tables, axes, context, charts)
    return [p for p in made if p is not None]
