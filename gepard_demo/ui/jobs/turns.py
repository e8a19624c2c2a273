"""The engine lock the page, the voice group and the Eval tab share, handed out in order.

A plain Lock goes to whichever thread the OS wakes first, and a thread that releases it and asks
again at once (the Eval tab between two batches) usually wins: a visitor's Generate could wait
for a whole evaluation run. `FairLock` hands the lock to the longest waiter, so an evaluation
gives the engine back between batches to anyone who asked meanwhile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import threading
import time
from collections import deque
from typing import Callable

POLL_S = 0.1  # how often a waiter with an `abort` test looks at it


class FairLock:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queue: deque[object] = deque()
        self._held = False

    def acquire(self, blocking: bool = True, timeout: float = -1, abort: Callable[[], bool] | None = None) -> bool:
        """Wait in line for the lock; False when `timeout` passes or `abort()` turns true first
        (checked every POLL_S while keeping the place in line)."""
        with self._cond:
            if not self._held and not self._queue:
                self._held = True
                return True
            if not blocking:
                return False
            ticket = object()
            self._queue.append(ticket)
            deadline = None if timeout < 0 else time.monotonic() + timeout
            try:
                while self._held or self._queue[0] is not ticket:
                    if abort is not None and abort():
                        return False
                    left = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
                    if left <= 0:
                        return False
                    self._cond.wait(left)
                self._held = True
                return True
            finally:
                self._queue.remove(ticket)
                self._cond.notify_all()

    def release(self) -> None:
        with self._cond:
            if not self._held:
                raise RuntimeError("release of an unheld FairLock")
            self._held = False
            self._cond.notify_all()

    def locked(self) -> bool:
        with self._cond:
            return self._held

    def __enter__(self) -> "FairLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


if TYPE_CHECKING:  # the type checker holds each class to its seam's Protocol (mypy.ini)
    from gepard_demo.streaming.seams import TurnLock

    _FairLock_is_a_TurnLock: type[TurnLock] = FairLock
