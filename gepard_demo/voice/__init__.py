"""Voice cloning's input side: a reference clip -> the K speaker tokens of the prompt (facts §9).

Its modules, each in a line: docs/DESIGN.md's tree.
"""
