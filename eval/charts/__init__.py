"""Charts: one style for all, the run charts, and the two deployment charts.

Its modules, each in a line: docs/DESIGN.md's tree.
"""
