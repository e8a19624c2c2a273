"""How a GPU call crosses into the GPU. Every runner has the same two methods:

    runner.stream(request) -> iterator of tasks.StreamItem (close it to stop the call)
    runner.call(fn, *args, duration_s=...) -> fn(resident, *args), a Failure raised as GpuCallError

- `InProcess`: no boundary (a dedicated GPU, a CPU): the tasks run in the calling thread.
- `ZeroGpu`: each task wrapped by `spaces.GPU` with the duration its request asks for (sized in
  the main process: session.py, budget.py); the wrappers are made here, before the start-up
  report, which is when ZeroGPU looks for them. Calls of several visitors run at once, each its
  own call (ZeroGPU schedules each, on its own GPU, billed to its own visitor).
- `Forked` (forked.py): a worker process forked from this one, the way ZeroGPU runs a call, for
  machines without ZeroGPU: the test that nothing needs to cross the boundary in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Protocol, TypeVar

from . import tasks
from .resident import Resident

R = TypeVar("R")


class GpuRunner(Protocol):
    """What every runner offers (the module docstring): InProcess, ZeroGpu, forked.Forked."""

    name: str  # how a run's record names the runner
    resident: Resident

    def stream(self, request: tasks.StreamRequest) -> Generator[tasks.StreamItem]: ...

    def call(self, fn: Callable[..., R], *args: object, duration_s: float = 60.0) -> R: ...


class InProcess:
    name = "in-process"

    def __init__(self, resident: Resident):
        self.resident = resident

    def stream(self, request: tasks.StreamRequest) -> Generator[tasks.StreamItem]:
        return tasks.stream(self.resident, request)

    def call(self, fn: Callable[..., R], *args: object, duration_s: float = 60.0) -> R:
        return tasks.unwrap(tasks.call(self.resident, fn, args))


class ZeroGpu:
    """Every GPU call through `spaces.GPU` (a no-op outside a ZeroGPU Space)."""

    name = "zerogpu"

    def __init__(self, resident: Resident):
        import spaces

        self.resident = resident
        # Bound methods: ZeroGPU forks the worker from this process, so `self` (and the resident
        # placed at start-up) is already there; only the request is pickled.
        self._stream: Callable[[tasks.StreamRequest], Generator[tasks.StreamItem]] = spaces.GPU(
            duration=self._stream_duration)(self._stream_task)
        self._call: Callable[..., object] = spaces.GPU(duration=self._call_duration)(self._call_task)

    def stream(self, request: tasks.StreamRequest) -> Generator[tasks.StreamItem]:
        return self._stream(request)

    def call(self, fn: Callable[..., R], *args: object, duration_s: float = 60.0) -> R:
        result: R | tasks.Failure = self._call(fn, args, duration_s)  # type: ignore[assignment]  # _call_task's
        return tasks.unwrap(result)

    # -- inside the worker ---------------------------------------------------------------------

    def _stream_task(self, request: tasks.StreamRequest) -> Generator[tasks.StreamItem]:
        self.resident.gate.open = True  # this process's copy: the worker holds the GPU now
        yield from tasks.stream(self.resident, request)

    def _call_task(self, fn: Callable[..., R], args: tuple, duration_s: float) -> R | tasks.Failure:
        self.resident.gate.open = True
        return tasks.call(self.resident, fn, args)

    # -- what each call asks for (called in the main process, with the call's arguments) ------

    @staticmethod
    def _stream_duration(request: tasks.StreamRequest) -> float:
        if request.ask_s is None:  # GpuSession sizes every call before it is scheduled
            raise ValueError("a ZeroGPU stream call needs its ask_s (zerogpu/budget.py)")
        return float(request.ask_s)  # sized in the main process, for this call's part (session.py, budget.py)

    @staticmethod
    def _call_duration(fn: Callable[..., object], args: tuple, duration_s: float) -> float:
        return duration_s


if TYPE_CHECKING:  # the type checker holds each class to its seam's Protocol (mypy.ini)
    _InProcess_is_a_GpuRunner: type[GpuRunner] = InProcess
    _ZeroGpu_is_a_GpuRunner: type[GpuRunner] = ZeroGpu
