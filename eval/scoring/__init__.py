"""Scoring audio: ASR, the text rules, and every per-utterance number and interval.

- (offline Whisper weights and the CTranslate2 -> openai-whisper converter: gepard_demo/alignment,
  shared with the page's and the server's word aligner)

Its modules, each in a line: docs/DESIGN.md's tree.
"""
