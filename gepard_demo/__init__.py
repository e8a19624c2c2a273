"""Gepard-1.0 in plain PyTorch: the streaming demo's engine, codec, streaming session and servers.

The subpackages follow the data path, text -> front end -> prompt -> talker frames -> codec audio -> stream:

- units.py                       the audio's units (22.05 kHz, 1024 samples a frame) and the expected length of a text
- bounded.py                     `Bounded`: the dict that keeps its newest entries (every cache and memory)
- declare.py                     how a setting is declared once: as text, on the page, to a server
- settings.py, settings_flags.py  the per-request settings every layer receives (and their CLI flags)
- text/        the text front end: written text -> what the model reads (lexicon, normaliser), mapped back
- host_settings.py               how a host serves: batching on one engine, the page's traffic
- model/      the talker: config, prompt layout, sampling, the decode loop, `GepardEngine`
- codec/      NanoCodec: codes -> audio (exact / lookback streaming), end-of-speech shaping
- voice/      reference audio -> speaker prefix (voice cloning), example voices
- streaming/  `SynthesisSession`: text + settings -> audio chunks + stats; what text a request may carry
- speed/      faster paths composed onto a loaded engine (quantized weights, pipelining)
- serving/    vLLM-Omni's speech API: protocol, our server, a client
- ui/         the Gradio page, the PCM route and the browser player

Imports point one way, down this list (settings lowest, ui highest); tests/house/test_layout.py keeps
them so. Each module is described once, in docs/DESIGN.md's tree; other packages import from the
module itself, so a thin client never pays for torch it does not use.
"""
