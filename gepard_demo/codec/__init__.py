"""NanoCodec decoding for Gepard: `.nemo` reading, FSQ dequantization, a NeMo-free causal
HiFi-GAN decoder with exact streaming, NeMo as a reference backend, end-of-speech shaping.

    codec = load_codec("nvidia/nemo-nano-codec-22khz-1.89kbps-21.5fps")  # or a local .nemo
    audio = codec.decode(codes)                        # (T, 32) -> float32 (T * 1024,)
    dec = codec.streamer(mode="exact")                 # or "lookback", lookback=8
    chunk = dec.push(codes[:10])                       # 10 * 1024 samples
"""

from __future__ import annotations

from pathlib import Path

from .base import STREAM_MODES, Codec, StreamDecoder
from .errors import CodecLoadError
from .fsq import NANOCODEC_LAYOUT, FSQLayout, codes_to_tokens, dequantize, tokens_to_codes
from .source import resolve_codec_source
from .tail import apply_end_of_speech
from .tiny import build_random_codec, make_tiny_codec

BACKENDS = ("native", "nemo")

__all__ = [
    "BACKENDS",
    "STREAM_MODES",
    "Codec",
    "CodecLoadError",
    "FSQLayout",
    "NANOCODEC_LAYOUT",
    "StreamDecoder",
    "apply_end_of_speech",
    "build_random_codec",
    "codes_to_tokens",
    "dequantize",
    "load_codec",
    "make_tiny_codec",
    "tokens_to_codes",
]


def load_codec(
    source: str | Path, backend: str = "native", device: str = "cpu", cache_dir: str | Path | None = None
) -> Codec:
    """Open a NanoCodec from a local `.nemo` path (or a folder with one) or a Hugging Face repo id.

    backend "native" is our NeMo-free decoder (exact streaming); "nemo" is NeMo's AudioCodecModel
    (needs requirements-nemo.txt). Raises CodecLoadError with what to do when it cannot.
    """
    if backend not in BACKENDS:
        raise ValueError(f"codec backend must be one of {BACKENDS}, got {backend!r}")
    path = resolve_codec_source(source, cache_dir)
    if backend == "native":
        from .native import NativeCodec

        return NativeCodec.from_nemo(path, device=device)
    from .nemo_backend import NemoCodec

    return NemoCodec.from_nemo(path, device=device)
