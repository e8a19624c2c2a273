"""One engine, several callers: continuous batching (issue 19).

Its modules, each in a line: docs/DESIGN.md's tree.
"""
