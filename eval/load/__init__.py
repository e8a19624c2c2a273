"""Load a speech server as `vllm bench serve --omni --backend openai-audio-speech` does, with a gate.

Its modules, each in a line: docs/DESIGN.md's tree.
"""
