"""`python -m eval compare` on hand-made scored runs: the deltas and the exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from eval_fixtures import fake_run

from eval.cli import main
from eval.report.compare import compare

REPO = Path(__file__).resolve().parents[1]
TEXTS = [f"the quick brown fox number {w} jumps over the lazy dog" for w in
         "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty".split()] * 3
TEXTS = [t + f" take {i}" for i, t in enumerate(TEXTS)]


def _worse(texts, every: int, drop: int = 3):
    """Every `every`-th hypothesis loses its last `drop` words."""
    return [" ".join(t.split()[:-drop]) if i % every == 0 else t for i, t in enumerate(texts)]


@pytest.fixture()
def runs(tmp_path):
    base = fake_run(tmp_path / "base", TEXTS, _worse(TEXTS, 10))
    same = fake_run(tmp_path / "same", TEXTS, _worse(TEXTS, 10))
    worse = fake_run(tmp_path / "worse", TEXTS, _worse(TEXTS, 2))
    better = fake_run(tmp_path / "better", TEXTS, TEXTS)
    return base, same, worse, better


def test_compare_deltas_and_verdicts(runs):
    base, same, worse, better = runs
    c = compare(base, same)
    assert c.n_common == len(TEXTS) and not c.regression
    assert c.wer_delta["value"] == 0 and c.wer_delta["ci_low"] == 0
    c = compare(base, worse)
    assert c.regression and c.wer_delta["value"] > 0 and c.wer_delta["ci_low"] > 0
    # errors: base 6 utterances x 3 deletions, worse 30 x 3, over 60 x 13 words
    assert c.rows[0]["metric"] == "corpus WER"
    assert c.rows[0]["base"] == pytest.approx(18 / 780) and c.rows[0]["new"] == pytest.approx(90 / 780)
    assert not compare(base, better).regression
    # the allowed increase moves the bar: 7.1 points of WER with a CI well under 20 points
    assert not compare(base, worse, max_wer_increase=0.2).regression


def test_compare_exit_codes(runs, tmp_path, capsys):
    base, same, worse, better = runs
    assert main(["compare", str(base), str(same)]) == 0
    assert main(["compare", str(base), str(better)]) == 0
    assert main(["compare", str(base), str(worse)]) == 1
    assert "REGRESSION" in capsys.readouterr().out
    assert main(["compare", str(base), str(worse), "--max-wer-increase", "0.2"]) == 0
    assert main(["compare", str(base), str(tmp_path / "nope")]) == 2
    other_tag = fake_run(tmp_path / "other", TEXTS, TEXTS, tag="openai-whisper_base")
    assert main(["compare", str(base), str(other_tag)]) == 2
    disjoint = fake_run(tmp_path / "disjoint", TEXTS[:5], TEXTS[:5], ids=[f"z{i}" for i in range(5)])
    assert main(["compare", str(base), str(disjoint)]) == 2
    changed = fake_run(tmp_path / "changed", [t + " extra" for t in TEXTS], TEXTS)
    assert main(["compare", str(base), str(changed)]) == 2
    assert "different texts" in capsys.readouterr().err


def test_compare_exit_code_through_the_cli_process(runs):
    base, _, worse, _ = runs
    p = subprocess.run([sys.executable, "-m", "eval", "compare", str(base), str(worse)], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    assert "corpus WER" in p.stdout
