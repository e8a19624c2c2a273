"""`eval compare` and the gate on the measures issue 33 adds: the derail and force-stop rates
(failure-table entries), the authors' clean-rollout rate and reward (lower is worse), on
hand-made scored runs whose differences are known by construction."""

from __future__ import annotations

import pytest
from tests.support.eval_fixtures import fake_run

from eval.compare.gate import Gate, GateError, check
from eval.compare.table import ALL, MEASURES, compare_runs
from eval.scoring.derail import DerailRule

TEXTS = [f"the quick brown fox number {i} jumps over the lazy dog today" for i in range(60)]  # 12 words, 120 frames
SETTLED = [2.0] * 10 + [0.5] * 110  # drops at once: never derailed
FLAT = [2.0] * 120  # never settles: derailed at its first window (frame 60)


def _rows(derailed: int, force_stopped: int, budget: int = 0) -> list[dict]:
    """The first `force_stopped` rows force-stopped, the next `budget` rows out of budget (both runaways)."""
    ends = ["force_stop"] * force_stopped + ["budget"] * budget + ["stop"] * (len(TEXTS) - force_stopped - budget)
    return [{"entropy": FLAT if i < derailed else SETTLED, "force_stopped": e == "force_stop",
             "runaway": e != "stop", "ended_by": e} for i, e in enumerate(ends)]


@pytest.fixture()
def runs(tmp_path):
    base = fake_run(tmp_path / "base", TEXTS, TEXTS, extra=_rows(0, 0))
    # 20 rows derail; 6 are force-stopped and 2 run out of budget (runaways: not clean); 10 others lose 4 of
    # 12 words (WER 0.33: not clean)
    hyps = [" ".join(t.split()[:-4]) if 30 <= i < 40 else t for i, t in enumerate(TEXTS)]
    new = fake_run(tmp_path / "new", TEXTS, hyps, extra=_rows(20, 6, budget=2))
    return base, new


def test_the_new_measures_are_compared_with_their_direction(runs):
    c = compare_runs(*runs, replicates=200)
    d = c.deltas[ALL]
    assert d["derail"].delta == pytest.approx(20 / 60) and d["derail"].worse == 20 and d["derail"].better == 0
    # a force stop is a runaway the guard caught: counted in both
    assert d["force_stop"].delta == pytest.approx(6 / 60) and d["runaway"].delta == pytest.approx(8 / 60)
    assert d["clean"].delta == pytest.approx(-18 / 60)  # 60 clean -> 42: 8 runaways, 10 with WER 1/3
    # reward: 10 rows lose 4 of 12 words (-1/3 each); a force-stopped row keeps its reward (only clean reads it)
    assert d["reward"].delta == pytest.approx(-(10 * 4 / 12) / 60)
    assert MEASURES["clean"].worse == -1 and MEASURES["reward"].worse == -1 and MEASURES["derail"].worse == 1


def test_the_gate_knows_the_new_measures(runs):
    c = compare_runs(*runs, replicates=200)
    lines = [b.line() for b in check(Gate.parse({"overall": {"clean": 0.02, "derail": 0.05, "reward": 0.5}}), c)]
    assert any(line.startswith("overall: clean fell by -30.00%") for line in lines), lines
    assert any(line.startswith("overall: derail rose by +33.33%") for line in lines), lines
    assert not any("reward" in line for line in lines)  # -0.056 on average: within the 0.5 allowed
    # the rule's thresholds reach the comparison: at fraction 1.01 a flat trace (ratio 1.0) is not derailed
    c2 = compare_runs(*runs, replicates=200, derail=DerailRule(fraction=1.01))
    assert c2.deltas[ALL]["derail"].delta == 0


def test_a_gate_on_derail_needs_runs_with_traces(tmp_path):
    base = fake_run(tmp_path / "a", TEXTS[:10], TEXTS[:10])
    new = fake_run(tmp_path / "b", TEXTS[:10], TEXTS[:10])
    with pytest.raises(GateError, match="derail.*probe's entropy traces"):
        check(Gate.parse({"overall": {"derail": 0.0}}), compare_runs(base, new, replicates=50))


def test_the_failure_chart_has_the_new_entries_but_not_clean(runs, tmp_path):
    import pandas as pd

    from eval.compare.folder import compare_into

    compare_into(tmp_path / "cmp", *runs[:1], [runs[1]])
    entries = set(pd.read_csv(tmp_path / "cmp" / "failures.csv")["entry"])
    assert {"derail", "force_stop", "runaway"} <= entries and "clean" not in entries  # right of 0 is worse there
