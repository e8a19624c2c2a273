"""Whisper ASR behind one interface: openai-whisper (the reference) and faster-whisper.

Both decode the same way so their transcripts are comparable: English, greedy (beam 1) at
temperature 0 with no fallback (greedy retries on noise can take minutes, facts §7), no
conditioning on previous text, no timestamps. Input: 16 kHz mono float32 (eval.scoring.audio).
Weights come from gepard_demo.alignment.weights (offline).
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from eval.scoring.audio import ASR_RATE, to_16k, vad_trim
from gepard_demo.alignment.weights import DEFAULT_CACHE, ct2_dir, openai_checkpoint

BACKENDS = ("faster-whisper", "openai-whisper")


@dataclass(frozen=True)
class ASRSettings:
    """backend: "faster-whisper" or "openai-whisper"; model: a size ("tiny.en", "base") or a
    local path; compute_type: CTranslate2 type for faster-whisper ("int8", "float32", ...);
    beam_size: 1 = greedy; vad: trim non-speech with Silero VAD before decoding;
    threads: CPU threads (0 = library default)."""

    backend: str = "faster-whisper"
    model: str = "tiny.en"
    compute_type: str = "int8"
    beam_size: int = 1
    vad: bool = True
    threads: int = 0

    def __post_init__(self) -> None:
        self.validate()  # checked when made: no unchecked instance exists

    def validate(self) -> "ASRSettings":
        if self.backend not in BACKENDS:
            raise ValueError(f"ASR backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.beam_size < 1:
            raise ValueError(f"beam_size must be >= 1, got {self.beam_size}")
        if self.threads < 0:
            raise ValueError(f"threads must be >= 0, got {self.threads}")
        return self

    def as_dict(self) -> dict:
        return asdict(self)


@contextlib.contextmanager
def _keep_torch_threads():
    """CTranslate2 sets the process-wide OpenMP thread count when it loads a model (measured:
    torch went from 1 to 2 threads and the Gepard decode loop ran 20x slower afterwards), so
    torch's setting is put back after every CTranslate2 call."""
    import torch

    n = torch.get_num_threads()
    try:
        yield
    finally:
        if torch.get_num_threads() != n:
            torch.set_num_threads(n)


class FasterWhisperASR:
    def __init__(self, settings: ASRSettings, cache: Path = DEFAULT_CACHE):
        from faster_whisper import WhisperModel

        self.settings = settings
        self.model_path = ct2_dir(settings.model, cache)
        with _keep_torch_threads():
            self._model = WhisperModel(
                str(self.model_path), device="cpu", compute_type=settings.compute_type,
                cpu_threads=settings.threads, local_files_only=True,
            )

    def _decode(self, audio16k: np.ndarray) -> str:
        with _keep_torch_threads():
            segments, _ = self._model.transcribe(
                audio16k, language="en", task="transcribe", beam_size=self.settings.beam_size,
                temperature=0.0, condition_on_previous_text=False, without_timestamps=True,
                vad_filter=False,
            )
            return " ".join(s.text.strip() for s in segments).strip()


class OpenAIWhisperASR:
    def __init__(self, settings: ASRSettings, cache: Path = DEFAULT_CACHE):
        import whisper

        self.settings = settings
        self.model_path = openai_checkpoint(settings.model, cache)
        self._model = whisper.load_model(str(self.model_path), device="cpu")

    def _decode(self, audio16k: np.ndarray) -> str:
        opts = dict(
            language="en", task="transcribe", temperature=0.0, fp16=False,
            condition_on_previous_text=False, without_timestamps=True, verbose=None,
        )
        if self.settings.beam_size > 1:
            opts["beam_size"] = self.settings.beam_size
        import torch

        # threads only for this call: the process's setting belongs to the TTS engine.
        with _keep_torch_threads():
            if self.settings.threads:
                torch.set_num_threads(self.settings.threads)
            return self._model.transcribe(audio16k, **opts)["text"].strip()


class SpeechToText(Protocol):
    """What scoring asks of an ASR (eval/runs/score.py): a Transcriber, or a CachedTranscriber in
    front of one (eval/scoring/transcript_cache.py)."""

    @property
    def model_path(self) -> Path: ...

    def transcribe(self, audio: np.ndarray, sample_rate: int) -> str: ...


class Transcriber:
    """ASR with the shared front end: resample to 16 kHz, optional VAD trim, decode."""

    def __init__(self, settings: ASRSettings, cache: Path = DEFAULT_CACHE):
        self.settings = settings
        impl = FasterWhisperASR if settings.backend == "faster-whisper" else OpenAIWhisperASR
        self._impl = impl(settings, cache)
        self.model_path = self._impl.model_path

    def transcribe(self, audio: np.ndarray, sample_rate: int) -> str:
        x = to_16k(audio, sample_rate)
        if self.settings.vad:
            x = vad_trim(x)
        # Under 0.1 s there is nothing to transcribe; Whisper would invent words.
        if x.size < ASR_RATE // 10:
            return ""
        return self._impl._decode(np.ascontiguousarray(x, np.float32))
