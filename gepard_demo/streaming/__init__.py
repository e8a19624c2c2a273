"""From a request's text to audio chunks: what the app plays, the CLI writes and eval scores.

- text_input.py  `clean_text` (what text a request may carry, `TextError`), `split_text` (long text)
- session.py     `SynthesisSession`: text + settings -> `AudioChunk`s, then `SynthesisStats`; over
                 several calls with `SessionCarry`
- chunks.py      what a session hands out and reports: `AudioChunk`, `StepEvent`, `SynthesisStats`, `SessionCarry`
- decoding.py    `ChunkDecoder`: the codec side (pending frames, the codec stream, the fade hold-back)
- base.py        `OnceIterableSession`: iterate once, audio so far, cancel; shared with the served session
"""
