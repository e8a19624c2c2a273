"""The decode step at fixed shapes, for a GPU to run as one CUDA graph replay per frame.

Its modules, each in a line: docs/DESIGN.md's tree.
"""
