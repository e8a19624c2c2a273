"""The eval commands as the docs give them (issue 64): a gate that runs on what the README makes,
a run named by its path everywhere, a failed run that writes nothing, progress and --help, the
files engine's missing ids, the pool's left-out line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eval_fixtures import fake_run

from eval.cli import main

EXAMPLE_GATE = Path(__file__).resolve().parents[1] / "eval" / "gates" / "example.yaml"
TEXTS = ["The cat sat on the mat today.", "Please call me back at noon.", "Where is the station?"] * 4


def _pair(tmp_path: Path, **extra) -> tuple[Path, Path]:
    rows = [{"category": "short_1_3_words" if i % 2 else "questions", **extra} for i in range(len(TEXTS))]
    return (fake_run(tmp_path / "base", TEXTS, TEXTS, extra=rows),
            fake_run(tmp_path / "new", TEXTS, TEXTS, extra=rows))


def test_the_example_gate_runs_on_runs_without_a_frame_budget_or_dnsmos(tmp_path, capsys):
    """Piper's rows have no runaway, tiny's noise no DNSMOS: the README's example gate passes both."""
    base, new = _pair(tmp_path, runaway=None, frames=None, stop_fired=None, stop_frame=None, p_stop=None)
    assert main(["compare", str(base), str(new), "--gate", str(EXAMPLE_GATE)]) == 0, capsys.readouterr().err


def test_a_gate_on_an_unmeasured_measure_says_which_run_lacks_it_and_why(tmp_path, capsys):
    base, new = _pair(tmp_path)
    gate = tmp_path / "gate.yaml"
    gate.write_text("overall:\n  dnsmos_ovrl: 0.1\n")
    assert main(["compare", str(base), str(new), "--gate", str(gate)]) == 2
    err = capsys.readouterr().err
    assert f"{base} has no dnsmos_ovrl value" in err and "scored with --dnsmos off" in err
    for run in (base, new):  # scored, but every clip was noise: DNSMOS is null, and the message says why
        (run / "dnsmos.jsonl").write_text("".join(json.dumps({"id": f"u{i:03d}", "dnsmos_ovrl": None}) + "\n"
                                                  for i in range(len(TEXTS))))
    assert main(["compare", str(base), str(new), "--gate", str(gate)]) == 2
    err = capsys.readouterr().err
    assert "--dnsmos off" not in err.split("It needs")[0]
    assert f"{new} has no dnsmos_ovrl value" in err and "Silero VAD found under 1 s of speech" in err
