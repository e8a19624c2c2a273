"""Talker and codec as producer and consumer: the talker runs on its own thread, ahead.

`PipelinedEngine(engine)` looks like the engine it wraps, except that `stream_frames` runs the
wrapped engine's frame iterator on a worker thread and hands its FrameSteps over through a
queue. The consumer (a SynthesisSession, which runs the codec) decodes chunk N while the talker
already makes the frames of chunk N+1, so a frame costs the slower of the two, not their sum.
Frames, seeds and order are exactly the wrapped engine's: only the timing changes.

Closing the iterator (the Stop button, a client hang-up) stops the worker after the decode step
in flight and closes the wrapped iterator, which frees the engine.

Thread budget: torch's intra-op thread count is one setting per process, so the entry point
sets it (SpeedSettings.threads); the two stages then share the cores between them.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any

_END = object()


class _Failure:
    def __init__(self, exc: BaseException):
        self.exc = exc


class PipelinedEngine:
    def __init__(self, engine: Any, max_ahead: int = 4096):
        self._engine = engine
        self._max_ahead = max_ahead

    @property
    def wrapped(self) -> Any:
        return self._engine

    def __getattr__(self, name: str) -> Any:  # config, tokenizer, talker, model_info, generate, ...
        return getattr(self._engine, name)

    def stream_frames(self, text: str, settings: Any, **voice: Any) -> Iterator[Any]:
        handoff: queue.Queue = queue.Queue(maxsize=self._max_ahead)
        stop = threading.Event()
        # Create the wrapped iterator here, so bad settings raise in the caller's thread.
        frames = self._engine.stream_frames(text, settings, **voice)  # voice: speaker=prefix (cloning)

        def put(item: Any) -> bool:
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
        return self._consume(handoff, stop, worker)

    @staticmethod
    def _consume(handoff: queue.Queue, stop: threading.Event, worker: threading.Thread) -> Iterator[Any]:
        worker.start()
        try:
            while True:
                item = handoff.get()
                if item is _END:
                    return
                if isinstance(item, _Failure):
                    raise item.exc
                yield item
        finally:
            stop.set()
            worker.join()
