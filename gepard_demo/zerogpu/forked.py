"""ZeroGPU's process boundary on any machine: GPU calls run in a worker process forked from this
one (`python app.py --zerogpu emulate`, and the tests).

It copies what spaces 0.51's wrappers do (`spaces/zero/wrappers.py`): the worker is forked on the
first call (so it inherits the weights placed at start-up, as ZeroGPU's does) and kept for the
next ones; a call's arguments go to it pickled through a queue, and each result or yielded item
comes back pickled; a consumer that closes a stream sets a stop event, which the worker checks
between two items; a worker that dies ends the call with an error, and a worker whose main
process dies ends too. The main process's copy of the
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
        """End the worker (it also ends by itself when this process goes away)."""
        with self._lock:
            if self._process is not None:
                self._calls.close()
                self._process.join(timeout=10)
                self._process = None

    def _start(self, message: tuple) -> None:
        if self._process is None or not self._process.is_alive():
            # One pipe each way. Each side closes the ends it does not use, so a side that goes
            # away is an end of file to the other: a dead worker ends the call waiting on it
            # (ZeroGPU's sentinel does that), and a worker outlives no main process.
            calls_r, calls_w = _CTX.Pipe(duplex=False)
            results_r, results_w = _CTX.Pipe(duplex=False)
            self._stop = _CTX.Event()
            self._process = _CTX.Process(target=_serve, daemon=True, name="gepard-gpu-worker",
                                         args=(self.resident, calls_r, calls_w, results_r, results_w, self._stop))
            self._process.start()
            calls_r.close()
            results_w.close()
            self._calls, self._results = calls_w, results_r
        self._stop.clear()
        self._calls.send(message)  # pickled here: an unpicklable argument fails in this process

    def _next(self) -> tuple[str, Any]:
        try:
            return self._results.recv()
        except (EOFError, OSError):
            self._process.join(timeout=5)
            code = self._process.exitcode
            self._process = None
            raise tasks.GpuCallError(f"the GPU worker process died (exit code {code})") from None


# -- the worker process ---------------------------------------------------------------------------

def _serve(resident: Resident, calls, calls_w, results_r, results, stop) -> None:
    calls_w.close()
    results_r.close()
    resident.gate.open = True  # this process's copy: it holds the GPU
    while True:
        try:
            message = calls.recv()
        except EOFError:  # the main process is gone (or closed us)
            return
        kind, payload = message
        if kind == "call":
            fn, args = payload
            results.send(("value", tasks.call(resident, fn, args)))
            continue
        items = tasks.stream(resident, payload)
        for item in items:
            if stop.is_set():
                items.close()
                break
            results.send(("item", item))
        results.send(_END)
