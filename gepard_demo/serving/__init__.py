"""The speech API as vLLM-Omni serves Gepard (`POST /v1/audio/speech`), both ends of it.

Its modules, each in a line: docs/DESIGN.md's tree.
"""
