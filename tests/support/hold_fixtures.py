"""Requests that never end by themselves, for the tests of Stop, closed tabs and hang-ups.

A test of "Stop frees the engine" must not pass because the request happened to end in time,
so these hold a request open in the state under test until the test lets go:

- `endless`: a request with ENDLESS_SEED runs forever: no frame budget, a stop head that cannot
  fire. It is chosen by its seed, so it goes through every surface unchanged (the page's seed
  control, the server's `seed` field). `endless_text_patch`: the same for a sentence that starts
  with ENDLESS_TEXT (eval derives its seeds; tests/support/endless_child.py does it in an eval process).
- `held_prefill`: the prefill of a prompt that contains HELD_TEXT waits until released.
- `held_codec`: every push of a codec stream waits until released (a codec that "drains").

A test judges that the release happens: a request here never ends by itself, so any release at
all is the one under test, and `within`'s HANG_S is a hang guard, sized to catch a hang and never
a slow host. How soon a stop lets go (0.5 s promised, a few milliseconds measured) is the hang-up
benchmarks' figure, measured on a quiet machine: benchmarks/server_hangup.py ("let go", REST) and
benchmarks/hangup_lag.py (the page's visitors).
"""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from typing import Callable

import pytest

from gepard_demo.model.batch import DecodeBatch
from gepard_demo.model.sampling import RowSampler

ENDLESS_SEED = 4_242_424_242
ENDLESS_TEXT = "This sentence never ends"
HELD_TEXT = "Held in its prefill"
HANG_S = 30.0  # a release that has not come by then never comes


def never_ending(settings):
    """These settings past what any request may carry: no frame budget a run reaches, and a stop
    threshold p_stop never passes. Copied past __post_init__, which refuses both (settings check
    themselves when made): only a test's request that must never end itself holds them."""
    held = copy.copy(settings)
    object.__setattr__(held, "max_frames", 2**40)
    object.__setattr__(held, "stop_threshold", 1.0)
    return held


def install_endless_seed() -> Callable[[], None]:
    """From now on a request seeded ENDLESS_SEED never ends (no budget a run reaches, and p_stop
    is never above 1); returns the undo. conftest.py installs it for the whole session, before
    any GPU worker is forked, so forked workers have it too."""
    create = RowSampler.create.__func__

    def endless_create(cls, settings, device, force_stop=None):
        row = create(cls, settings, device, force_stop)
        if row.seed == ENDLESS_SEED:
            row.settings = never_ending(row.settings)
            row.force_stop = None
        return row

    RowSampler.create = classmethod(endless_create)
    return lambda: setattr(RowSampler, "create", classmethod(create))


@pytest.fixture()
def endless():
    """The seed of a request that never ends by itself (see install_endless_seed)."""
    return ENDLESS_SEED


def endless_text_patch(tokenizer, text: str | None = ENDLESS_TEXT, talker=None) -> Callable[[], None]:
    """From now on a request whose prompt holds `text`'s tokens (a sentence that starts with it;
    None: every request) runs forever, wherever it is decoded (a scheduler's batch,
    engine.generate, a server's engine), or only on `talker` when given; returns the undo. By
    text, not seed, for runs whose seeds are derived (eval), also in a real second process
    (tests/support/endless_child.py)."""
    marker = tokenizer.encode(text, add_special_tokens=False) if text is not None else []
    admit = DecodeBatch.admit

    def endless_admit(self, requests):
        for r in requests:
            if (talker is None or self.talker is talker) and _contains(r.prompt, marker):
                r.sampler.settings = never_ending(r.sampler.settings)
        return admit(self, requests)

    DecodeBatch.admit = endless_admit
    return lambda: setattr(DecodeBatch, "admit", admit)


class Gate:
    """Where held work waits: `entered` once something waits here, `release()` lets it all go."""

    def __init__(self):
        self.entered = threading.Event()
        self._open = threading.Event()

    def wait(self) -> None:
        self.entered.set()
        self._open.wait(120)  # never forever: a broken test still ends

    def release(self) -> None:
        self._open.set()


@pytest.fixture()
def held_prefill(monkeypatch, tiny_engine):
    """A Gate that holds the prefill of any request whose prompt holds HELD_TEXT's tokens."""
    gate = Gate()
    admit = DecodeBatch.admit
    marker = tiny_engine.tokenizer.encode(HELD_TEXT, add_special_tokens=False)

    def held_admit(self, requests):
        if any(_contains(r.prompt, marker) for r in requests):
            gate.wait()
        return admit(self, requests)

    monkeypatch.setattr(DecodeBatch, "admit", held_admit)
    yield gate
    gate.release()


