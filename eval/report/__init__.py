"""What a scored run says: its table and summary, its report (comparisons: eval/compare).

- summary.py   the per-utterance table and summary.json (every figure defined in DEFINITIONS)
- failures.py  the failure table: each way of failing as k/n with a Wilson interval and its ids
- where.py     each failing utterance's failures placed in time, from its word alignment
- seeds.py     several samples per sentence: p_fail per sentence, single vs best-of-K WER (and best
               of K by the authors' reward, the oracle WER beside the mean), spread
- columns.py   the derail, probe-at-frame-N and reward columns of the table
- probe_lines.py  report.md's derailment, probe-prediction, token-budget and several-samples lines
- markdown.py  report.md
"""
