"""The fixed-shape step's buckets: its buffers per (rows, columns), and the CUDA graph captured for
each, kept with the engine and lent to one batch at a time.

A shape's buffers and its graph belong together (a graph replays on the very tensors it was
captured on), so a batch borrows a whole `Shape` and returns it when it empties; the next batch of
that size reuses it without a new capture (a ZeroGPU worker reuses its graphs while it stays warm).
A batch that outgrows its shape (more rows, or a row that needs more columns) borrows the next
bucket's and copies its rows over.

Capture runs the step on a shape whose slots are all free: a free slot's work changes no row's
state (it writes the scratch column only, slots.py), so the warm-up and the capture leave the
buffers as they were. Where capture fails, the shape runs eagerly, or (cuda_graphs "on") the
error is raised.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from gepard_demo.model.config import full_attention_layers
from gepard_demo.model.talker import GepardTalker

from .readback import Readback
from .slots import SlotCache, Tables
from .step import Outputs, run_step

if TYPE_CHECKING:
    from torch.cuda import _POOL_HANDLE  # torch's own name for a graph memory pool's handle

STEP_SCOPE = "gepard::fixed_step"
MIN_COLUMNS = 256  # the smallest column bucket: a short sentence's prompt and frames
# The row buckets captured before the first request (engine.warm): one request, and one guided
# (two rows). A batch that needs a bigger bucket captures it when it first gets there.
WARM_ROWS = (1, 2)


def bucket(n: int, least: int = 1) -> int:
    """The power of two at or above `n` (and `least`): the bucket a row or column count falls in."""
    size = least
    while size < n:
        size *= 2
    return size


@dataclass
class Capture:
    """One graph captured: its shape, the time it took and the device memory it holds."""

    rows: int
    columns: int
    seconds: float
    bytes: int
    error: str | None = None  # why it runs eagerly instead

    def describe(self) -> str:
        if self.error:
            return f"{self.rows}x{self.columns}: eager ({self.error})"
        return f"{self.rows}x{self.columns}: {self.seconds * 1000:.0f} ms, {self.bytes / 2**20:.0f} MiB"


@dataclass
class Shape:
    """One bucket's buffers, and its graph where one was captured."""

    tables: Tables
    cache: SlotCache
    out: Outputs
    readback: Readback
    step_fn: Callable[[], None] = field(repr=False)  # one eager step over these buffers
    graph: torch.cuda.CUDAGraph | None = None

    @property
    def rows(self) -> int:
        return self.cache.rows

    @property
    def columns(self) -> int:
        return self.cache.columns

    def run(self) -> None:
        """One step: the graph's replay, else the step itself (named for the profiler:
        benchmarks/decode_loops.py counts what runs inside it apart from the host's own work)."""
        with torch.profiler.record_function(STEP_SCOPE):
            if self.graph is not None:
                self.graph.replay()
            else:
                self.step_fn()

    def reset(self) -> None:
        """Every slot free again (the buffers' state at capture)."""
        self.tables.reset()


class StepShapes:
    """The engine's shapes, by (rows, columns), with their graphs (module docstring).

    graphs: capture a CUDA graph per shape (a CUDA device only); required: a failed capture
    raises instead of running eagerly (cuda_graphs "on")."""

    def __init__(self, talker: GepardTalker, graphs: bool, required: bool = False):
        self.talker = talker
        self.graphs = graphs and talker.device.type == "cuda"
        self.required = required
        self.captures: list[Capture] = []
        self._free: dict[tuple[int, int], list[Shape]] = {}
        self._lock = threading.Lock()
        self._pool: _POOL_HANDLE | None = None  # the graphs' shared memory pool, made at the first capture

    def acquire(self, rows: int, columns: int) -> Shape:
        """A free shape of at least rows x columns slots (bucketed), capturing one if none is free."""
        key = (bucket(rows), bucket(columns, MIN_COLUMNS))
        with self._lock:
            free = self._free.get(key)
            if free:
                return free.pop()
        return self._build(*key)

    def release(self, shape: Shape) -> None:
        with torch.inference_mode():
            shape.reset()
        with self._lock:
            self._free.setdefault((shape.rows, shape.columns), []).append(shape)

    def warm(self, rows: list[int], columns: int) -> list[Capture]:
        """Build (and capture) a shape of each row count at start-up, so no request waits for a
        capture; returns what each cost."""
        before = len(self.captures)
        for n in rows:
            self.release(self.acquire(n, columns))
        return self.captures[before:]

    def _build(self, rows: int, columns: int) -> Shape:
        talker = self.talker
        cfg = talker.config.backbone
        heads, levels = talker.logits_shape
        device = talker.device
        layers = full_attention_layers(cfg)
        with torch.inference_mode():
            tables = Tables.empty(rows, columns, heads, levels, talker.config.hidden_size, columns, device)
            cache = SlotCache(layers, rows, cfg.num_key_value_heads, columns, cfg.head_dim, talker.backbone_dtype, device)
            out = Outputs.empty(rows, heads, device)
            shape = Shape(tables, cache, out, Readback(out), lambda: run_step(talker, tables, cache, out))
            if self.graphs:
                self._capture(shape)
        return shape

    def _capture(self, shape: Shape) -> None:
        device = self.talker.device
        start, held = time.perf_counter(), 0
        try:
            torch.cuda.synchronize(device)
            held = torch.cuda.memory_allocated(device)
            side = torch.cuda.Stream(device)
            side.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(side):
                for _ in range(2):  # warm-up: lazy inits (cuBLAS handles, the fused heads) outside the graph
                    shape.step_fn()
            torch.cuda.current_stream(device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            if self._pool is None:
                self._pool = torch.cuda.graph_pool_handle()
            with torch.cuda.graph(graph, pool=self._pool):
                shape.step_fn()
            torch.cuda.synchronize(device)
        except Exception as exc:  # noqa: BLE001 - the shape runs eagerly, and the start-up line says why
            if self.required:
                raise RuntimeError(f"cuda_graphs=on: capturing the {shape.rows}x{shape.columns} decode step "
                                   f"failed: {exc}") from exc
            self.captures.append(Capture(shape.rows, shape.columns, 0.0, 0, f"{type(exc).__name__}: {exc}"[:200]))
            shape.reset()
            return
        shape.graph = graph
        self.captures.append(Capture(shape.rows, shape.columns, time.perf_counter() - start,
                                     torch.cuda.memory_allocated(device) - held))
