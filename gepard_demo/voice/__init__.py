"""Voice cloning's input side: a reference clip -> the K speaker tokens of the prompt (facts §9).

- reference_audio.py  decode any format, mono 22050 Hz, trim, the 3-15 s window, base64 / data URLs
- compressor.py       `RefCompressor` (`ref_compressor.*` weights): codes -> K speaker tokens
- speaker_prefix.py   `SpeakerPrefixer`: reference -> prefix (codec encoder + compressor), cached by hash
- piper_voices.py     example reference voices made on the spot with Piper (for the page)
- library.py         `VoiceLibrary`: saved voices by name (vLLM-Omni's /v1/audio/voices rules), one file each
"""
