"""The backend-neutral Codec and StreamDecoder interfaces (docs/DESIGN.md, Codec API)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

import numpy as np

from .fsq import Codes, FSQLayout, dequantize

if TYPE_CHECKING:
    import torch
    from torch import nn

STREAM_MODES = ("exact", "lookback")


class StreamDecoder(ABC):
    """Turns frames pushed in any chunking into audio: each push of n frames returns n*spf samples.

    A stream that shares its decoder calls with others (batching/codec_pool.PooledStream) says more
    than the defaults: it is `aligned` to the batch's clock, `last_cost_s` is its share of its last
    call, `cancel` drops a push not yet started and `close` leaves the pool."""

    samples_per_frame: int
    last_cost_s: float | None = None
    poolable = False  # its state can be decoded in one call with other streams' (codec/batched.py)

    @property
    def aligned(self) -> bool:
        return False

    def cancel(self) -> None:
        """From any thread: a push waiting to start is dropped (a stream of its own has none)."""

    def close(self) -> None:
        """The stream is done: it lets go of what it shares."""

    @abstractmethod
    def push(self, codes: Codes) -> np.ndarray:
        """(n, 32) codes -> float32 samples for exactly those n frames."""

    def carry(self) -> dict:
        """The stream's state as plain CPU values (picklable), for another call to go on from."""
        raise NotImplementedError(f"{type(self).__name__} does not hand its state over")

    def resume(self, carried: dict) -> StreamDecoder:
        """Go on from `carry()`'s values (this stream's own kind's); returns itself."""
        raise NotImplementedError(f"{type(self).__name__} does not go on from a carried state")

    def push_last(self, codes: Codes) -> np.ndarray:
        """The stream's last push: the same samples; a graphed stream may pad it into a graph it
        has (codec/graphed.py) and take no push after it."""
        return self.push(codes)


class Codec(ABC):
    backend: str
    sample_rate: int
    samples_per_frame: int
    layout: FSQLayout
    source: str

    @property
    def num_codes(self) -> int:
        return self.layout.num_codes

    @property
    def frame_rate_hz(self) -> float:
        return self.sample_rate / self.samples_per_frame

    def dequantize(self, codes: Codes) -> torch.Tensor:
        """(T, 32) codes -> (T, 32) float32 torch tensor: the decoder's input."""
        return dequantize(codes, self.layout)

    @abstractmethod
    def decode(self, codes: Codes) -> np.ndarray:
        """(T, 32) codes (LongTensor or ndarray) -> float32 (T * samples_per_frame,), one whole decode."""

    @abstractmethod
    def streamer(self, mode: str = "exact", lookback: int = 8) -> StreamDecoder:
        """A fresh incremental decoder; see gepard_demo.codec.stream for the modes."""

    def modules(self) -> list[nn.Module]:
        """The torch modules that compute (a ZeroGPU gate hooks them); none here (NeMo's model
        is its own)."""
        return []

    def use_chunk_graphs(self, on: bool, required: bool = False) -> None:
        """Exact and lookback streams over fixed buffers, one CUDA graph per chunk size on a GPU
        (codec/graphed.py; the `cuda_graphs` setting, speed/select.apply_codec_speed); a backend
        without them keeps its streams."""

    def warm_chunk_graphs(self, sizes: list[int]) -> list:
        """Capture the chunk graphs of these sizes before a stream needs them; what each cost."""
        return []

    def use_cpu_bf16(self, on: bool) -> None:
        """Run the decoder's convolutions under bf16 autocast on a CPU (speed/select.py); a
        backend without the switch keeps its precision."""

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(backend={self.backend!r}, source={self.source!r}, "
            f"sample_rate={self.sample_rate}, samples_per_frame={self.samples_per_frame})"
        )


def check_mode(mode: str, lookback: int) -> None:
    if mode not in STREAM_MODES:
        raise ValueError(f"stream mode must be one of {STREAM_MODES}, got {mode!r}")
    if int(lookback) < 0:
        raise ValueError(f"lookback must be >= 0 frames, got {lookback}")
