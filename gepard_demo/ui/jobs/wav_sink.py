"""A Generate's WAV, written as its chunks stream rather than from the whole audio at the end.

A chapter (up to streaming/text_input.CHAPTER_CHARS) is about an hour of speech, 300 MB as float32:
the page does not hold it, the file on disk does. 32-bit float, so the file is bit-identical to
the PCM the player got. The session's thread writes; the Generate's handler may close the file
itself when that thread is held after a Stop (a decoder call is not interrupted), and a write
after the close is dropped: the file then ends where the page said it stopped.

The page's folder of them (`owned_wav_dir`) lives in the system's temporary folder while its app
runs; an app killed leaves it behind, so each app at its start removes the ones whose owner is gone.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
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


WAV_DIR_PREFIX = "gepard-wavs-"
OWNER_FILE = ".owner"  # locked (flock) by the app that made the folder, for as long as it runs
_held: list[int] = []  # the lock files' descriptors, open for the process's life: the lock goes with it


def owned_wav_dir(root: str | Path | None = None) -> Path:
    """A fresh WAV folder in `root` (default: the system's temporary folder), held by this process,
    after removing the stale ones there (remove_stale_wav_dirs)."""
    remove_stale_wav_dirs(root)
    path = Path(tempfile.mkdtemp(prefix=WAV_DIR_PREFIX, dir=root))
    fd = os.open(path / OWNER_FILE, os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, str(os.getpid()).encode())  # for a person looking; the lock is what counts
    _held.append(fd)
    return path


def remove_stale_wav_dirs(root: str | Path | None = None) -> list[Path]:
    """Remove the WAV folders in `root` whose owner is gone: the kernel drops a dead process's
    lock, so a lock we can take is nobody's (a pid may be reused, a lock is not). A folder without
    an owner file (made before owners were kept, or one being made right now) is left alone."""
    removed = []
    for path in Path(root or tempfile.gettempdir()).glob(WAV_DIR_PREFIX + "*"):
        try:
            fd = os.open(path / OWNER_FILE, os.O_RDWR)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # held: its app runs
        finally:
            os.close(fd)
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed
