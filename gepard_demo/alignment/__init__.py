"""When each word is spoken: the words of the requested text timed in the audio (issue 35).

One aligner for the page, our speech server and eval (eval imports it from here; gepard_demo
never imports eval). Import the modules directly; this package imports nothing heavy.

- settings.py       AlignmentSettings: weights, cache, the low-confidence threshold, trimmed context
- weights.py        offline Whisper weights from pip bundles (tiny.en, base) or a path; ct2_convert.py:
                    CTranslate2 -> openai-whisper checkpoint
- speech.py         16 kHz resampling, Silero VAD spans
- words.py          the text's timeable words, cut as vLLM-Omni cuts them
- whisper_align.py  openai-whisper's forced alignment (find_alignment) of one window
- refine.py         word edges into pauses, confidence, state (aligned / low / unaligned)
- aligner.py        Aligner.align(audio, rate, text) -> Alignment: the guards, the windows
- result.py         AlignedWord, Alignment; vLLM-Omni's X-Word-Timestamps shape and the 4 KB rule
- subtitles.py      SRT and WebVTT of an alignment
- written.py        align_written: the written token over its spoken words' span (normalised text)
"""
