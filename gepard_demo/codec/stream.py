"""Incremental decoding: exact state carrying, and vLLM-Omni's lookback re-decode.

- ExactStreamDecoder carries each causal layer's left context / overlap between pushes (see
  hifigan.py), so the concatenated pushes equal one whole-history decode for any chunking and
  each push costs only its own frames.
- LookbackStreamDecoder re-decodes the last `lookback` frames of history together with the new
  ones and keeps only the new frames' samples, as vLLM-Omni does. With lookback shorter than
  the decoder's receptive field (~26 frames) chunk starts differ from the whole decode; that
  error is what evaluation charts. lookback=None re-decodes the whole history (exact, O(T^2)):
  the NeMo backend's exact mode, since NeMo's decoder has no streaming state.
- GraphedStreamDecoder and GraphedLookbackDecoder: the same two over fixed buffers, one CUDA graph
  replay per chunk on a GPU (graphed.py; `cuda_graphs`), the same samples block for block.
"""

from __future__ import annotations

import contextlib
from typing import Callable

import numpy as np
import torch

from .base import StreamDecoder
from .fsq import Codes, FSQLayout, check_codes, dequantize, dequantize_np
from .graphed import ChunkGraphs, GraphPool
from .hifigan import CausalHiFiGANDecoder

_EMPTY = np.zeros(0, dtype=np.float32)


# A long push is decoded in blocks of this many frames with the state carried between them:
# the same samples, but each layer's activations stay cache-sized. On this CPU, 430 frames take
# ~14 s in 86-frame blocks against ~20 s in one pass (1 thread).
DECODE_BLOCK_FRAMES = 86


class ExactStreamDecoder(StreamDecoder):
    poolable = True

    def __init__(
        self,
        decoder: CausalHiFiGANDecoder,
        layout: FSQLayout,
        device: torch.device,
        block_frames: int = DECODE_BLOCK_FRAMES,
    ):
        self.decoder = decoder
        self.layout = layout
        self.device = device
        self.block_frames = max(1, int(block_frames))
        self.samples_per_frame = decoder.samples_per_frame
        self.frames_pushed = 0
        self._state: dict = {}
        # On a GPU the stream's work runs on a CUDA stream of its own: a chunk decodes while the
        # talker's next step (queued on the default stream) runs, and reading its audio back waits
        # for this stream alone. Its state lives on this stream only (resume moves it here too).
        self._stream = torch.cuda.Stream(device) if torch.device(device).type == "cuda" else None

    def side(self) -> contextlib.AbstractContextManager:
        return torch.cuda.stream(self._stream) if self._stream is not None else contextlib.nullcontext()

    def push(self, codes: Codes) -> np.ndarray:
        x = dequantize(codes, self.layout, frame_offset=self.frames_pushed)
        n = x.shape[0]
        if n == 0:
            return _EMPTY.copy()
        parts = []
        with self.side(), torch.inference_mode():
            x = x.T.unsqueeze(0).to(self.device)
            for start in range(0, n, self.block_frames):
                audio = self.decoder(x[..., start : start + self.block_frames], self._state)
                parts.append(audio[0].float().cpu().numpy())
        self.frames_pushed += n
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def carry(self) -> dict:
        """What this stream has carried so far, as plain CPU values (picklable): another decoder of
        the same weights, in another process, `resume`s from it and goes on as this one would."""
        names = {module: name for name, module in self.decoder.named_modules()}
        with self.side():
            state = {names[module]: value.cpu() for module, value in self._state.items()}
        return {"mode": "exact", "frames_pushed": self.frames_pushed, "state": state}

    def resume(self, carried: dict) -> "ExactStreamDecoder":
        if carried.get("mode") != "exact":
            raise ValueError(f"an exact stream cannot resume a {carried.get('mode')!r} stream's state")
        modules = dict(self.decoder.named_modules())
        self.frames_pushed = int(carried["frames_pushed"])
        with self.side():
            self._state = {modules[name]: value.to(self.device) for name, value in carried["state"].items()}
        return self


