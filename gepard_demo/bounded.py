"""A dict that keeps only its newest entries: the one bound every cache and memory of the house uses.

The page remembers recent jobs' stats, cancelled and dropped job ids and their words; the voice
code caches speaker prefixes. Each must stay a fixed size however long the server runs, and
each drops its oldest entry first. Not thread-safe: each owner already holds a lock for its
other state and calls this under it.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Bounded(OrderedDict[K, V]):
    """At most `limit` entries. Setting a key makes it the newest; past the limit the oldest go.
    `touch` reads an entry and makes it the newest (a least-recently-used cache)."""

    def __init__(self, limit: int):
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        super().__init__()
        self.limit = int(limit)

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)

    def touch(self, key: K, default: V | None = None) -> V | None:
        if key not in self:
            return default
        self.move_to_end(key)
        return self[key]
