"""From a request's text to audio chunks: what the app plays, the CLI writes and eval scores.

- text_input.py  `clean_text` (what text a request may carry, `TextError`), `split_text` (long text)
- text_splitter.py  the one sentence rule, vLLM-Omni's WebSocket cut: text arriving in pieces, and long text
- segments.py    a long text's segments as frame sources, later ones made ahead of their turn
- session.py     `SynthesisSession`: text + settings -> `AudioChunk`s, then `SynthesisStats`; one call of
                 several with a `Handover` (seams.py; zerogpu/carry.py)
- plan.py        what a session will say: the text checked, its segments, the seed drawn
- playback.py    one call's frames -> chunks: the decoder, the cuts, the hold-back, the end, the run's figures
- record.py      what a session records: the stats' traces, every committed frame's codes
- chunks.py      what a session hands out and reports: `AudioChunk`, `StepEvent`, `SynthesisStats`
- decoding.py    `ChunkDecoder`: the codec side (pending frames, the codec stream, the fade hold-back)
- pacing.py      how many frames each chunk takes: the first, then a ramp (or vLLM-Omni's fixed size)
- report.py      a finished run as every surface reports it (headers, SSE done event, synth's line)
- base.py        `OnceIterableSession`: iterate once, audio so far, cancel; shared with the served session
- seams.py       `SessionRequest` (one Generate, built once, what every host's `new_session` takes) and the
                 session and host seams as Protocols (`Session`, `Host`, `Voices`, `TurnLock`)
"""
