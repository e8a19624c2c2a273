"""gepard_demo.bounded.Bounded: the one bound every cache and memory of the house uses."""

from __future__ import annotations

import pytest

from gepard_demo.bounded import Bounded


def test_keeps_the_newest_entries_and_a_reset_key_counts_as_new():
    b: Bounded[str, int] = Bounded(3)
    for k in "abcd":
        b[k] = ord(k)
    assert list(b) == ["b", "c", "d"]
    b["b"] = 0  # set again: now the newest, so "c" is the oldest
    b["e"] = 1
    assert list(b) == ["d", "b", "e"]


def test_touch_reads_and_refreshes_a_cache_entry():
    b: Bounded[str, int] = Bounded(2)
    b["a"], b["b"] = 1, 2
    assert b.touch("a") == 1 and b.touch("zzz") is None
    b["c"] = 3
    assert list(b) == ["a", "c"]


def test_a_limit_below_one_is_refused():
    with pytest.raises(ValueError, match="limit"):
        Bounded(0)
