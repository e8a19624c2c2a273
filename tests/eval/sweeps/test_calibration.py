"""Calibration charts from hand-made p_stop traces: the trade-off rates equal the engine's stop
rule (eval.sweeps.thresholds.derive), the default threshold is ringed whatever the grid, and the
max-inside chart reads the source traces (not a point capped at its own threshold)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import eval.sweeps.calibration as cal
from eval.charts.style import RunContext
from eval.jsonio import write_json_atomic
from eval.scoring.metrics import TRUNCATION_RATIO
from gepard_demo.units import expected_speech_s
from eval.sweeps.calibration import (
    DEFAULT_THRESHOLD,
    END_MARGIN,
    calibration_charts,
    curve_thresholds,
    max_inside,
    stop_aligned,
    tradeoff,
)
from eval.sweeps.thresholds import derive

TOP = 0.9  # the source runs' threshold
MAX_FRAMES = 30
WORDS = 1  # expected 1.1 s: under 11.8 frames (of 46.4 ms) is a premature stop


def _trace(n: int, spikes: dict[int, float]) -> list[float]:
    return [spikes.get(i, 0.1) for i in range(n)]


# id -> (category, source trace at TOP, frames committed by the source)
SOURCES = {
    # a spike of 0.7 at step 3, inside the speech: stops there at 0.5 (premature), not at 0.9
    "early": ("x", _trace(25, {0: 0.95, 3: 0.7, 24: 0.95}), 24),
    # never above 0.9: a runaway at the source; 0.6 at step 20 stops a run at 0.5 there
    "runaway": ("x", _trace(MAX_FRAMES, {20: 0.6}), MAX_FRAMES),
    # a clean ramp into the end
    "ramp": ("y", _trace(23, {20: 0.4, 21: 0.8, 22: 0.95}), 22),
}


def _rows(threshold: float) -> pd.DataFrame:
    """The point at `threshold`, as one-pass derives it from the sources (load_table's columns)."""
    out = []
    for uid, (cat, p, frames) in SOURCES.items():
        d = derive(p, frames, TOP, threshold, MAX_FRAMES)
        out.append({"id": uid, "category": cat, "words": WORDS, "frames": d.frames, "stop_fired": d.stop_fired,
                    "runaway": d.runaway, "p_stop": json.dumps(d.p_stop), "sample_rate": 22050, "wav": f"wav/{uid}.wav"})
    return pd.DataFrame(out)


def _by_rule(threshold: float, ids) -> tuple[float, float]:
    """(premature, runaway) rate at `threshold` straight from derive and the length rule."""
    prem, run = [], []
    for uid in ids:
        _, p, frames = SOURCES[uid]
        d = derive(p, frames, TOP, threshold, MAX_FRAMES)
        prem.append(d.frames * 1024 / 22050 / expected_speech_s(WORDS) < TRUNCATION_RATIO)
        run.append(d.runaway)
    return float(np.mean(prem)), float(np.mean(run))


def test_tradeoff_rates_follow_the_engine_stop_rule():
    thresholds = [0.05, 0.3, 0.5, 0.7, TOP, 0.95]
    t = tradeoff(_rows(TOP), TOP, MAX_FRAMES, thresholds).set_index(["category", "threshold"])
    assert 0.95 not in t.index.get_level_values("threshold")  # above the source: not derivable
    # by hand: at 0.05 everything stops at step 1; at 0.5 "early" stops at step 3; from 0.7 on
    # "early" and "ramp" reach their end and "runaway" hits the budget
    want = {0.05: (1.0, 0.0), 0.3: (1 / 3, 0.0), 0.5: (1 / 3, 0.0), 0.7: (0.0, 1 / 3), TOP: (0.0, 1 / 3)}
    for thr, (prem, run) in want.items():
        row = t.loc[("all", thr)]
        assert (row["truncation_rate"], row["runaway_rate"]) == pytest.approx((prem, run))
        assert (row["truncation_rate"], row["runaway_rate"]) == pytest.approx(_by_rule(thr, SOURCES))
        assert row["n"] == 3 and row["truncation_ci_low"] <= row["truncation_rate"] <= row["truncation_ci_high"]
    for thr in want:  # per category too
        row = t.loc[("x", thr)]
        assert (row["truncation_rate"], row["runaway_rate"]) == pytest.approx(_by_rule(thr, ["early", "runaway"]))


def test_stop_aligned_ends_on_the_derived_stop_step():
    window = 5
    rows = _rows(0.5)
    a = stop_aligned(rows, window)
    assert set(a["id"]) == {"early", "runaway", "ramp"}  # at 0.5 all three stop
    for uid, g in a.groupby("id"):
        _, p, frames = SOURCES[uid]
        d = derive(p, frames, TOP, 0.5, MAX_FRAMES)
        assert list(g["offset"]) == list(range(-min(window, d.stop_frame), 1))
        assert list(g["p_stop"]) == p[d.stop_frame - min(window, d.stop_frame) : d.stop_frame + 1]
        assert g[g["offset"] == 0]["p_stop"].iloc[0] > 0.5
    assert "runaway" not in set(stop_aligned(_rows(0.7), window)["id"])  # a runaway has no stop to align to


def test_max_inside_reads_the_source_trace_not_a_capped_point():
    m = max_inside(_rows(TOP)).set_index("id")
    assert "runaway" not in m.index  # no stop and no VAD end: nothing says where its speech ends
    early = m.loc["early"]
    # the 0.7 spike: above the default, below the source threshold; a point at 0.5 could never show it
    assert DEFAULT_THRESHOLD < early["max_inside"] == 0.7 < TOP
    assert (early["end"], early["end_from"], early["at_end"]) == (24, "stop", 0.95)
    ramp = m.loc["ramp"]
    assert ramp["max_inside"] == 0.1 and ramp["at_end"] == 0.95  # 0.4 at step 20 = end - END_MARGIN: at the end
    assert END_MARGIN == 2
    # a VAD end (trained weights) replaces the stop step, and lets a runaway in
    v = max_inside(_rows(TOP), {"runaway": 20, "early": 10, "ramp": 99}).set_index("id")
    assert (v.loc["runaway", "max_inside"], v.loc["runaway", "at_end"], v.loc["runaway", "end_from"]) == (0.1, 0.6, "vad")
    assert (v.loc["early", "max_inside"], v.loc["early", "at_end"]) == (0.7, 0.1)
    assert v.loc["ramp", "end"] == 22  # a VAD end past the trace is clamped to its last step


def test_curve_thresholds_include_the_default_whatever_the_grid():
    assert DEFAULT_THRESHOLD == 0.5
    ts = curve_thresholds(TOP, [0.3, TOP])
    assert DEFAULT_THRESHOLD in ts and {0.3, TOP} <= set(ts) and ts == sorted(ts) and max(ts) == TOP
    assert DEFAULT_THRESHOLD not in curve_thresholds(0.4, [0.2, 0.4])  # not derivable from runs at 0.4


def _sweep(tmp_path, grid):
    axes = {"temperature": [0.3], "stop_threshold": grid}
    lines, tables = [], {}
    for s in grid:
        run = f"T0.3_S{s:g}"
        write_json_atomic(tmp_path / run / "config.json",
                          {"run": {"sampling": {"max_frames": MAX_FRAMES}, "stream": {"silence_ms": 0.0}}})
        tables[run] = _rows(s)
        lines.append({"temperature": 0.3, "stop_threshold": s, "run": run})
    return pd.DataFrame(lines), tables, axes


def test_sweep_calibration_charts_ring_the_default_and_read_the_source(tmp_path, monkeypatch):
    figs = {}
    save = cal.save_chart

    def keep(fig, path, data):
        figs[path.stem] = fig
        return save(fig, path, data)

    monkeypatch.setattr(cal, "save_chart", keep)
    df, tables, axes = _sweep(tmp_path, [0.3, TOP])  # the grid lacks 0.5
    ctx = RunContext(model="tiny", random_weights=True, set="hand", n=3, asr=None, device="cpu", date="2026-01-01")
    made = calibration_charts(tmp_path, df, tables, axes, ctx, tmp_path / "charts")
    assert {p.stem for p in made} == {"calibration_tradeoff", "calibration_stop_aligned", "calibration_max_inside"}
    curve = pd.read_csv(tmp_path / "charts" / "calibration_tradeoff.csv")
    assert np.isclose(curve["threshold"], DEFAULT_THRESHOLD).any()
    rings = [ln for ax in figs["calibration_tradeoff"].axes for ln in ax.get_lines()
             if ln.get_markersize() == 11 and ln.get_markeredgecolor() == "#D55E00"]
    assert rings  # the default is ringed though the sweep never ran it
    inside = pd.read_csv(tmp_path / "charts" / "calibration_max_inside.csv").set_index("id")
    assert inside.loc["early", "max_inside"] == 0.7  # from the source at 0.9, not the default point at 0.3
    ax = figs["calibration_max_inside"].axes[0]
    assert "1 above 0.5" in ax.get_title()  # "early" is a premature stop at the default
    assert any(ln.get_xdata()[0] == DEFAULT_THRESHOLD and ln.get_linestyle() == "--" for ln in ax.get_lines())
