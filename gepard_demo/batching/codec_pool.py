"""N streams mean N codec streams: `CodecPool` decodes their chunks together where they line up.

The pool is a Codec (codec/base.py) in front of the one it wraps (sample_rate, decode, ... are
forwarded by name); its `streamer` in exact mode returns a `PooledStream`, whose `push` hands the
chunk to the pool's thread and waits for its samples. The thread takes every push waiting, lets
the others that are due arrive (at most `window_s`), and decodes each group of chunks of one
length in a single decoder call, every stream with its own exact state (codec/batched.py); a
chunk alone is pushed alone.

Chunks line up because a running batch makes one frame for every stream per step: while other
pooled streams are open, a session cuts its chunks at the batch's clock (`aligned`: after its
first chunk, at every step where batch_step + 1 is a multiple of chunk_frames), so all the
streams with the same chunk size push at the same step. Exact decoding makes the cut points
inaudible: the samples equal one whole decode for any chunking. Lookback mode (whose audio depends on the cuts) is not
pooled.

Decoding together is worth it where the decoder is not already busy with one chunk: measured
in benchmarks/concurrency.py (section "codec"), on this 2-core CPU at the full NanoCodec size 4
streams' 10-frame chunks decode 1.05-1.08x faster together than one after the other on one
thread, 1.24-1.56x on two; 43-frame chunks gain nothing (up to 14% slower); on a GPU a 10-frame
chunk leaves most of the device idle.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np

from gepard_demo.codec.base import Codec, StreamDecoder
from gepard_demo.codec.batched import decode_together
from gepard_demo.codec.fsq import Codes
from gepard_demo.codec.stream import ExactStreamDecoder

if TYPE_CHECKING:
    import torch
    from torch import nn


WINDOW_S = 0.005  # how long the first push of a step waits for the others that are due


@dataclass(eq=False)
class _Push:
    stream: "PooledStream"
    codes: Codes
    done: threading.Event = field(default_factory=threading.Event)
    samples: np.ndarray | None = None
    error: BaseException | None = None
    cost_s: float = 0.0  # its share of the decoder call (by frames), waiting excluded


class CodecPool(Codec):
    def __init__(self, codec: Codec, window_s: float = WINDOW_S):
        self.codec = codec
        # The wrapped codec's identity, which a pool does not change.
        self.backend, self.sample_rate, self.samples_per_frame = codec.backend, codec.sample_rate, codec.samples_per_frame
        self.layout, self.source = codec.layout, codec.source
        self.window_s = window_s
        self._cond = threading.Condition()
        self._pending: list[_Push] = []
        self._open: set[PooledStream] = set()
        self._thread: threading.Thread | None = None
        self.calls = {"together": 0, "alone": 0}  # decoder calls made, for the benchmark and tests
        self.busy_s = 0.0  # seconds the pool's thread spent decoding (not waiting), and the frames
        self.frames = 0

    # -- the wrapped codec's own work --------------------------------------------------------------

    def dequantize(self, codes: Codes) -> torch.Tensor:
        return self.codec.dequantize(codes)

    def decode(self, codes: Codes) -> np.ndarray:
        return self.codec.decode(codes)

    def modules(self) -> list[nn.Module]:
        return self.codec.modules()

    def use_cpu_bf16(self, on: bool) -> None:
        self.codec.use_cpu_bf16(on)

    # -- the pool ----------------------------------------------------------------------------------

    def streamer(self, mode: str = "exact", lookback: int = 8) -> StreamDecoder:
        inner = self.codec.streamer(mode=mode, lookback=lookback)
        if not inner.poolable:  # lookback, or a backend without carried state
            return inner
        stream = PooledStream(self, cast(ExactStreamDecoder, inner))  # poolable: an exact stream, or one in its place
        with self._cond:
            self._open.add(stream)
        return stream

    def _push(self, stream: "PooledStream", codes: Codes) -> np.ndarray:
        job = _Push(stream, codes)
        with self._cond:
            self._pending.append(job)
            self._cond.notify_all()
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="gepard-codec-pool", daemon=True)
                self._thread.start()
        job.done.wait()
        if job.error is not None:
            raise job.error
        stream.last_cost_s = job.cost_s
        assert job.samples is not None  # a push that ended without an error has its samples
        return job.samples

    def _close(self, stream: "PooledStream") -> None:
        with self._cond:
            self._open.discard(stream)
            self._cond.notify_all()

    def _drop(self, stream: "PooledStream") -> None:
        """A cancelled stream's pushes that no decoder call has taken yet end now, with no samples
        (one being decoded finishes: a decoder call cannot be interrupted)."""
        with self._cond:
            mine = [job for job in self._pending if job.stream is stream]
            self._pending = [job for job in self._pending if job.stream is not stream]
        for job in mine:
            job.samples = np.zeros(0, dtype=np.float32)
            job.done.set()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._pending:
                    self._cond.wait()
                # The others due at this step arrive within the window (each open stream pushes at most once).
                deadline = time.perf_counter() + self.window_s
                while len(self._pending) < len(self._open) and (left := deadline - time.perf_counter()) > 0:
                    self._cond.wait(left)
                jobs, self._pending = self._pending, []
            groups: dict[int, list[_Push]] = {}
            for job in jobs:
                groups.setdefault(len(job.codes), []).append(job)
            for group in groups.values():
                self._decode(group)

    def _decode(self, group: list[_Push]) -> None:
        t0 = time.perf_counter()
        try:
            if len(group) == 1:
                out = [group[0].stream.inner.push(group[0].codes)]
                self.calls["alone"] += 1
            else:
                out = decode_together([j.stream.inner for j in group], [j.codes for j in group])
                self.calls["together"] += 1
            for job, samples in zip(group, out):
                job.samples = samples
            self.frames += sum(len(j.codes) for j in group)
        except BaseException as exc:  # noqa: BLE001 - raised in each waiting session's own thread
            for job in group:
                job.error = exc
        spent = time.perf_counter() - t0
        self.busy_s += spent
        for job in group:
            job.cost_s = spent / len(group)
        for job in group:
            job.done.set()


class PooledStream(StreamDecoder):
    """An exact stream whose pushes go through its pool (and so, lined up, share decoder calls)."""

    def __init__(self, pool: CodecPool, inner: ExactStreamDecoder):
        self.pool, self.inner = pool, inner
        self.samples_per_frame = inner.samples_per_frame
        self.last_cost_s: float | None = None  # the last push's share of its decoder call

    @property
    def aligned(self) -> bool:
        """Whether SynthesisSession should cut its chunks at the batch's clock: while other pooled
        streams are open (a stream alone keeps its plain chunking, so a lone request's audio does
        not depend on the batch's clock)."""
        return len(self.pool._open) > 1

    @property
    def frames_pushed(self) -> int:
        return self.inner.frames_pushed

    def push(self, codes: Codes) -> np.ndarray:
        return self.pool._push(self, codes)

    def cancel(self) -> None:
        """Any thread: a push of this stream still waiting for the pool returns at once, empty."""
        self.pool._drop(self)

    def close(self) -> None:
        self.pool._close(self)
