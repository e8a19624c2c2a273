"""Sampling sweeps: a grid of run folders, one-pass thresholds, and their charts.

- grid.py          `SweepConfig`, `parse_axes`, point names, `default_point`
- sweep.py         `sweep()`: every point run (and scored), sweep.csv
- thresholds.py    one pass for every stop threshold: `derive`, the trace store
- heatmaps.py      heatmaps per metric, paired marks against the default, the best point
- calibration.py   stop-head calibration from the p_stop traces
"""
