"""A run folder: what a batch synthesis writes, resumes and scores.

Its modules, each in a line: docs/DESIGN.md's tree.
"""
