"""The codec's chunk decode at fixed shapes, for a GPU to run as one CUDA graph replay per chunk.

Exact streaming carries each causal layer's state between pushes (hifigan.py). Here that state
lives in one fixed buffer, a view of it per layer, updated in place (`FixedState`), and each chunk
size a stream pushes has its own input and output buffers and, on a CUDA device, a graph captured
over all of them (`ChunkGraphs`): a push copies its frames in, replays, and reads its samples out.
The sizes are the stream's chunk sizes (the page's 10 then 10, the server's ramp 10, 10, 20, 40,
80, then 86), each captured when a stream first pushes it or at start-up (`GraphPool.warm`); a
long push is cut into blocks of `block_frames` as the eager stream cuts it, so every block runs at
the eager stream's shape and the samples are its samples.

The final chunk (`push_last`) may be shorter than every graph: it runs padded with zero frames
into the smallest graph that holds it and keeps only its own samples, since a causal decoder's
first n frames never see what follows them. The padding carries the state past the real frames,
so the stream takes no push after it. Lookback mode decodes each window from a zeroed state and
pads its last block the same way.

On a CPU (cuda_graphs "on") the same buffers run eagerly: the path the tests hold to the eager
stream. One set of buffers and graphs serves one stream at a time; the codec keeps its sets in a
`GraphPool` and a stream gives its set back when it closes. Each set has its own CUDA stream (a
chunk decodes while the talker's next step runs, as stream.py's) and its own graph memory pool,
so sets of concurrent streams never share memory.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from .hifigan import CausalConv, CausalConvTranspose, CausalHiFiGANDecoder

CHUNK_SCOPE = "gepard::codec_chunk"  # a chunk's replay, named for the profiler (benchmarks/stream_timeline.py)
MAX_SIZES = 16  # graphs a set captures; a push of yet another size runs eagerly on the same buffers


class FixedState(dict):
    """layer -> its carried state, a view of one flat buffer: a layer's write (`state[layer] = v`,
    hifigan.py) copies into its view, so the tensors a graph was captured on stay the ones it
    reads. A fresh stream's state is zeros, what the eager stream's missing state stands for."""

    def __init__(self, decoder: CausalHiFiGANDecoder, device: torch.device):
        super().__init__()
        shapes: dict[torch.nn.Module, tuple[int, int, int]] = {}
        for m in decoder.modules():
            if isinstance(m, CausalConv) and m.context:
                shapes[m] = (1, m.conv.in_channels, m.context)
            elif isinstance(m, CausalConvTranspose) and m.overlap > 0:
                shapes[m] = (1, m.conv.out_channels, m.overlap)
        self.flat = torch.zeros(sum(a * b * c for a, b, c in shapes.values()), device=device)
        at = 0
        for m, shape in shapes.items():
            n = shape[0] * shape[1] * shape[2]
            dict.__setitem__(self, m, self.flat[at:at + n].view(shape))
            at += n

    def __setitem__(self, layer: object, value: torch.Tensor) -> None:
        dict.__getitem__(self, layer).copy_(value)

    def zero(self) -> None:
        self.flat.zero_()


@dataclass
class ChunkCapture:
    """One chunk size's graph: the time and device memory its capture took, or why it runs eagerly."""

    frames: int
    seconds: float
    bytes: int
    error: str | None = None

    def describe(self) -> str:
        if self.error:
            return f"{self.frames} frames: eager ({self.error})"
        return f"{self.frames} frames: {self.seconds * 1000:.0f} ms, {self.bytes / 2**20:.0f} MiB"


@dataclass
class _Runner:
    frames: int
    x: torch.Tensor  # (1, codes, frames) decoder input
    out: torch.Tensor  # (1, frames * samples_per_frame)
    host_x: torch.Tensor  # (codes, frames) on the host (pinned on a GPU): filled in NumPy, one copy in
    host_out: torch.Tensor  # (frames * samples_per_frame,) on the host: one copy out
    fn: Callable[[], object]  # one eager decode of the chunk into `out`
    graph: torch.cuda.CUDAGraph | None = None

    def run(self) -> None:
        with torch.profiler.record_function(CHUNK_SCOPE):
            if self.graph is not None:
                self.graph.replay()
            else:
                self.fn()


