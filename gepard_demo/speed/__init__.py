"""Speed paths the engine composes, each in its own module (import them directly; this package
imports nothing heavy, so entry points can add its flags before torch loads):

Its modules, each in a line: docs/DESIGN.md's tree.
"""
