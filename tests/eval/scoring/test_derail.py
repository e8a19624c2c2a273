"""The derail rule (eval/scoring/derail.py) on constructed entropy traces with known answers: a
clean drop, a flat trace, a late derailment, one too short to judge; and the early-stop probe
at frame N."""

from __future__ import annotations

import pytest

from eval.scoring.derail import DerailRule, judge, probe_at

ONSET = 2.0


def trace(*parts: tuple[int, float]) -> list[float]:
    """(frames, entropy) pieces, one after another."""
    return [v for n, v in parts for _ in range(n)]


CLEAN = trace((10, ONSET), (20, 1.2), (110, 0.5))  # drops within 30 frames, stays low: 140 frames
FLAT = trace((140, 1.9))  # never drops (onset 1.9: every window's ratio is 1)
LATE = trace((10, ONSET), (90, 0.5), (40, 1.9))  # settles, then rises back from frame 100


def test_a_clean_drop_is_not_derailed():
    j = judge(CLEAN, len(CLEAN))
    assert j == {"derail": False, "derail_ratio": 0.25, "derail_at": None}  # every window: 0.5 / 2.0


def test_a_flat_trace_is_derailed_at_the_first_window():
    j = judge(FLAT, len(FLAT))
    assert j["derail"] is True and j["derail_at"] == 60 and j["derail_ratio"] == 1.0


def test_a_late_derailment_is_caught_where_it_rose():
    j = judge(LATE, len(LATE))
    # windows end at 60, 80, 100 (all 0.5 = 25% of the onset), 120 ([100, 120): 1.9 = 95%)
    assert j["derail"] is True and j["derail_at"] == 120 and j["derail_ratio"] == pytest.approx(0.95)


def test_too_short_to_judge():
    short = FLAT[:59]
    assert judge(short, len(short))["derail"] is None
    assert judge(FLAT[:60], 60)["derail"] is True  # exactly judge_from frames: one window, judged
    assert judge(None, 100)["derail"] is None and judge([], 0)["derail"] is None


def test_the_fraction_is_inclusive_and_settable():
    # the windows sit at exactly 0.75 x onset (1.5 / 2.0, exact in binary): derailed at 0.75 (>=), not at 0.8
    t = trace((10, ONSET), (70, 1.5))
    assert judge(t, len(t), DerailRule(fraction=0.75))["derail"] is True
    assert judge(t, len(t))["derail"] is False
    assert judge(CLEAN, len(CLEAN), DerailRule(fraction=0.2))["derail"] is True  # 0.25 >= 0.2


def test_judge_from_and_window_are_settable():
    assert judge(LATE, len(LATE), DerailRule(judge_from=130, window=30))["derail_at"] == 130  # [100, 130)
    assert judge(LATE, 110, DerailRule())["derail"] is False  # cut at 110: the rise is past its frames


def test_only_committed_frames_count():
    # a stop step after 80 committed frames has its own belief; it commits nothing, so it is not a frame
    t = trace((10, ONSET), (70, 0.5)) + [9.0]
    assert judge(t, 80)["derail"] is False
    assert judge(t, 81)["derail"] is False  # the window [80, 100) is not whole: not judged


def test_probe_at_frame_n():
    assert probe_at(FLAT, len(FLAT), 20) is True  # [10, 20) at the onset's level
    assert probe_at(CLEAN, len(CLEAN), 20) is False  # [10, 20): 1.2 = 60% < 80%
    assert probe_at(CLEAN, len(CLEAN), 50) is False
    assert probe_at(LATE, len(LATE), 100) is False and probe_at(LATE, len(LATE), 120) is True
    assert probe_at(FLAT[:40], 40, 50) is False  # ended before frame 50: an early stop never acts on it
    assert probe_at(None, 40, 50) is None


def test_bad_rules_are_refused_naming_the_setting():
    with pytest.raises(ValueError, match="fraction"):
        DerailRule(fraction=0)
    with pytest.raises(ValueError, match="judge_from"):
        DerailRule(judge_from=20)  # its first window would overlap the onset
