"""Talker and codec as producer and consumer: the talker runs on its own thread, ahead.

`PipelinedEngine(engine)` is an Engine (model/seams.py) in front of the one it wraps, its other
members forwarded by name (seams.WrappedEngine), except that `stream_frames` runs the
wrapped engine's frame iterator on a worker thread and hands its FrameSteps over through a
queue. The consumer (a SynthesisSession, which runs the codec) decodes chunk N while the talker
already makes the frames of chunk N+1, so a frame costs the slower of the two, not their sum.
Frames, seeds and order are the wrapped engine's: only the timing changes (and, once seen on a
loaded host, a p_stop's last bits: the BLAS may split a product differently on another thread).

Closing the iterator (the Stop button, a client hang-up) stops the worker after the decode step
in flight and closes the wrapped iterator, which frees the engine.

Thread budget: torch's intra-op thread count is one setting per process, so the entry point
sets it (SpeedSettings.threads); the two stages then share the cores between them.
"""

from __future__ import annotations

import queue
import threading
from typing import TYPE_CHECKING, Union

from gepard_demo.model.frames import FrameSource
from gepard_demo.model.seams import Engine, WrappedEngine

if TYPE_CHECKING:
    from gepard_demo.model.generation import FrameStep
    from gepard_demo.model.request import FrameRequest

class _End:
    """The talker is done (the last item it hands over)."""


class _Failure:
    def __init__(self, exc: BaseException):
        self.exc = exc


_END = _End()
_Item = Union["FrameStep", _Failure, _End]  # what the talker hands the consumer


class PipelinedEngine(WrappedEngine):
    def __init__(self, engine: Engine, max_ahead: int = 4096):
        super().__init__(engine)
        self._max_ahead = max_ahead

    def stream_frames(self, request: FrameRequest) -> "PipedFrames":
        handoff: queue.Queue[_Item] = queue.Queue(maxsize=self._max_ahead)
        stop = threading.Event()
        # Create the wrapped iterator here, so bad settings raise in the caller's thread.
        frames = self.engine.stream_frames(request)

        def put(item: _Item) -> bool:
            while not stop.is_set():
                try:
                    handoff.put(item, timeout=0.05)
                    return True
                except queue.Full:
                    continue
            return False

        def produce() -> None:
            try:
                for step in frames:
                    if stop.is_set() or not put(step):
                        break
            except BaseException as exc:  # handed to the consumer, raised there
                put(_Failure(exc))
            finally:
                frames.close()
                put(_END)

        worker = threading.Thread(target=produce, name="gepard-talker", daemon=True)
        return PipedFrames(handoff, stop, worker)


class PipedFrames(FrameSource):
    """The consumer's side of one pipelined stream. `cancel()` from any thread stops the talker
    after its step in flight and wakes a consumer waiting for a frame; `close()` also waits for
    the talker to let go of the engine."""

    def __init__(self, handoff: queue.Queue[_Item], stop: threading.Event, worker: threading.Thread):
        self._handoff, self._stop, self._worker = handoff, stop, worker
        self._started = False  # the talker starts with the first frame asked for, as a generator's would
        self._made = 0
        self._finished = False

    def __iter__(self) -> "PipedFrames":
        return self

    def __next__(self) -> FrameStep:
        if self._stop.is_set():
            raise StopIteration
        if not self._started:
            self._started = True
            self._worker.start()
        item = self._handoff.get()
        if self._stop.is_set():  # cancelled: close() waits for the talker's step in flight, this does not
            raise StopIteration
        if isinstance(item, (_End, _Failure)):  # the talker is done
            self.close()
            if isinstance(item, _End):
                raise StopIteration
            raise item.exc
        self._made += item.codes is not None
        self._finished = self._finished or item.done is not None
        return item

    @property
    def made(self) -> int:  # frames read: the talker runs at most a queue's length ahead of them
        return self._made

    @property
    def finished(self) -> bool:
        return self._finished

    def cancel(self) -> None:
        self._stop.set()
        try:
            self._handoff.put_nowait(_END)  # a full queue has frames: its consumer is not waiting
        except queue.Full:
            pass

    def close(self) -> None:
        self.cancel()
        if self._worker.ident is not None:  # started
            self._worker.join()

    def __del__(self) -> None:
        self._stop.set()


if TYPE_CHECKING:  # the type checker holds each class to its seam's Protocol (mypy.ini)
    from gepard_demo.model.seams import Engine

    _PipelinedEngine_is_a_Engine: type[Engine] = PipelinedEngine
