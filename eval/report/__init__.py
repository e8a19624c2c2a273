"""What a scored run says: its table and summary, its report, and a regression comparison.

- summary.py   the per-utterance table and summary.json (every figure defined in DEFINITIONS)
- markdown.py  report.md
- compare.py   two runs, paired bootstrap, the exit code for CI
"""
