"""Transcripts cached by audio content, so a sweep transcribes each distinct audio once.

A sweep's points share audio (the one-pass thresholds cut the same generation at several
places; a tail chart scores the same Piper sentence under many fades), and a restarted sweep
meets the audio it already transcribed.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from eval.jsonio import append_jsonl, read_jsonl


class CachedTranscriber:
    """A Transcriber that answers each distinct audio once, across run folders and restarts.

    Key: SHA-256 of the float32 samples and the sample rate; cache: one JSONL file per ASR tag.
    The Whisper model is loaded on the first miss only.
    """

    def __init__(self, settings, cache_file: str | Path, weights_cache: Path | None = None, inner=None):
        self.settings = settings
        self.path = Path(cache_file)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._weights_cache = weights_cache
        self._inner = inner
        self._seen = {r["key"]: r["text"] for r in read_jsonl(self.path, repair=True)}
        self.hits = self.misses = 0

    @property
    def inner(self):
        if self._inner is None:
            from eval.scoring.asr import Transcriber

            self._inner = Transcriber(self.settings, self._weights_cache) if self._weights_cache else Transcriber(self.settings)
        return self._inner

    @property
    def model_path(self):
        """The weights' path, found without loading Whisper."""
        if self._inner is not None:
            return self._inner.model_path
        from gepard_demo.alignment.weights import DEFAULT_CACHE, ct2_dir, openai_checkpoint

        find = ct2_dir if self.settings.backend == "faster-whisper" else openai_checkpoint
        return find(self.settings.model, self._weights_cache or DEFAULT_CACHE)

    @staticmethod
    def key(audio: np.ndarray, sample_rate: int) -> str:
        h = hashlib.sha256(np.ascontiguousarray(audio, np.float32).tobytes())
        h.update(str(int(sample_rate)).encode())
        return h.hexdigest()

    def transcribe(self, audio: np.ndarray, sample_rate: int) -> str:
        k = self.key(audio, sample_rate)
        if k in self._seen:
            self.hits += 1
            return self._seen[k]
        self.misses += 1
        text = self.inner.transcribe(audio, sample_rate)
        append_jsonl(self.path, {"key": k, "text": text})
        self._seen[k] = text
        return text
