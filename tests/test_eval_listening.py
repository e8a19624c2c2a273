"""The blind listening test: pairs of the same sentence and seed with the sides shuffled per pair
(seeded, so a session always asks the same way), votes kept as JSONL with who and when, a session
that survives being opened again (a reload), win rates with Wilson intervals, and Bradley-Terry
scores with bootstrap intervals for more than two runs."""

from __future__ import annotations

import json

import pytest
from eval_fixtures import fake_run

from eval.cli import main
from eval.listening.scores import bradley_terry, head_to_head
from eval.listening.session import ListeningError, Session

TEXTS = [f"sentence number {i} for the listening test" for i in range(24)]


@pytest.fixture()
def runs_dir(tmp_path):
    for name in ("old", "new", "third"):
        fake_run(tmp_path / name, TEXTS, TEXTS, wavs=True)
    fake_run(tmp_path / "reseeded", TEXTS, TEXTS, extra=[{"seed": 2}] * len(TEXTS), wavs=True)
    return tmp_path


def test_pairs_are_the_same_sentence_and_seed_with_sides_shuffled_by_the_seed(runs_dir):
    s = Session.open(runs_dir, "ab", ["old", "new"], seed=7)
    assert len(s.pairs) == len(TEXTS)
    assert all(p.a["run"] != p.b["run"] and {p.a["run"], p.b["run"]} == {"old", "new"} for p in s.pairs)
    assert all(p.a["wav"].endswith(f"{p.a['run']}/wav/{p.id}.wav") for p in s.pairs)
    new_as_a = sum(p.a["run"] == "new" for p in s.pairs)
    assert 4 < new_as_a < 20  # neither side is always the new run
    again = Session.open(runs_dir, "ab2", ["old", "new"], seed=7)
    assert [(p.id, p.a["run"]) for p in again.pairs] == [(p.id, p.a["run"]) for p in s.pairs]  # repeatable
    other = Session.open(runs_dir, "ab3", ["old", "new"], seed=8)
    assert [(p.id, p.a["run"]) for p in other.pairs] != [(p.id, p.a["run"]) for p in s.pairs]
    with pytest.raises(ListeningError, match="same text and seed"):
        Session.open(runs_dir, "x", ["old", "reseeded"])


def test_votes_are_kept_per_listener_and_a_session_survives_a_reload(runs_dir):
    s = Session.open(runs_dir, "ab", ["old", "new"], seed=1)
    first = s.next_pair("ann")
    vote = s.answer("ann", first.index, "A")
    assert vote["winner"] == first.a["run"] and vote["who"] == "ann" and vote["when"].endswith("Z")
    with pytest.raises(ListeningError, match="already answered"):
        s.answer("ann", first.index, "B")
    with pytest.raises(ListeningError, match="choice must be"):
        s.answer("ann", 1, "C")
    with pytest.raises(ListeningError, match="who is listening"):
        s.answer("  ", 1, "A")
    reopened = Session.open(runs_dir, "ab")  # the page reloaded: same name, no runs given
    assert reopened.next_pair("ann").index != first.index and reopened.next_pair("bob").index == first.index
    assert reopened.progress("ann") == (1, len(TEXTS))
    with pytest.raises(ListeningError, match="compares"):
        Session.open(runs_dir, "ab", ["old", "third"])
    line = (s.folder / "votes.jsonl").read_text().splitlines()[0]
    assert json.loads(line)["choice"] == "A"


def test_win_rates_with_wilson_intervals_and_the_report(runs_dir):
    s = Session.open(runs_dir, "ab", ["old", "new"], seed=3)
    for p in s.pairs[:20]:  # "new" preferred 16 times, "old" 2, "same" 2
        k = p.index
        choice = "same" if k % 10 == 9 else ("B" if p.b["run"] == "new" else "A") if k % 10 < 8 else \
            ("A" if p.b["run"] == "new" else "B")
        s.answer("ann", k, choice)
    (h,) = head_to_head(s.votes(), ["new", "old"])
    assert (h["wins"], h["losses"], h["same"]) == (16, 2, 2)
    assert h["ci_low"] > 0.6 and h["ci_high"] < 0.99 and h["win_rate"] == pytest.approx(16 / 18)
    assert main(["listening", str(s.folder)]) == 0
    md = (s.folder / "listening.md").read_text()
    assert "| old | new | 20 | 2 | 16 | 2 | 11% [3, 33] |" in md and "ann" in md  # the session's runs in order
    assert json.loads((s.folder / "listening.json").read_text())["votes"] == 20


def test_bradley_terry_orders_three_runs_with_intervals(runs_dir):
    s = Session.open(runs_dir, "three", ["old", "new", "third"], seed=5)
    assert len(s.pairs) == 3 * len(TEXTS)  # every pair of runs, for every sentence
    rank = {"new": 2, "third": 1, "old": 0}
    for p in s.pairs:
        a, b = rank[p.a["run"]], rank[p.b["run"]]
        s.answer("ann", p.index, "A" if a > b else "B")
    bt = bradley_terry(s.votes(), s.runs, replicates=200)
    assert [b["run"] for b in bt] == ["new", "third", "old"]
    assert all(b["ci_low"] <= b["score"] <= b["ci_high"] for b in bt)
    assert bt[0]["ci_low"] > bt[2]["ci_high"]  # the best clearly above the worst
    assert abs(sum(b["score"] for b in bt)) < 1e-9
    assert main(["listening", str(s.folder)]) == 0 and "Bradley-Terry" in (s.folder / "listening.md").read_text()
