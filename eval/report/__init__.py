"""What a scored run says: its table and summary, its report (comparisons: eval/compare).

Its modules, each in a line: docs/DESIGN.md's tree.
"""
