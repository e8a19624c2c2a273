"""Sampling sweeps: a grid of run folders, one-pass thresholds, and their charts.

Its modules, each in a line: docs/DESIGN.md's tree.
"""
