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


def test_every_command_takes_a_runs_path(tmp_path, monkeypatch, capsys):
    """listening --new took bare names only ('runs/smoke' is not a run in runs); now a path or a name."""
    monkeypatch.chdir(tmp_path)
    for name in ("smoke", "t7"):
        fake_run(tmp_path / "runs" / name, TEXTS[:3], TEXTS[:3], wavs=True)
    assert main(["listening", "runs/listening/paths", "--new", "runs/smoke", str(tmp_path / "runs" / "t7")]) == 0
    session = json.loads((tmp_path / "runs/listening/paths/session.json").read_text())
    assert session["runs"] == ["smoke", "t7"] and len(session["pairs"]) == 3
    assert main(["listening", "runs/listening/names", "--new", "smoke", "t7"]) == 0  # bare names, as before
    assert main(["listening", "runs/listening/paths", "--new", "smoke", "runs/t7"]) == 0  # the same runs: reopened
    for cmd in (["report", "runs/nowhere"], ["compare", "runs/smoke", "runs/nowhere"],
                ["listening", "runs/listening/x", "--new", "runs/smoke", "runs/nowhere"]):
        assert main(cmd) == 2
        assert "'runs/nowhere' is not a run folder: no config.json" in capsys.readouterr().err
    assert main(["compare", "runs/smoke", "runs/t7"]) == 0 and main(["report", "runs/t7"]) == 0


def _wavs(folder: Path, ids: list[str]) -> Path:
    import numpy as np
    import soundfile as sf

    folder.mkdir(parents=True)
    for uid in ids:
        sf.write(folder / f"{uid}.wav", np.zeros(4410, np.float32), 22050)
    return folder


def test_a_run_that_cannot_start_writes_nothing(tmp_path, capsys):
    """A bad --model or --files left a stub folder that refused the corrected command."""
    from eval.runs.sets import load_set

    out = tmp_path / "runs" / "other"
    assert main(["run", "--model", str(tmp_path / "no-such-model"), "--set", "smoke", "--out", str(out)]) == 2
    assert not out.exists(), sorted(p.name for p in out.iterdir())
    ids = [u.id for u in load_set("smoke")]
    some = _wavs(tmp_path / "some", ids[:2])
    assert main(["run", "--engine", "files", "--files", str(some), "--set", "smoke", "--out", str(out)]) == 2
    assert "has no audio for 4 of the set's 6" in capsys.readouterr().err
    assert not out.exists()
    out.mkdir()  # a folder the user made stays, empty, as it was
    assert main(["run", "--engine", "files", "--files", str(tmp_path / "none"), "--set", "smoke", "--out", str(out)]) == 2
    assert out.is_dir() and not list(out.iterdir())
    every = _wavs(tmp_path / "every", ids)
    assert main(["run", "--engine", "files", "--files", str(every), "--set", "smoke", "--out", str(out)]) == 0
    assert len((out / "rows.jsonl").read_text().splitlines()) == 6
