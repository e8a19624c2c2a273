"""Charts: one style for all, the run charts, and the two deployment charts.

- style.py         titles, run-context subtitle, Okabe-Ito / cividis, CSV beside every PNG
- run_charts.py    one run's charts (WER by category, duration ratio, frames vs words, stop head)
- budget_chart.py  the token-budget curve: failure rates per text length in tokens (its table too)
- probe_charts.py  the onset-entropy probe: precision / recall of "flagged by frame N", entropy curves
- stream_chart.py  chunk size vs time to first audio and stalls, lookback SNR, codec cost
- tail_chart.py    end fade and silence on Piper speech: click energy, final-word errors
"""
