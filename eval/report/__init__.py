"""What a scored run says: its table and summary, its report, and a regression comparison.

- summary.py   the per-utterance table and summary.json (every figure defined in DEFINITIONS)
- failures.py  the failure table: each way of failing as k/n with a Wilson interval and its ids
- seeds.py     several samples per sentence: p_fail per sentence, single vs best-of-K WER, spread
- markdown.py  report.md
- compare.py   two runs, paired bootstrap, the exit code for CI
"""
