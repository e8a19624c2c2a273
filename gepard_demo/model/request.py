"""FrameRequest: one request to an engine, built once where a request comes in (a session's
segment, a test, a benchmark) and taken whole by every engine's `stream_frames(request)`.

Every engine takes the same object, so the seam (model/seams.FrameEngine) has one signature and a
type checker holds it: the plain engine (model/engine.py), the running batch
(batching/scheduler.py), a ZeroGPU call's batch (zerogpu/batched.py) and the pipelined talker
(speed/pipeline.py). A field an engine cannot honour is refused by it, naming the field, never
silently dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from gepard_demo.settings import SamplingSettings


@dataclass(frozen=True)
class FrameRequest:
    """text: the segment the model reads; sampling: its settings (checked when they were made).
    speaker: a (K, hidden) speaker prefix (a reference or saved voice, already made by the
    compressor); None is the default voice. resume: (n, 32) frames this request already
    committed, to go on from frame n (a ZeroGPU call's carry). look_ahead: a later segment of
    `group`'s text, made before its turn to play (a running batch's place in line)."""

    text: str
    sampling: SamplingSettings
    speaker: torch.Tensor | None = None
    resume: torch.Tensor | None = None
    look_ahead: bool = False
    group: object = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"FrameRequest.text must be a str, got {type(self.text).__name__}")
        if self.speaker is not None and self.speaker.dim() != 2:
            raise ValueError(f"FrameRequest.speaker must be a (K, hidden) prefix, got shape {tuple(self.speaker.shape)}")
        if self.resume is not None and self.resume.dim() != 2:
            raise ValueError(f"FrameRequest.resume must be (n, codebooks) frames, got shape {tuple(self.resume.shape)}")

    def replace(self, **changes: object) -> FrameRequest:
        return replace(self, **changes)  # type: ignore[arg-type]
