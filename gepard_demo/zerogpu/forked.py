"""ZeroGPU's process boundary on any machine: GPU calls run in a worker process forked from this
one (`python app.py --zerogpu emulate`, and the tests).

It copies what spaces 0.51's wrappers do (`spaces/zero/wrappers.py`): a worker is forked on a
call (so it inherits the weights placed at start-up, as ZeroGPU's does) and kept for the next
ones; calls at once get a worker each, up to `workers` (ZeroGPU gives each call a GPU of its
own); a call's arguments go to it pickled through a pipe, and each result or yielded item comes
back pickled; a consumer that closes a stream sets a stop event, which the worker checks between
two items; a worker that dies ends the call with an error, and a worker whose main process dies
ends too. `start_delay_s` makes a fresh worker wait before its first call, as ZeroGPU's CUDA
init and weight transfer do (the benchmarks' cold start). The main process's copy of the
model stays behind its shut gate (resident.py), so anything that would need state to cross the
boundary in memory fails here as it would on ZeroGPU: a write in the worker is never seen, a
forward pass in the main process raises.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event
from typing import TYPE_CHECKING, TypeVar, cast

from . import tasks
from .resident import Resident

R = TypeVar("R")

_CTX = multiprocessing.get_context("fork")  # ZeroGPU forks its workers too
_END = ("end", None)


class Forked:
    name = "forked"

    def __init__(self, resident: Resident, workers: int = 4, start_delay_s: float = 0.0):
        self.resident = resident
        self.start_delay_s = start_delay_s
        self._free: list[_Worker] = []  # idle workers, kept for the next calls
        self._all: list[_Worker] = []
        self._cond = threading.Condition()
        self._capacity = workers

    # -- main process ---------------------------------------------------------------------------

    def stream(self, request: tasks.StreamRequest) -> Generator[tasks.StreamItem]:
        worker = self._take()
        try:
            worker.start(("stream", request))
            open_call = True  # the worker is still on this call
            try:
                while True:
                    try:
                        kind, value = worker.next()
                    except tasks.GpuCallError:
                        open_call = False
                        raise
                    if kind == "end":
                        open_call = False
                        return
                    yield cast(tasks.StreamItem, value)  # a stream call's items (tasks.stream)
            finally:
                if open_call:  # the consumer stopped: the worker ends at its next item
                    worker.stop_call()
                    while worker.next()[0] != "end":
                        pass
        finally:
            self._give_back(worker)

    def call(self, fn: Callable[..., R], *args: object, duration_s: float = 60.0) -> R:
        worker = self._take()
        try:
            worker.start(("call", (fn, args)))
            kind, value = worker.next()
            return tasks.unwrap(cast("R | tasks.Failure", value))  # what fn returned, pickled back
        finally:
            self._give_back(worker)

    def close(self) -> None:
        """End the workers (they also end by themselves when this process goes away)."""
        with self._cond:
            workers, self._all, self._free = self._all, [], []
        for w in workers:
            w.close()

    def _take(self) -> "_Worker":
        with self._cond:
            while not self._free and len(self._all) >= self._capacity:
                self._cond.wait()
            if self._free:
                return self._free.pop()
            worker = _Worker(self.resident, self.start_delay_s)
            self._all.append(worker)
            return worker

    def _give_back(self, worker: "_Worker") -> None:
        with self._cond:
            if worker in self._all:
                self._free.append(worker)
            self._cond.notify()


@dataclass
class _Link:
    """A live worker process, this side's ends of its two pipes and its call's stop event."""

    process: BaseProcess
    calls: Connection
    results: Connection
    stop: Event


class _Worker:
    """One forked worker process and the pipes to it (a fresh one when the last has died)."""

    def __init__(self, resident: Resident, start_delay_s: float):
        self.resident, self.start_delay_s = resident, start_delay_s
        self.link: _Link | None = None

    def start(self, message: tuple) -> None:
        link = self.link
        if link is None or not link.process.is_alive():
            # One pipe each way. Each side closes the ends it does not use, so a side that goes
            # away is an end of file to the other: a dead worker ends the call waiting on it
            # (ZeroGPU's sentinel does that), and a worker outlives no main process.
            calls_r, calls_w = _CTX.Pipe(duplex=False)
            results_r, results_w = _CTX.Pipe(duplex=False)
            stop = _CTX.Event()
            process = _CTX.Process(target=_serve, daemon=True, name="gepard-gpu-worker",
                                   args=(self.resident, calls_r, calls_w, results_r, results_w, stop,
                                         self.start_delay_s))
            process.start()
            calls_r.close()
            results_w.close()
            link = self.link = _Link(process, calls_w, results_r, stop)
        link.stop.clear()
        link.calls.send(message)  # pickled here: an unpicklable argument fails in this process

    def stop_call(self) -> None:
        """The consumer stopped: the worker ends its call at its next item."""
        if self.link is not None:
            self.link.stop.set()

    def next(self) -> tuple[str, object]:
        link = self.link
        if link is None:
            raise tasks.GpuCallError("the GPU worker process is gone")
        try:
            return link.results.recv()
        except (EOFError, OSError):
            link.process.join(timeout=5)
            code = link.process.exitcode
            self.link = None
            raise tasks.GpuCallError(f"the GPU worker process died (exit code {code})") from None

    def close(self) -> None:
        if (link := self.link) is not None:
            link.calls.close()
            link.process.join(timeout=10)
            self.link = None


# -- the worker process ---------------------------------------------------------------------------

def _serve(resident: Resident, calls, calls_w, results_r, results, stop, start_delay_s: float) -> None:
    calls_w.close()
    results_r.close()
    resident.gate.open = True  # this process's copy: it holds the GPU
    if start_delay_s:
        time.sleep(start_delay_s)  # what ZeroGPU's /allow, CUDA init and weight transfer take
    try:
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
    except (BrokenPipeError, ConnectionResetError):  # the main process went away mid-call: end quietly
        return


if TYPE_CHECKING:  # the type checker holds each class to its seam's Protocol (mypy.ini)
    from gepard_demo.zerogpu.runners import GpuRunner

    _Forked_is_a_GpuRunner: type[GpuRunner] = Forked
