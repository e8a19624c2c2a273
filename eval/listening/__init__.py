"""A blind listening test between runs.

Its modules, each in a line: docs/DESIGN.md's tree.
"""
