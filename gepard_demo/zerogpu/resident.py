"""What the GPU holds, and the gate that keeps the main process from computing with it.

On ZeroGPU the main process holds the model only as placeholders (spaces emulates CUDA there and
packs the weights to disk at start-up); a forward pass outside a GPU call fails deep inside
torch, or, in the forked-worker emulation on a CPU, silently runs in the wrong process. The gate
makes either case the same clear error: every module with weights gets a forward pre-hook that
raises `OutsideGpuCall` unless this process is inside a GPU call (the worker opens the gate of its
own forked copy; the main process's copy stays shut).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from torch import nn

if TYPE_CHECKING:
    from gepard_demo.codec.base import Codec
    from gepard_demo.model.seams import Engine
    from gepard_demo.voice.speaker_prefix import SpeakerPrefixer


class OutsideGpuCall(RuntimeError):
    """The model was run in a process that holds no GPU (the main process of a ZeroGPU Space)."""


@dataclass
class Gate:
    open: bool = False

    def check(self, module: nn.Module, args: tuple) -> None:
        if not self.open:
            raise OutsideGpuCall(
                f"{type(module).__name__} ran outside a GPU call: on ZeroGPU the model is usable only "
                "inside a @spaces.GPU function (gepard_demo/zerogpu/tasks.py)")


@dataclass
class Resident:
    """engine + codec (+ the speaker prefixer when the checkpoint can clone), on the GPU device.

    prefixer: a SpeakerPrefixer, or None with `no_cloning` saying why.
    """

    engine: Engine
    codec: Codec
    prefixer: SpeakerPrefixer | None = None
    no_cloning: str | None = None
    gate: Gate = field(default_factory=Gate)
    calls: int = 0  # stream calls this process's copy served: 0 in a fresh worker (tasks.CallStart)

    @classmethod
    def place(cls, engine: Engine, codec: Codec, codec_path: str | Path | None = None,
              guarded: bool = True) -> "Resident":
        """Everything the GPU calls need, built now (on ZeroGPU, weights must be placed before the
        start-up report packs them). guarded: shut the gate in this process (a boundary exists)."""
        prefixer, no_cloning = None, None
        try:
            from gepard_demo.voice.speaker_prefix import SpeakerPrefixer

            prefixer = SpeakerPrefixer.for_engine(engine, codec_path if codec_path is not None else _codec_path(engine))
        except (RuntimeError, ValueError, OSError) as exc:  # CompressorError, CodecLoadError
            no_cloning = f"this model cannot clone a voice: {exc}"
        resident = cls(engine, codec, prefixer, no_cloning, Gate(open=not guarded))
        if guarded:
            resident.guard()
        return resident

    def modules(self) -> list[nn.Module]:
        """The torch modules that compute: talker, codec decoder, codec encoder and compressor."""
        found = [self.engine.talker, *self.codec.modules()]
        if self.prefixer is not None:
            found += [self.prefixer.encoder.encoder, self.prefixer.compressor]
        return [m for m in found if isinstance(m, nn.Module)]

    def guard(self) -> None:
        for root in self.modules():
            for module in root.modules():
                if any(True for _ in module.parameters(recurse=False)):
                    module.register_forward_pre_hook(self.gate.check)


def _codec_path(engine: Engine) -> Path:
    from gepard_demo.codec.source import resolve_codec_source

    return resolve_codec_source(engine.codec_source())
