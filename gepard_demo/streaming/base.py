"""What every synthesis session shares, local (session.SynthesisSession) or served
(ui.served.ServedSession): iterate once for AudioChunks, ask for the audio so far, run to the
end, cancel from any thread. A subclass writes `_generate` and appends what it emits to
`self._chunks`."""

from __future__ import annotations

import threading
from typing import Any, Iterator

import numpy as np


class OnceIterableSession:
    def __init__(self) -> None:
        self._cancel = threading.Event()
        self._chunks: list[np.ndarray] = []
        self._started = False

    def cancel(self) -> None:
        """Ask the session to stop before its next step (any thread)."""
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def audio(self) -> np.ndarray:
        """All samples emitted so far (the whole utterance once iteration has ended)."""
        if not self._chunks:
            return np.zeros(0, dtype=np.float32)
        return np.concatenate(self._chunks).astype(np.float32, copy=False)

    def run(self) -> np.ndarray:
        """Iterate to the end and return the full audio."""
        for _ in self:
            pass
        return self.audio()

    def __iter__(self) -> Iterator[Any]:
        if self._started:
            raise RuntimeError(f"a {type(self).__name__} can be iterated only once")
        self._started = True
        return self._generate()

    def _generate(self) -> Iterator[Any]:
        raise NotImplementedError
