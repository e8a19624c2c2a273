"""SynthesisItem: one utterance of an eval batch, built once where eval reads a test set's row or a
sweep's point (eval/runs/run.py) and taken whole by every eval engine's `synthesize(items,
sampling, stream)` and `synthesize_each(items, sampling, stream, batch_size)` (eval/engines/base.py's
`SpeechEngine`).

Every engine takes the same object, so the seam has one signature and the type checker holds it:
local Gepard (batched and streamed), a served Gepard, a GPU call's batch and the locked app engine
(eval/ui/common.py), audio files and Piper. A field an engine cannot honour is refused by it,
naming the field (Piper cannot clone: an item with a `ref` is an EngineError), never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import torch

    from gepard_demo.voice.library import VoiceLibrary


@dataclass(frozen=True)
class VoiceRef:
    """A saved voice (gepard_demo/voice/library.py) as a request's reference: its name, and the
    folder read here for its prefix (local engines) and its clip (speaker similarity). A server is
    sent the name and speaks in its own saved voice of that name."""

    name: str
    folder: str | None

    def _library(self) -> VoiceLibrary:
        from gepard_demo.voice.library import VoiceError, VoiceLibrary

        if self.folder is None:
            raise VoiceError(f"voice {self.name!r}: no --voices-dir to read it from", "voice")
        return VoiceLibrary(self.folder)

    def prefix(self) -> torch.Tensor:
        return self._library().prefix(self.name)

    def clip(self) -> np.ndarray:
        """Its trimmed clip, mono float32 at 22.05 kHz."""
        return self._library().clip(self.name)


# A request's reference voice: a recording's path, or a saved voice.
Reference = str | VoiceRef


@dataclass(frozen=True)
class SynthesisItem:
    """text: what is read; seed: its sampling seed (the batch's SamplingSettings, this seed put in).
    ref: the voice to speak it in (a reference recording's path or a saved voice); None is the
    default voice. uid: the utterance's id in its set (an engine that looks audio up by id, `files`,
    reads it); None where the item is no set's row."""

    text: str
    seed: int
    ref: Reference | None = None
    uid: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"SynthesisItem.text must be a str, got {type(self.text).__name__}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise TypeError(f"SynthesisItem.seed must be an int, got {type(self.seed).__name__}")
        if self.ref is not None and not isinstance(self.ref, (str, VoiceRef)):
            raise TypeError(f"SynthesisItem.ref must be a recording's path or a VoiceRef, got {type(self.ref).__name__}")
        if self.ref == "":
            raise ValueError("SynthesisItem.ref must name a recording (None: the default voice)")


def refs_of(items: list[SynthesisItem]) -> list[Reference | None] | None:
    """Each item's reference, or None when no item has one (every engine's default-voice path)."""
    refs = [item.ref for item in items]
    return refs if any(r is not None for r in refs) else None
