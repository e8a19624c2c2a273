"""A reference voice -> the speaker prefix the talker puts in its speaker slots (facts §9).

    reference audio (file bytes, a path, or samples + rate)
      -> mono 22050 Hz, edge silence trimmed, 3-15 s (reference_audio.py)
      -> NanoCodec encoder + GroupFSQ -> (T, 32) per-dim codes (codec/encoder.py)
      -> the checkpoint's compressor -> (K, hidden) tokens (compressor.py)

A prefix is computed once per reference: results are kept in a small LRU cache keyed by the
SHA-256 of the input (the file's bytes, or the samples with their rate), owned by the
SpeakerPrefixer instance.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from safetensors import safe_open

from gepard_demo.bounded import Bounded
from gepard_demo.codec.encoder import CodecEncoder
from gepard_demo.voice.compressor import PREFIX, CompressorConfig, CompressorError, RefCompressor

if TYPE_CHECKING:
    from gepard_demo.model.seams import Engine

from .reference_audio import (
    REFERENCE_WINDOW,
    ReferenceAudioError,
    ReferenceWindow,
    decode_audio,
    prepare_reference,
    read_reference_file,
)

__all__ = ["SpeakerPrefix", "SpeakerPrefixer", "ReferenceAudioError", "CompressorError", "read_compressor_state"]


@dataclass(frozen=True)
class SpeakerPrefix:
    tokens: torch.Tensor  # (K, hidden), on the talker's device and dtype
    key: str  # SHA-256 of the input it was made from
    seconds: float  # reference length after trimming
    frames: int  # codec frames the compressor read
    compute_s: float  # time it took when it was made (a cache hit returns the same object)


def read_compressor_state(model_dir: str | Path) -> dict[str, torch.Tensor]:
    """Only the `ref_compressor.*` tensors of a checkpoint (single file or shards)."""
    model_dir = Path(model_dir)
    index = model_dir / "model.safetensors.index.json"
    if (model_dir / "model.safetensors").exists():
        files = [model_dir / "model.safetensors"]
    elif index.exists():
        files = [model_dir / f for f in sorted(set(json.loads(index.read_text())["weight_map"].values()))]
    else:
        raise CompressorError(f"no model.safetensors in {model_dir}")
    state: dict[str, torch.Tensor] = {}
    for path in files:
        with safe_open(str(path), framework="pt") as f:
            for key in f.keys():
                if key.startswith(PREFIX):
                    state[key] = f.get_tensor(key)
    if not state:
        raise CompressorError(f"{model_dir} has no {PREFIX}* weights: this checkpoint cannot clone a voice")
    return state


class SpeakerPrefixer:
    def __init__(
        self,
        encoder: CodecEncoder,
        compressor: RefCompressor,
        window: ReferenceWindow = REFERENCE_WINDOW,
        cache_size: int = 32,
    ):
        self.encoder = encoder
        self.compressor = compressor
        self.window = window
        self._cache: Bounded[str, SpeakerPrefix] = Bounded(cache_size)
        self._lock = threading.Lock()
        self._pending: dict[str, Future] = {}  # key -> the computation in flight
        self.hits = 0
        self.misses = 0

    @classmethod
    def load(
        cls,
        model_dir: str | Path,
        codec_path: str | Path,
        hidden_size: int,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
        window: ReferenceWindow = REFERENCE_WINDOW,
    ) -> "SpeakerPrefixer":
        """The compressor from a checkpoint dir (gepard_config.json + weights), the encoder from the codec's .nemo."""
        model_dir = Path(model_dir)
        sidecar_path = model_dir / "gepard_config.json"
        sidecar = json.loads(sidecar_path.read_text()) if sidecar_path.exists() else {}
        cfg = CompressorConfig.from_sidecar(sidecar, hidden_size)
        encoder = CodecEncoder.from_nemo(codec_path, device=device)
        compressor = RefCompressor(cfg, encoder.layout.levels)
        compressor.load_weights(read_compressor_state(model_dir), source=str(model_dir))
        return cls(encoder, compressor.to(device=device, dtype=dtype), window)

    @classmethod
    def for_engine(cls, engine: Engine, codec_path: str | Path,
                   window: ReferenceWindow = REFERENCE_WINDOW) -> "SpeakerPrefixer":
        """For a loaded GepardEngine; codec_path: the .nemo the engine decodes with."""
        talker = engine.talker
        dtype = next(talker.parameters()).dtype
        prefixer = cls.load(engine.model_info.path, codec_path, engine.config.hidden_size, engine.device, dtype, window)
        if prefixer.compressor.cfg.num_queries != engine.config.num_speaker_prefix:
            raise CompressorError(
                f"compressor makes {prefixer.compressor.cfg.num_queries} tokens but the prompt has "
                f"{engine.config.num_speaker_prefix} speaker slots"
            )
        return prefixer

    # -- inputs -----------------------------------------------------------------------------

    def from_bytes(self, data: bytes) -> SpeakerPrefix:
        """The bytes of an audio file (any format soundfile or ffmpeg reads)."""
        key = hashlib.sha256(data).hexdigest()
        return self._cached(key, lambda: decode_audio(data))

    def from_file(self, path: str | Path) -> SpeakerPrefix:
        return self.from_bytes(read_reference_file(path))

    def from_array(self, audio: np.ndarray, rate: int) -> SpeakerPrefix:
        """Samples (samples[, channels]) of any numeric dtype at `rate` (a Gradio microphone tuple)."""
        a = np.ascontiguousarray(audio)
        h = hashlib.sha256(f"{int(rate)}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
        return self._cached(h.hexdigest(), lambda: (a, int(rate)))

    # -- work -------------------------------------------------------------------------------

    def _cached(self, key: str, load) -> SpeakerPrefix:
        # A reference being computed is computed once: a second caller (the app's Generate
        # while the upload's own computation runs) waits for it instead of starting another.
        with self._lock:
            hit = self._cache.touch(key)
            if hit is not None:
                self.hits += 1
                return hit
            waiting = self._pending.get(key)
            if waiting is None:  # this caller makes it; the others wait for its future
                pending: Future = Future()
                self._pending[key] = pending
        if waiting is not None:
            return waiting.result()
        try:
            audio, rate = load()
            prefix = self.compute(audio, rate, key)
        except BaseException as exc:
            with self._lock:
                del self._pending[key]
            pending.set_exception(exc)
            raise
        with self._lock:
            self.misses += 1
            self._cache[key] = prefix
            del self._pending[key]
        pending.set_result(prefix)
        return prefix

    def compute(self, audio: np.ndarray, rate: int, key: str = "") -> SpeakerPrefix:
        """No cache: samples -> checked reference -> codes -> prefix."""
        t = time.perf_counter()
        ref = prepare_reference(audio, rate, self.window, self.encoder.sample_rate)
        codes = self.encoder.encode(ref)
        tokens = self.prefix_from_codes(codes)
        return SpeakerPrefix(tokens, key, ref.size / self.encoder.sample_rate, int(codes.shape[0]), time.perf_counter() - t)

    def prefix_from_codes(self, codes: torch.Tensor) -> torch.Tensor:
        """(T, 32) per-dim codes -> (K, hidden) prefix."""
        device = self.compressor.queries.device
        with torch.inference_mode():
            return self.compressor(codes.unsqueeze(0).to(device))[0]
