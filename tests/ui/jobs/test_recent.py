"""RecentRuns (ui/jobs/recent.py): the stats of the last few Generates, and the pace hint the page's
start buffer comes from (stream_rate): the median of the newest five single-stream runs, so the
hint follows the host as it is now (warmed up, busier), not as it was at its first runs."""

from __future__ import annotations

from gepard_demo.streaming.chunks import SynthesisStats
from gepard_demo.ui.jobs.recent import RecentRuns


def _run(rate: float, **more) -> SynthesisStats:
    """A finished run that made `rate` audio seconds per wall second."""
    return SynthesisStats(speech_s=10.0 * rate, wall_s=10.0, **more)


def test_the_pace_hint_follows_the_newest_runs_not_the_oldest():
    """Five slow runs (1x real time), then five fast ones (3x): the hint is the fast pace; then
    five slower ones (2x) after those: the hint moves to 2x."""
    recent = RecentRuns()
    assert recent.stream_rate() is None
    for i in range(5):
        recent.note(f"old{i}", _run(1.0))
    assert recent.stream_rate() == 1.0
    for i in range(5):
        recent.note(f"new{i}", _run(3.0))
    assert recent.stream_rate() == 3.0
    for i in range(5):
        recent.note(f"newer{i}", _run(2.0))
    assert recent.stream_rate() == 2.0


def test_the_pace_hint_is_the_median_of_the_newest_single_streams():
    """Among the newest five, a cancelled run and a long text's (several segments) are left out,
    and the median of the rest is taken (one odd run does not swing it)."""
    recent = RecentRuns()
    for i in range(5):
        recent.note(f"old{i}", _run(9.0))
    for job, stats in [("a", _run(2.0)), ("b", _run(8.0, cancelled=True)), ("c", _run(2.5)),
                       ("d", _run(8.0, segments=4)), ("e", _run(0.5))]:
        recent.note(job, stats)
    assert recent.stream_rate() == 2.0  # median of 0.5, 2.0, 2.5
    assert recent.get("c").speech_s == 25.0 and recent.get("old0") is not None
