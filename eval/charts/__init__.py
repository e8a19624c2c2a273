"""Charts: one style for all, the run charts, and the two deployment charts.

- style.py         titles, run-context subtitle, Okabe-Ito / cividis, CSV beside every PNG
- run_charts.py    one run's charts (WER by category, duration ratio, frames vs words, stop head)
- stream_chart.py  chunk size vs time to first audio and stalls, lookback SNR, codec cost
- tail_chart.py    end fade and silence on Piper speech: click energy, final-word errors
"""
