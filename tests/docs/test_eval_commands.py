"""The eval commands as the docs give them (issue 64): a gate that runs on what the README makes,
a run named by its path everywhere, a failed run that writes nothing, progress and --help, the
files engine's missing ids, the pool's left-out line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.eval_fixtures import fake_run

from eval.cli import main

EXAMPLE_GATE = Path(__file__).resolve().parents[2] / "eval" / "gates" / "example.yaml"
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


def test_the_files_engine_names_every_missing_id(tmp_path, capsys):
    """It named 10 and "and 200 more"; eval/README.md promises every one."""
    from eval.runs.sets import load_set

    ids = [u.id for u in load_set("core")]
    some = _wavs(tmp_path / "some", ids[:2])
    assert main(["run", "--engine", "files", "--files", str(some), "--set", "core", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "has no audio for 208 of the set's 210" in err and all(i in err for i in ids[2:]) and "more" not in err


def test_a_pool_server_left_out_does_not_ask_for_a_rerun(monkeypatch):
    """The pool goes on without a server that does not answer: its line must not say "rerun to resume"."""
    import socket

    from eval.engines import served

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    real = served.GepardServer.served_model
    monkeypatch.setattr(served.GepardServer, "served_model",
                        lambda self: "tiny" if self.url == "http://live.invalid" else real(self))
    lines = []
    pool = served.load_server_engine([dead, "http://live.invalid"], "tiny", timeout=5, log=lines.append)
    assert list(pool.dead) == [dead] and len(lines) == 1
    assert lines[0].startswith("left out, the run goes on without it:") and dead in lines[0]
    assert "rerun" not in lines[0] and "resume" not in lines[0]


def test_help_and_readme_say_what_the_flags_do():
    """--axis: the help said cfg-scale=, the README cfg_scale (both work, both now say cfg_scale);
    --max-wer-increase: the help said "on top of --gate", the code replaces the gate's overall WER limit."""
    from eval.compare.gate import Gate
    from eval.parser import build_parser
    from eval.sweeps.grid import parse_axes

    assert parse_axes(["cfg-scale=1,2"]) == parse_axes(["cfg_scale=1,2"]) == (("cfg_scale", (1.0, 2.0)),)
    sub = build_parser()._subparsers._group_actions[0].choices
    sweep_help, compare_help = sub["sweep"].format_help(), " ".join(sub["compare"].format_help().split())
    assert "cfg-scale=" not in sweep_help and "cfg_scale=1,2,3" in sweep_help
    assert "replaces the gate's overall corpus_wer limit" in compare_help
    gate = Gate.load(EXAMPLE_GATE).with_overall_wer(0.2)
    assert gate.limits["all"]["corpus_wer"] == 0.2 and gate.limits["all"]["loop"] == 0  # replaced, the rest kept
    readme = " ".join((EXAMPLE_GATE.parents[1] / "README.md").read_text().split())
    assert "with `--gate`, it replaces the gate's overall `corpus_wer` limit" in readme


@pytest.mark.slow
def test_the_long_commands_show_progress_with_the_time_left(tmp_path, tiny_cache_dir, capsys):
    """sweep, stream-chart and tail-chart printed nothing until they finished (11.5, 4.7, 4.2 min)."""
    cache = ["--model-cache", str(tiny_cache_dir)]
    sweep = ["sweep", "--set", "smoke", "--limit", "1", "--max-frames", "30", "--temperatures", "0.3", *cache]
    assert main([*sweep, "--stop-thresholds", "0.3", "0.5", "--brute-force", "--out", str(tmp_path / "sw")]) == 0
    err = capsys.readouterr().err
    assert "synthesis: point 1 of 2" in err and "synthesis: point 2 of 2" in err and "sweep point 2 of 2: " in err
    assert "sweep sw: 100%" in err and "<00:00]" in err  # tqdm's [elapsed<remaining]
    assert main([*sweep, "--stop-thresholds", "0.3", "0.5", "--out", str(tmp_path / "one")]) == 0
    assert "synthesis: points 1-2 of 2" in capsys.readouterr().err
    assert main(["stream-chart", "--out", str(tmp_path / "sc"), "--limit", "1", "--max-frames", "20",
                 "--chunk-sizes", "5", "10", "--lookbacks", "0", *cache]) == 0
    err = capsys.readouterr().err
    assert "stream-chart rows: 100%" in err and "4/4 [" in err and "<00:00" in err
    assert main(["tail-chart", "--out", str(tmp_path / "tc"), "--set", "smoke", "--limit", "1", "--fades-ms", "0", "10",
                 "--silences-ms", "0"]) == 0
    err = capsys.readouterr().err
    assert "tail-chart Piper speech: 100%" in err and "tail-chart clips: 100%" in err and "2/2 [" in err


def test_sweep_help_shows_the_declared_default_grid():
    from eval.parser import build_parser
    from eval.sweeps.grid import DEFAULT_AXES, axis_words

    text = " ".join(build_parser()._subparsers._group_actions[0].choices["sweep"].format_help().split())
    for name, values in DEFAULT_AXES.items():
        assert f"{axis_words(name)} {' '.join(map(str, values))}" in text
        assert f"the {axis_words(name)} to sweep (default: {' '.join(map(str, values))})" in text