class ChunkGraphs:
    """One stream's fixed buffers: its state, and a runner (buffers, graph) per chunk size."""

    def __init__(self, pool: "GraphPool", device: torch.device):
        self.pool, self.device = pool, device
        self.decoder = pool.decoder
        self.state = FixedState(self.decoder, device)
        self.graphs = pool.graphs and device.type == "cuda"
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self._done = torch.cuda.Event() if device.type == "cuda" else None  # a chunk's samples are on the host
        self._runners: dict[int, _Runner] = {}
        self._memory: Any = None  # this set's graph memory pool (torch.cuda.graph_pool_handle)

    def side(self) -> contextlib.AbstractContextManager:
        return torch.cuda.stream(self.stream) if self.stream is not None else contextlib.nullcontext()

    @property
    def sizes(self) -> list[int]:
        return sorted(self._runners)

    def decode(self, x: np.ndarray, pad: bool) -> np.ndarray:
        """(n, codes) decoder input (fsq.dequantize_np) -> n * samples_per_frame samples, in blocks
        of block_frames with the state carried; pad: the last block may run padded (module
        docstring). A block launches three things: its frames' copy in, the replay, its samples'
        copy out; the host then waits for this stream's copy alone."""
        n, block, spf = x.shape[0], self.pool.block_frames, self.decoder.samples_per_frame
        parts = []
        with self.side(), torch.inference_mode():
            for start in range(0, n, block):
                m = min(block, n - start)
                runner = self._runner(self._padded(m) if pad and start + m == n else m)
                staged = runner.host_x.numpy()
                staged[:, :m] = x[start:start + m].T
                staged[:, m:] = 0.0  # a padded block's extra frames: zeros, which its kept samples never see
                runner.x[0].copy_(runner.host_x, non_blocking=True)
                runner.run()
                runner.host_out[: m * spf].copy_(runner.out[0, : m * spf], non_blocking=True)
                if self._done is not None:
                    self._done.record()
                    self._done.synchronize()
                parts.append(runner.host_out[: m * spf].numpy().copy())  # the buffer is the next push's
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _padded(self, m: int) -> int:
        """The size a last block of m frames runs at: its own where it has one, else the smallest
        that holds it, else its own (captured now)."""
        if m in self._runners:
            return m
        return min((s for s in self._runners if s > m), default=m)

    def _runner(self, frames: int) -> _Runner:
        runner = self._runners.get(frames)
        if runner is None:
            runner = self._build(frames)
            if len(self._runners) < MAX_SIZES:
                self._runners[frames] = runner
        return runner

    def _build(self, frames: int) -> _Runner:
        dec, state = self.decoder, self.state
        x = torch.zeros(1, dec.cfg.input_dim, frames, device=self.device)
        out = torch.zeros(1, frames * dec.samples_per_frame, device=self.device)
        pinned = self.device.type == "cuda"
        host_x = torch.zeros(dec.cfg.input_dim, frames, pin_memory=pinned)
        host_out = torch.zeros(frames * dec.samples_per_frame, pin_memory=pinned)
        runner = _Runner(frames, x, out, host_x, host_out, lambda: out.copy_(dec(x, state)))
        if self.graphs and len(self._runners) < MAX_SIZES:
            self._capture(runner)
        return runner

    def _capture(self, runner: _Runner) -> None:
        """Capture `runner` as a graph; the state is put back as it was (warm-up runs the step)."""
        device, start = self.device, time.perf_counter()
        torch.cuda.synchronize(device)
        held, saved = torch.cuda.memory_allocated(device), self.state.flat.clone()
        try:
            with torch.cuda.stream(self.stream):
                for _ in range(2):  # warm-up: cuDNN's plans and lazy inits outside the graph
                    runner.fn()
            torch.cuda.synchronize(device)
            graph = torch.cuda.CUDAGraph()
            if self._memory is None:
                self._memory = torch.cuda.graph_pool_handle()
            # thread_local: a server's talker replays its own graphs on another thread meanwhile
            with torch.cuda.graph(graph, pool=self._memory, capture_error_mode="thread_local"):
                runner.fn()
            torch.cuda.synchronize(device)
        except Exception as exc:  # noqa: BLE001 - the size runs eagerly, and the captures say why
            if self.pool.required:
                raise RuntimeError(f"cuda_graphs=on: capturing the codec's {runner.frames}-frame chunk failed: "
                                   f"{exc}") from exc
            self.pool.note(ChunkCapture(runner.frames, 0.0, 0, f"{type(exc).__name__}: {exc}"[:200]))
            return
        finally:
            self.state.flat.copy_(saved)
            torch.cuda.synchronize(device)
        runner.graph = graph
        self.pool.note(ChunkCapture(runner.frames, time.perf_counter() - start,
                                    torch.cuda.memory_allocated(device) - held))


class GraphPool:
    """A codec's ChunkGraphs sets, lent to one stream at a time (module docstring).

    graphs: capture CUDA graphs where the decoder is on a CUDA device (elsewhere the buffers run
    eagerly); required: a failed capture raises instead of running that size eagerly."""

    def __init__(self, decoder: CausalHiFiGANDecoder, block_frames: int, graphs: bool = True, required: bool = False):
        self.decoder, self.block_frames = decoder, max(1, int(block_frames))
        self.graphs, self.required = graphs, required
        self.captures: list[ChunkCapture] = []
        self._free: list[ChunkGraphs] = []
        self._lock = threading.Lock()

    def acquire(self) -> ChunkGraphs:
        """A free set on the decoder's device now (ZeroGPU moves it after start-up), else a new one."""
        device = next(self.decoder.parameters()).device
        with self._lock:
            self._free = [g for g in self._free if g.device == device]
            if self._free:
                return self._free.pop()
        return ChunkGraphs(self, device)

    def release(self, graphs: ChunkGraphs) -> None:
        with graphs.side():
            graphs.state.zero()
        with self._lock:
            self._free.append(graphs)

    def warm(self, sizes: list[int]) -> list[ChunkCapture]:
        """One set with a graph of each size, before the first stream needs it; what each cost."""
        before = len(self.captures)
        graphs = self.acquire()
        with graphs.side(), torch.inference_mode():
            for size in sorted(set(sizes)):
                graphs._runner(min(size, self.block_frames))
        self.release(graphs)
        return self.captures[before:]

    def note(self, capture: ChunkCapture) -> None:
        with self._lock:
            self.captures.append(capture)
