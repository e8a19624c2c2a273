"""The speech API as vLLM-Omni serves Gepard (`POST /v1/audio/speech`), both ends of it.

- protocol.py  request model and field rules, stream modes, int16 PCM, SSE, error shape
- server.py    `build_speech_app`: that protocol on our engine (`python -m gepard_demo serve`): its routes
- service.py   `SpeechService`: what the routes share (the scheduler, fixed settings, a body -> a checked session)
- cloning.py   the server's `ref_audio` / `ref_text` / `task_type` fields and our extension fields
- timestamps.py  `word_timestamps` (vLLM-Omni's field) served by gepard_demo/alignment
- operations/    `/health`, `/metrics`, `/version`, the API key and CORS
- client.py    `SpeechClient`: eval's served engine and the app's served mode
"""
