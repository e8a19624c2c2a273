"""ZeroGPU's process boundary on any machine: GPU calls run in a worker process forked from this
one (`python app.py --zerogpu emulate`, and the tests).

It copies what spaces 0.51's wrappers do (`spaces/zero/wrappers.py`): the worker is forked on the
first call (so it inherits the weights placed at start-up, as ZeroGPU's does) and kept for the
next ones; a call's arguments go to it pickled through a queue, and each result or yielded item
comes back pickled; a consumer that closes a stream sets a stop event, which the worker checks
between two items; a worker that dies ends the call with an error. The main process's copy of the
model stays behind its shut gate (resident.py), so anything that would need state to cross the
boundary in memory fails here as it would on ZeroGPU: a write in the worker is never seen, a
forward pass in the main process raises.
"""

from __future__ import annotations

import multiprocessing
import threading
from typing import Any, Callable, Iterator

from . import tasks
from .resident import Resident

_CTX = multiprocessing.get_context("fork")  # ZeroGPU forks its workers too
_END = ("end", None)


class Forked:
    name = "forked"

    def __init__(self, resident: Resident):
        self.resident = resident
        self._lock = threading.Lock()  # one call at a time: the emulated GPU is one worker
        self._process = None
        self._calls = self._results = self._stop = None

    # -- main process ---------------------------------------------------------------------------

    def stream(self, request: tasks.StreamRequest) -> Iterator[tasks.StreamItem]:
        with self._lock:
            self._start(("stream", request))
            open_call = True  # the worker is still on this call
            try:
                while True:
                    try:
                        kind, value = self._next()
                    except tasks.GpuCallError:
                        open_call = False
                        raise
                    if kind == "end":
                        open_call = False
                        return
                    yield value
            finally:
                if open_call:  # the consumer stopped: the worker ends at its next item
                    self._stop.set()
                    while self._next()[0] != "end":
                        pass

    def call(self, fn: Callable[..., Any], *args: Any, duration_s: float = 60.0) -> Any:
        with self._lock:
            self._start(("call", (fn, args)))
            kind, value = self._next()
            return tasks.unwrap(value)

    def close(self) -> None:
        with self._lock:
            if self._process is not None and self._process.is_alive():
                self._calls.put(None)
                self._process.join(timeout=10)

    def _start(self, message: tuple) -> None:
        if self._process is None or not self._process.is_alive():
            self._calls, self._results, self._stop = _CTX.SimpleQueue(), _CTX.SimpleQueue(), _CTX.Event()
            self._process = _CTX.Process(target=_serve, args=(self.resident, self._calls, self._results, self._stop),
                                         daemon=True, name="gepard-gpu-worker")
            self._process.start()
            threading.Thread(target=self._watch, args=(self._process, self._results), daemon=True).start()
        self._stop.clear()
        self._calls.put(message)  # pickled here: an unpicklable argument fails in this process

    def _next(self) -> tuple[str, Any]:
        kind, value = self._results.get()
        if kind == "died":
            raise tasks.GpuCallError(f"the GPU worker process died (exit code {value})")
        return kind, value

    @staticmethod
    def _watch(process, results) -> None:
        """ZeroGPU's sentinel: a worker that exits while a call waits must end that call."""
        process.join()
        results.put(("died", process.exitcode))


# -- the worker process ---------------------------------------------------------------------------

def _serve(resident: Resident, calls, results, stop) -> None:
    resident.gate.open = True  # this process's copy: it holds the GPU
    while True:
        message = calls.get()
        if message is None:
            return
        kind, payload = message
        if kind == "call":
            fn, args = payload
            results.put(("value", tasks.call(resident, fn, args)))
            continue
        items = tasks.stream(resident, payload)
        for item in items:
            if stop.is_set():
                items.close()
                break
            results.put(("item", item))
        results.put(_END)
