"""A blind listening test between runs.

- session.py  a session: pairs of the same sentence and seed, sides shuffled per pair (seeded),
              votes appended as JSONL (who, when), resumable; its report
- scores.py   head-to-head win rates with Wilson intervals, Bradley-Terry with bootstrap intervals
"""
