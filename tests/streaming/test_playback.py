"""Playback.hold_back (streaming/playback.py): a stream whose audio runs more than max_ahead_s ahead
of real time since its first chunk waits until it is back within max_ahead_s; one that is behind
(a slow engine, a listener waiting) is never held.

Run on a fake clock: the cancel event's wait moves the clock on by what it was asked, so the
figures are exact and the same on any host."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gepard_demo.settings import StreamSettings
from gepard_demo.streaming import playback
from gepard_demo.streaming.chunks import SynthesisStats
from gepard_demo.streaming.playback import Playback

RATE = 1000  # samples a second of the fake decoder: emitted / RATE is audio seconds


class Clock:
    """perf_counter on a clock that moves only when a wait asks it to."""

    def __init__(self, now: float):
        self.now = now

    def perf_counter(self) -> float:
        return self.now


class FakeCancel:
    """A cancel event never set by anyone: each wait passes its timeout on the fake clock. After
    `give_up` waits it reads as set, so a hold that never lets go ends the test instead of hanging."""

    def __init__(self, clock: Clock, give_up: int = 1000):
        self.clock, self.give_up, self.waits = clock, give_up, []

    def is_set(self) -> bool:
        return len(self.waits) >= self.give_up

    def wait(self, timeout: float) -> bool:
        self.waits.append(timeout)
        self.clock.now += timeout
        return False


def _playback(monkeypatch, *, first_chunk_at: float, audio_s: float, now: float) -> tuple[Playback, Clock]:
    """A Playback whose first chunk came at `first_chunk_at` (clock s), with `audio_s` emitted, at `now`."""
    clock = Clock(now)
    monkeypatch.setattr(playback, "time", SimpleNamespace(perf_counter=clock.perf_counter))
    codec = SimpleNamespace(sample_rate=RATE, streamer=lambda mode, lookback: SimpleNamespace())  # never pushed
    t0 = 100.0  # the request's start; its first chunk ttfa_s later
    stats = SynthesisStats(ttfa_s=first_chunk_at - t0)
    play = Playback(codec, StreamSettings(), stats, t0=t0, end_of_speech=lambda *a: None)
    play.emitted = int(audio_s * RATE)
    return play, clock


def test_a_stream_ahead_waits_until_it_is_max_ahead_of_real_time(monkeypatch):
    """10 s of audio 1 s after the first chunk is 9 s ahead: with max_ahead_s=2 it waits 7 s (the
    clock since the first chunk reaching audio - 2), then goes on."""
    play, clock = _playback(monkeypatch, first_chunk_at=101.0, audio_s=10.0, now=102.0)
    cancel = FakeCancel(clock)
    play.hold_back(2.0, cancel)
    assert not cancel.is_set()  # let go by catching up, not by giving up
    assert clock.now - 101.0 == pytest.approx(10.0 - 2.0)
    assert sum(cancel.waits) == pytest.approx(7.0) and max(cancel.waits) <= 0.5  # short waits: cancel heard soon


def test_a_stream_behind_real_time_is_never_held(monkeypatch):
    """1 s of audio 10 s after the first chunk is behind the listener: no wait at all, however
    small max_ahead_s is."""
    play, clock = _playback(monkeypatch, first_chunk_at=101.0, audio_s=1.0, now=111.0)
    for max_ahead in (2.0, 0.0):
        cancel = FakeCancel(clock, give_up=50)
        play.hold_back(max_ahead, cancel)
        assert cancel.waits == [] and clock.now == 111.0


def test_within_max_ahead_no_bound_or_no_first_chunk_never_waits(monkeypatch):
    """Audio only 1.5 s ahead with max_ahead_s=2, no bound (None), or no chunk yet (ttfa_s None): no wait."""
    play, clock = _playback(monkeypatch, first_chunk_at=101.0, audio_s=3.5, now=103.0)
    for max_ahead in (2.0, None):
        cancel = FakeCancel(clock, give_up=50)
        play.hold_back(max_ahead, cancel)
        assert cancel.waits == []
    play.stats.ttfa_s = None
    play.emitted = 100 * RATE
    cancel = FakeCancel(clock, give_up=50)
    play.hold_back(2.0, cancel)
    assert cancel.waits == [] and clock.now == 103.0


def test_a_cancel_ends_the_hold(monkeypatch):
    """A stream far ahead is let go as soon as it is cancelled (Stop), not when it catches up."""
    play, clock = _playback(monkeypatch, first_chunk_at=101.0, audio_s=100.0, now=101.0)
    cancel = FakeCancel(clock, give_up=3)
    play.hold_back(2.0, cancel)
    assert cancel.waits == [0.5, 0.5, 0.5] and clock.now == pytest.approx(102.5)
