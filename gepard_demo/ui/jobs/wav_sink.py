"""A Generate's WAV, written as its chunks stream rather than from the whole audio at the end.

A chapter (up to streaming/text_input.CHAPTER_CHARS) is about an hour of speech, 300 MB as float32:
the page does not hold it, the file on disk does. 32-bit float, so the file is bit-identical to
the PCM the player got. The session's thread writes; the Generate's handler may close the file
itself when that thread is held after a Stop (a decoder call is not interrupted), and a write
after the close is dropped: the file then ends where the page said it stopped.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import soundfile as sf


class WavSink:
    def __init__(self, path: Path, sample_rate: int):
        self.path, self.sample_rate = Path(path), int(sample_rate)
        self._file: sf.SoundFile | None = None
        self._closed = False
        self._lock = threading.Lock()
        self.samples = 0

    def write(self, samples: np.ndarray) -> None:
        if not len(samples):
            return
        with self._lock:
            if self._closed:
                return
            if self._file is None:
                self._file = sf.SoundFile(str(self.path), "w", self.sample_rate, 1, subtype="FLOAT")
            self._file.write(np.asarray(samples, dtype=np.float32))
            self.samples += len(samples)

    def close(self) -> str | None:
        """Finish the file; its path, or None when nothing was written."""
        with self._lock:
            if not self._closed and self._file is not None:
                self._file.close()
            self._closed = True
            return str(self.path) if self.samples else None


class WavFolder:
    """The folder the page's WAVs go to: one sink per Generate, the oldest beyond `keep` removed as
    each closes, never one still being written (a chapter runs long). Generates running at once
    open, close and prune it together, under one lock."""

    def __init__(self, path: Path, keep: int = 50):
        self.path, self.keep = Path(path), keep
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._open: set[Path] = set()  # still being written: never pruned

    def sink(self, job_id: str, sample_rate: int) -> WavSink:
        # 32-bit float WAV: bit-identical to the streamed PCM (and no clipping or rescaling).
        sink = WavSink(self.path / f"gepard-{job_id}.wav", sample_rate)
        with self._lock:
            self._open.add(sink.path)
        return sink

    def close(self, sink: WavSink) -> str | None:
        """The sink's file closed (its path, None if nothing was written); the oldest beyond `keep` go."""
        path = sink.close()
        with self._lock:  # else one handler's stat meets a file another has just pruned
            self._open.discard(sink.path)
            old = sorted((p for p in self.path.glob("gepard-*.wav") if p not in self._open),
                         key=lambda p: p.stat().st_mtime)
            for stale in old[: max(0, len(old) - self.keep)]:
                stale.unlink(missing_ok=True)
        return path
