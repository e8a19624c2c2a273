"""The page's audio listeners as the job registry counts them: open streams per client address,
and the ones waiting connected for an id no Generate has claimed yet (since when, and how to wake
them). A waiting listener holds only its own slot: at most `per_client` open per client address
and `max_waiting` waiting in all. Not thread-safe on its own: the registry calls it under its lock."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field

Waiter = tuple[asyncio.AbstractEventLoop, asyncio.Event]


@dataclass
class Waiting:
    """An id's listeners that came before its Generate, and when the first came."""

    since: float
    waiters: list[Waiter] = field(default_factory=list)


class Listeners:
    def __init__(self, per_client: int, max_waiting: int):
        self.per_client, self.max_waiting = per_client, max_waiting
        self.clients: Counter[str] = Counter()  # open listeners per client address
        self.waiting: dict[str, Waiting] = {}  # job id -> its listeners waiting for a Generate

    def refusal(self, client: str, known: bool) -> str | None:
        """Why one more listener from `client` is refused (None: it may open); `known`: its job exists."""
        if self.clients[client] >= self.per_client:
            return f"too many audio streams open from {client} ({self.per_client} at most); close other tabs"
        if not known and sum(len(w.waiters) for w in self.waiting.values()) >= self.max_waiting:
            return "too many listeners waiting for requests that have not started; try again"
        return None

    def opened(self, client: str) -> None:
        self.clients[client] += 1

    def closed(self, client: str) -> None:
        self.clients[client] -= 1
        if self.clients[client] <= 0:
            del self.clients[client]

    def wait(self, job_id: str, waiter: Waiter, now: float) -> None:
        self.waiting.setdefault(job_id, Waiting(now)).waiters.append(waiter)

    def unwait(self, job_id: str, waiter: Waiter) -> None:
        waiting = self.waiting.get(job_id)
        if waiting and waiter in waiting.waiters:
            waiting.waiters.remove(waiter)
            if not waiting.waiters:
                del self.waiting[job_id]

    def ahead(self, job_id: str) -> int | None:
        """How many ids waited for came before this one (None: this id is not waited for)."""
        mine = self.waiting.get(job_id)
        if mine is None:
            return None
        return sum(1 for w in self.waiting.values() if w.since < mine.since)

    def waiters(self, job_id: str) -> list[Waiter]:
        waiting = self.waiting.get(job_id)
        return list(waiting.waiters) if waiting else []


def wake_all(waiters: list[Waiter]) -> None:
    """Wake each waiter on its own event loop (from any thread)."""
    for loop, event in waiters:
        try:
            loop.call_soon_threadsafe(event.set)
        except RuntimeError:  # that loop is closed
            pass