class LookbackStreamDecoder(StreamDecoder):
    def __init__(
        self,
        decode_fn: Callable[[torch.Tensor], np.ndarray],
        layout: FSQLayout,
        samples_per_frame: int,
        lookback: int | None,
    ):
        self.decode_fn = decode_fn
        self.layout = layout
        self.samples_per_frame = samples_per_frame
        self.lookback = None if lookback is None else int(lookback)
        self.frames_pushed = 0
        # Only the frames a later push re-decodes: the last `lookback` (all when None).
        self._context: torch.Tensor | None = None

    def push(self, codes: Codes) -> np.ndarray:
        new = check_codes(codes, self.layout, frame_offset=self.frames_pushed).cpu()
        n = new.shape[0]
        if n == 0:
            return _EMPTY.copy()
        self.frames_pushed += n
        window = new if self._context is None else torch.cat([self._context, new])
        skip = window.shape[0] - n
        audio = self.decode_fn(window)
        self._context = window if self.lookback is None else window[window.shape[0] - self.lookback :]
        return np.ascontiguousarray(audio[skip * self.samples_per_frame :], dtype=np.float32)

    def carry(self) -> dict:
        """The frames a later push re-decodes (see ExactStreamDecoder.carry)."""
        return {"mode": "lookback", "frames_pushed": self.frames_pushed, "context": self._context}

    def resume(self, carried: dict) -> "LookbackStreamDecoder":
        if carried.get("mode") != "lookback":
            raise ValueError(f"a lookback stream cannot resume a {carried.get('mode')!r} stream's state")
        self.frames_pushed, self._context = int(carried["frames_pushed"]), carried["context"]
        return self


class GraphedStreamDecoder(StreamDecoder):
    """ExactStreamDecoder's pushes over a borrowed ChunkGraphs set: its state in fixed buffers,
    each chunk one replay (graphed.py). Its state is not a dict of layers, so it is not pooled."""

    def __init__(self, pool: GraphPool, layout: FSQLayout):
        self.layout = layout
        self.samples_per_frame = pool.decoder.samples_per_frame
        self.frames_pushed = 0
        self._pool = pool
        self._graphs: ChunkGraphs | None = pool.acquire()  # None once closed (given back)
        self._sealed = False  # a padded last chunk moved the state past the frames (graphed.py)

    def push(self, codes: Codes) -> np.ndarray:
        return self._push(codes, last=False)

    def push_last(self, codes: Codes) -> np.ndarray:
        return self._push(codes, last=True)

    def _push(self, codes: Codes, last: bool) -> np.ndarray:
        if self._sealed or self._graphs is None:
            raise RuntimeError("this codec stream ended (its last chunk was pushed, or it was closed)")
        x = dequantize_np(codes, self.layout, frame_offset=self.frames_pushed)
        n = x.shape[0]
        if n == 0:
            return _EMPTY.copy()
        self._sealed = last
        audio = self._graphs.decode(x, pad=last)
        self.frames_pushed += n
        return audio

    def carry(self) -> dict:
        """ExactStreamDecoder.carry's values: either kind of exact stream resumes the other's."""
        if self._sealed or self._graphs is None:
            raise RuntimeError("an ended codec stream has nothing to carry")
        names = {module: name for name, module in self._pool.decoder.named_modules()}
        with self._graphs.side():
            # copy=True: on a CPU .cpu() would hand out views of buffers the next push rewrites
            state = {names[module]: value.to("cpu", copy=True) for module, value in self._graphs.state.items()}
        return {"mode": "exact", "frames_pushed": self.frames_pushed, "state": state}

    def resume(self, carried: dict) -> "GraphedStreamDecoder":
        if carried.get("mode") != "exact":
            raise ValueError(f"an exact stream cannot resume a {carried.get('mode')!r} stream's state")
        modules = dict(self._pool.decoder.named_modules())
        self.frames_pushed = int(carried["frames_pushed"])
        if self._graphs is None:
            raise ValueError("a closed stream cannot resume: its graphs went back to the pool")
        state = self._graphs.state
        with self._graphs.side():
            state.zero()  # a layer the carry lacks starts from zeros, as in the eager stream
            for name, value in carried["state"].items():
                state[modules[name]] = value.to(state.flat.device)
        return self

    def close(self) -> None:
        if self._graphs is not None:
            self._pool.release(self._graphs)
            self._graphs = None


class GraphedLookbackDecoder(LookbackStreamDecoder):
    """LookbackStreamDecoder whose windows decode over a borrowed ChunkGraphs set, each from a
    zeroed state (what a fresh decode starts from), its last block padded (graphed.py)."""

    def __init__(self, pool: GraphPool, layout: FSQLayout, lookback: int | None):
        self._pool = pool
        self._graphs: ChunkGraphs | None = pool.acquire()  # None once closed (given back)
        super().__init__(self._decode_window, layout, pool.decoder.samples_per_frame, lookback)

    def _decode_window(self, window: torch.Tensor) -> np.ndarray:
        if self._graphs is None:
            raise RuntimeError("this codec stream was closed")
        with self._graphs.side():
            self._graphs.state.zero()
        return self._graphs.decode(dequantize_np(window, self.layout), pad=True)

    def close(self) -> None:
        if self._graphs is not None:
            self._pool.release(self._graphs)
            self._graphs = None
