"""The engine and codec seams: what the layers above call on an engine and on a codec.

`FrameEngine` is what a streaming session reads frames from: GepardEngine, its wrappers (the
BatchScheduler, the PipelinedEngine) and a ZeroGPU call's CallBatch. `Engine` is the whole surface
a loaded engine offers (the hosts, the server, the speed layer and eval use it); the wrappers
implement it explicitly, forwarding by name through `WrappedEngine` what they do not change.
`AudioCodec` is what a session, a host and eval call on a codec: a codec/base.Codec, or the
batching/codec_pool.CodecPool in front of one. `ModelInfo` is what every engine says of its model.

Nothing here imports torch at run time: the served paths (which must not load it) type against
these names too. The classes named only in annotations are imported for type checkers alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .frames import FrameMaker

if TYPE_CHECKING:
    import numpy as np
    import torch
    from transformers import PreTrainedTokenizerBase

    from gepard_demo.codec.base import StreamDecoder
    from gepard_demo.settings import SamplingSettings

    from .batch import BatchRequest, DecodeLoop
    from .config import GepardConfig
    from .fixed_shape.choice import LoopChoice
    from .fixed_shape.shapes import Capture
    from .frames import FrameSource
    from .generation import GenerationResult
    from .request import FrameRequest
    from .talker import GepardTalker


@dataclass(frozen=True)
class ModelInfo:
    name: str  # what the user asked for: "tiny", a path, or a hub id
    path: str  # the local directory the weights were read from
    revision: str | None  # hub commit, when it came from the hub
    random_weights: bool  # True for the tiny checkpoint: it makes noise, not speech
    device: str
    dtype: str
    speed: str | None = None  # the speed layer's pick (gepard_demo.speed), when one was applied


@runtime_checkable
class FrameEngine(Protocol):
    """What makes one request's frames for a session (model/frames.FrameMaker's surface): every
    engine takes one FrameRequest (model/request.py) whole; look_ahead and group matter where
    `takes_look_ahead`."""

    takes_look_ahead: bool

    @property
    def model_info(self) -> ModelInfo: ...

    def stream_frames(self, request: FrameRequest) -> FrameSource: ...

    def note_decode(self, seconds: float, frames: int) -> None: ...


@runtime_checkable
class Engine(FrameEngine, Protocol):
    """A loaded engine as its callers use it (model/engine.GepardEngine's public surface)."""

    @property
    def config(self) -> GepardConfig: ...

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase: ...

    @property
    def talker(self) -> GepardTalker: ...

    @property
    def device(self) -> torch.device: ...

    def default_sampling(self) -> SamplingSettings: ...

    def codec_source(self) -> str: ...

    def prompt_ids(self, text: str, settings: SamplingSettings | None = None) -> list[int]: ...

    def request(self, text: str, settings: SamplingSettings, speaker: torch.Tensor | None = None,
                resume: torch.Tensor | None = None) -> BatchRequest: ...

    def generate(self, texts: list[str], settings: SamplingSettings | list[SamplingSettings],
                 speakers: list[torch.Tensor | None] | None = None) -> list[GenerationResult]: ...

    def new_batch(self) -> DecodeLoop: ...

    def use_loop(self, cuda_graphs: str) -> LoopChoice: ...

    def warm(self, rows: tuple[int, ...] = ...) -> list[Capture]: ...


class WrappedEngine(FrameMaker):
    """An Engine in front of another (`engine`): every member the wrapper does not change is
    forwarded by name. A wrapper overrides what it adds (stream_frames, generate, ...);
    `takes_look_ahead` and `note_decode` are FrameMaker's unless it says otherwise."""

    def __init__(self, engine: Engine):
        self.engine = engine

    @property
    def model_info(self) -> ModelInfo:
        return self.engine.model_info

    @property
    def config(self) -> GepardConfig:
        return self.engine.config

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        return self.engine.tokenizer

    @property
    def talker(self) -> GepardTalker:
        return self.engine.talker

    @property
    def device(self) -> torch.device:
        return self.engine.device

    def default_sampling(self) -> SamplingSettings:
        return self.engine.default_sampling()

    def codec_source(self) -> str:
        return self.engine.codec_source()

    def prompt_ids(self, text: str, settings: SamplingSettings | None = None) -> list[int]:
        return self.engine.prompt_ids(text, settings)

    def request(self, text: str, settings: SamplingSettings, speaker: torch.Tensor | None = None,
                resume: torch.Tensor | None = None) -> BatchRequest:
        return self.engine.request(text, settings, speaker, resume)

    def generate(self, texts: list[str], settings: SamplingSettings | list[SamplingSettings],
                 speakers: list[torch.Tensor | None] | None = None) -> list[GenerationResult]:
        return self.engine.generate(texts, settings, speakers)

    def new_batch(self) -> DecodeLoop:
        return self.engine.new_batch()

    def use_loop(self, cuda_graphs: str) -> LoopChoice:
        return self.engine.use_loop(cuda_graphs)

    def warm(self, rows: tuple[int, ...] | None = None) -> list[Capture]:
        return self.engine.warm() if rows is None else self.engine.warm(rows)


@runtime_checkable
class AudioCodec(Protocol):
    """What a session, a host and eval call on a codec: codes -> audio, whole or streamed."""

    sample_rate: int
    samples_per_frame: int

    def decode(self, codes: torch.Tensor | np.ndarray) -> np.ndarray: ...

    def streamer(self, mode: str = "exact", lookback: int = 8) -> StreamDecoder: ...


if TYPE_CHECKING:  # the type checker holds each class to its seam's Protocol (mypy.ini)
    from gepard_demo.codec.base import Codec

    def _codec_is_an_audio_codec(codec: Codec) -> AudioCodec:  # Codec is abstract: held by an instance
        return codec
