"""run_async: asyncio beside a Playwright session's loop; FakeClock: a clock the test moves."""

from __future__ import annotations

import asyncio
import threading


def run_async(coro_fn):
    """asyncio.run in a fresh thread, so it works even while a Playwright sync session (which
    keeps an event loop running in the main thread) is open."""
    out = {}

    def target():
        try:
            out["value"] = asyncio.run(coro_fn())
        except BaseException as exc:  # re-raised in the test thread
            out["error"] = exc

    t = threading.Thread(target=target)
    t.start()
    t.join(30)
    if "error" in out:
        raise out["error"]
    return out.get("value")


class FakeClock:
    """The registry's clock, moved by the test (no sleeping for an age to pass)."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now
