"""Evaluation of Gepard (and reference engines): test sets, batch runs, ASR, metrics, reports.

Entry point: `python -m eval {run,score,report,compare,sweep,stream-chart,sets}`.
"""
