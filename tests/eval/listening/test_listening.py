"""The blind listening test: pairs of the same sentence and seed with the sides shuffled per pair
(seeded, so a session always asks the same way), votes kept as JSONL with who and when, a session
that survives being opened again (a reload), win rates with Wilson intervals, and Bradley-Terry
scores with bootstrap intervals for more than two runs."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from tests.support.eval_fixtures import fake_run

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


def test_the_command_makes_a_session_with_seed_0_by_default(runs_dir):
    """`python -m eval listening DIR --new RUN RUN` without --seed: seed 0, so the same command always
    asks the same way; each pair's sides are the seeded draw of the session's definition, keyed by
    "0|id|run|run" (run first in the command plays A when it is below 0.5)."""
    folder = runs_dir / "listening"
    for name in ("first", "again"):
        assert main(["listening", str(folder / name), "--new", "old", "new"]) == 0
    assert main(["listening", str(folder / "seeded"), "--new", "old", "new", "--seed", "7"]) == 0
    meta = {n: json.loads((folder / n / "session.json").read_text()) for n in ("first", "again", "seeded")}
    assert meta["first"]["seed"] == 0 and (folder / "first" / "listening.md").is_file()
    asked = {n: [(p["id"], p["a"]["run"]) for p in m["pairs"]] for n, m in meta.items()}
    assert asked["first"] == asked["again"] != asked["seeded"]
    for uid, a in asked["first"]:
        assert a == ("old" if random.Random(f"0|{uid}|old|new").random() < 0.5 else "new"), uid


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


@pytest.mark.slow
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
    assert main(["listening", str(s.folder)]) == 0
    md, data = (s.folder / "listening.md").read_text(), json.loads((s.folder / "listening.json").read_text())
    rows = [line for line in md.splitlines()[md.splitlines().index("| run | score | 95% |") + 2:] if line.startswith("| ")]
    # each row of the report's Bradley-Terry table is its own run's score and interval, best first
    assert [r.split(" | ")[0] for r in rows] == ["| new", "| third", "| old"]
    assert rows == [f"| {b['run']} | {b['score']:+.2f} | [{b['ci_low']:+.2f}, {b['ci_high']:+.2f}] |"
                    for b in data["bradley_terry"]]
    assert len({r.split(" | ", 1)[1] for r in rows}) == 3


def _votes(counts: dict) -> list[dict]:
    """{(x, y): (x's wins, y's wins, "same")} as the session's vote rows."""
    out = []
    for (x, y), (wx, wy, same) in counts.items():
        out += [{"a": x, "b": y, "winner": w} for w, k in ((x, wx), (y, wy), (None, same)) for _ in range(k)]
    return out


def _fisher_sd(scores: np.ndarray, games: np.ndarray) -> np.ndarray:
    """The Bradley-Terry log strengths' standard errors from the model's information: for each pair
    n p (1 - p) games' worth, a graph Laplacian whose pseudo-inverse is the covariance of centred scores."""
    p = 1 / (1 + np.exp(scores[None, :] - scores[:, None]))
    w = games * p * (1 - p)
    info = np.diag(w.sum(1)) - w
    return np.sqrt(np.diag(np.linalg.pinv(info)))


def _half_widths(bt: list[dict]) -> dict[str, float]:
    return {b["run"]: (b["ci_high"] - b["ci_low"]) / 2 for b in bt}


def test_bradley_terry_intervals_have_the_width_the_votes_support():
    """Votes with known answers. Balanced (10 wins each way in every pair of three runs): every score
    is 0, and each interval is +-1.96 x the model's standard error, sqrt(2/45) by hand (20 votes a
    pair at p = 1/2: information 5 x the triangle's Laplacian, whose pseudo-inverse is L / 9), not a
    point; four times the votes halve it (1/sqrt(n)); another seed draws other resamples. Votes from
    strengths (log 2, 0, -log 2): the scores solve the model's equations (with the one virtual
    "same" per pair) and the intervals have the width the information gives."""
    runs = ["x", "y", "z"]
    balanced = _votes({("x", "y"): (10, 10, 0), ("x", "z"): (10, 10, 0), ("y", "z"): (10, 10, 0)})
    bt = bradley_terry(balanced, runs)
    by_hand = 1.96 * np.sqrt(2 / 45)
    for b in bt:
        assert b["score"] == pytest.approx(0, abs=1e-9)
        assert b["ci_low"] < 0 < b["ci_high"]
        assert 0.85 * by_hand < (b["ci_high"] - b["ci_low"]) / 2 < 1.1 * by_hand, b  # the virtual "same" shrinks it a little
    more = _half_widths(bradley_terry(balanced * 4, runs))
    assert all(0.4 < more[r] / w < 0.6 for r, w in _half_widths(bt).items()), more
    other = bradley_terry(balanced, runs, seed=1)
    assert [b["ci_low"] for b in other] != [b["ci_low"] for b in bt]  # bootstrap resamples, not the same votes refitted
    assert all(0.85 * by_hand < w < 1.1 * by_hand for w in _half_widths(other).values())
    # x beats y and y beats z two to one, x beats z four to one: 45 votes a pair, "same" now and then
    counts = {("x", "y"): (28, 14, 3), ("y", "z"): (28, 14, 3), ("x", "z"): (36, 9, 0)}
    bt = {b["run"]: b for b in bradley_terry(_votes(counts), runs)}
    s = np.array([bt[r]["score"] for r in runs])
    wins = np.full((3, 3), 0.5) - 0.5 * np.eye(3)  # the virtual "same" per pair
    for (x, y), (wx, wy, same) in counts.items():
        i, j = runs.index(x), runs.index(y)
        wins[i, j] += wx + same / 2
        wins[j, i] += wy + same / 2
    games = wins + wins.T
    expected_wins = (games / (1 + np.exp(s[None, :] - s[:, None]))).sum(1)  # the model's wins at these scores
    assert expected_wins == pytest.approx(wins.sum(1), abs=1e-6) and s.sum() == pytest.approx(0, abs=1e-9)
    assert s == pytest.approx([np.log(2), 0, -np.log(2)], abs=0.08)
    sd = _fisher_sd(s, games - (1 - np.eye(3)))  # the real votes' information: the virtual ones are not resampled
    for r, w in _half_widths(list(bt.values())).items():
        assert 0.8 < w / (1.96 * sd[runs.index(r)]) < 1.2, (r, w, sd)
