"""From a request's text to audio chunks: what the app plays, the CLI writes and eval scores.

Its modules, each in a line: docs/DESIGN.md's tree.
"""