def _contains(seq: list[int], part: list[int]) -> bool:
    n = len(part)
    return any(seq[i:i + n] == part for i in range(len(seq) - n + 1))


class _Meeting(threading.Event):
    peak = 0  # the most requests in the batch at once
    refusals: list[str]  # why the wait line kept a request out at an admission (a failed meeting's cause)


@contextlib.contextmanager
def admitted_together(scheduler, n: int, seconds: float = 60.0):
    """Requests meet in the running batch whatever the machine's speed: the first admission
    waits (inside the scheduler, as a slow prefill would) until the other n - 1 requests are in
    its queue, and the scheduler admits those at its next step, long before any of them ends.
    Without it, whether requests overlap depends on how fast the first one runs. The yielded
    event's `peak` is the most requests the scheduler's batch held at once, read inside it at each
    admission (a poll from outside may miss the moment on a loaded host); `refusals`, the wait
    line's reasons for keeping one out, for the failure message.

    "At its next step" holds for admission "cap" only: "realtime" refuses a newcomer on a host
    whose measured costs are slow (a busy one), so the scheduler must be built with "cap". Its
    wait line reads the settings it was built with: replacing `scheduler.settings` afterwards
    changes nothing (the test that did so met on a quiet host only), so the check reads the
    wait line's."""
    rule = scheduler._line.settings
    if rule.admission != "cap" or rule.max_batch < n:
        raise ValueError(f"admitted_together({n}) needs a scheduler built with admission 'cap' and max_batch >= {n}, "
                         f"not {rule.admission!r} and {rule.max_batch}: BatchScheduler(engine, "
                         f"BatchingSettings(max_batch={n}, admission='cap'))")
    admit = DecodeBatch.admit
    met = _Meeting()
    met.refusals = []

    def waiting_admit(self, requests):
        if not met.is_set() and threading.current_thread() is scheduler._thread:
            t0 = time.monotonic()
            while scheduler.load()["waiting"] < n - len(requests) and time.monotonic() - t0 < seconds:
                time.sleep(0.002)
            met.set()
        handles = admit(self, requests)
        if threading.current_thread() is scheduler._thread:
            met.peak = max(met.peak, len(self))
            with scheduler._cond:  # the line's head learnt its reason in this step's admissible()
                met.refusals += [t.reason for t in scheduler._line.waiting if t.reason]
        return handles

    DecodeBatch.admit = waiting_admit
    try:
        yield met
    finally:
        DecodeBatch.admit = admit


class HeldCodec:
    """Wraps a codec: its streams' pushes wait at `gate` from the `hold_from`-th push on."""

    def __init__(self, codec, hold_from: int = 0):
        self.codec, self.gate, self.hold_from = codec, Gate(), hold_from

    def __getattr__(self, name):
        return getattr(self.codec, name)

    def streamer(self, *args, **kwargs):
        inner = self.codec.streamer(*args, **kwargs)
        outer, pushes = self, [0]

        class Held:
            def __getattr__(self, name):
                return getattr(inner, name)

            def push(self, codes):
                pushes[0] += 1
                if pushes[0] > outer.hold_from:
                    outer.gate.wait()
                return inner.push(codes)

        return Held()


@contextlib.contextmanager
def held_codec(codec, hold_from: int = 0):
    held = HeldCodec(codec, hold_from)
    try:
        yield held
    finally:
        held.gate.release()


def within(condition: Callable[[], bool], seconds: float = HANG_S) -> float:
    """Seconds until condition() held (polled every 5 ms); fails past `seconds` (a hang)."""
    t0 = time.monotonic()
    while not condition():
        if time.monotonic() - t0 > seconds:
            raise AssertionError(f"not within {seconds} s")
        time.sleep(0.005)
    return time.monotonic() - t0


def wait_until(condition: Callable[[], bool], seconds: float = 60.0, what: str = "the condition") -> None:
    """Wait for a state to be reached (not a bound under test: generous)."""
    t0 = time.monotonic()
    while not condition():
        if time.monotonic() - t0 > seconds:
            raise AssertionError(f"{what} did not happen within {seconds} s")
        time.sleep(0.01)
