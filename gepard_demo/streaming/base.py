"""What every synthesis session shares, local (session.SynthesisSession) or served
(ui.served.ServedSession): iterate once for AudioChunks, ask for the audio so far, run to the
end, cancel from any thread. A subclass writes `_generate` and hands what it emits to `_keep`.

`keep_audio`: whether the session keeps every chunk for `audio()` (the default). The page turns it
off and writes the WAV as the chunks stream, so a chapter's audio is not held in memory.

What the page asks of a running session is answered here for every kind, and a kind that knows
more overrides it: where it waits (`wait_line`), how far a long text is (`progress`), what a
Stop is waiting for (`stop_note`), its frames for a re-cut (`codes`). `sampling` is the settings
it runs with (the seed drawn); `stream` its stream settings where it decodes here (None where a
server does)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Iterator

import numpy as np

if TYPE_CHECKING:
    from gepard_demo.settings import SamplingSettings, StreamSettings

    from .chunks import AudioChunk
    from .segments import Progress


class OnceIterableSession:
    """The Session (seams.py) every kind of session is."""

    text: str = ""
    sampling: SamplingSettings
    stream: StreamSettings | None = None
    segments: list[str] | None = None  # a long text's parts, each its own request (None: the text whole)
    word_alignment: object = None  # the words a server sent after the audio (a served session's Alignment)

    def __init__(self) -> None:
        self._cancel = threading.Event()
        self._chunks: list[np.ndarray] = []
        self._started = False
        self.keep_audio = True
        self.emitted_samples = 0

    def cancel(self) -> None:
        """Ask the session to stop before its next step (any thread)."""
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def _keep(self, samples: np.ndarray) -> None:
        self.emitted_samples += len(samples)
        if self.keep_audio:
            self._chunks.append(samples)

    def audio(self) -> np.ndarray:
        """All samples emitted so far (the whole utterance once iteration has ended); nothing when
        keep_audio is off."""
        if not self._chunks:
            return np.zeros(0, dtype=np.float32)
        return np.concatenate(self._chunks).astype(np.float32, copy=False)

    def run(self) -> np.ndarray:
        """Iterate to the end and return the full audio."""
        for _ in self:
            pass
        return self.audio()

    def __iter__(self) -> Iterator[AudioChunk]:
        if self._started:
            raise RuntimeError(f"a {type(self).__name__} can be iterated only once")
        self._started = True
        return self._generate()

    def _generate(self) -> Iterator[AudioChunk]:
        raise NotImplementedError

    def wait_line(self) -> str | None:
        """Why it is not generating yet (a place in the engine's queue), or None."""
        return None

    def progress(self) -> Progress | None:
        """A long text's segments so far (streaming/segments.py), or None."""
        return None

    def stop_note(self) -> str | None:
        """After a Stop, what it still waits for before it is free (a GPU call ending), or None."""
        return None

    def codes(self) -> np.ndarray | None:
        """Its frames (T, 32) for a take's re-cut, or None where they stayed elsewhere (a server)."""
        return None
