"""A run killed with SIGKILL mid-way and started again loses and duplicates nothing, and
ends equal to an uninterrupted run. The kill lands where the test chooses: the killed run's
fourth sentence never ends (tests/support/endless_child.py), so no machine is too fast for it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import soundfile as sf

from tests.support.eval_fixtures import rows_of
from tests.support.hold_fixtures import ENDLESS_TEXT

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
SENTENCES = 8
HANGS_AT = 4  # this sentence never ends in the killed run (tests/support/endless_child.py): the kill lands there


def _set(tmp_path: Path) -> Path:
    """Core's first sentences, the HANGS_AT-th replaced by one that starts with ENDLESS_TEXT."""
    rows = [json.loads(line) for line in (REPO / "eval/sets/core.jsonl").read_text().splitlines()[:SENTENCES]]
    rows[HANGS_AT - 1] = {"id": "endless", "text": f"{ENDLESS_TEXT}, or so it says.", "category": "long"}
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _cmd(out: Path, cache: Path, set_file: Path) -> list[str]:
    # batch size 1: each utterance is generated alone, in order, in both runs, so even the audio
    # is bit-equal (batch shapes change float rounding, facts §3).
    return [sys.executable, "-m", "eval", "run", "--model", "tiny", "--model-cache", str(cache), "--set", str(set_file),
            "--max-frames", "40", "--batch-size", "1", "--seed", "11", "--out", str(out)]


def _count(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_killed_run_resumes_without_loss_or_duplicates(tmp_path, tiny_cache_dir, tiny_model_dir):
    killed, set_file = tmp_path / "killed", _set(tmp_path)
    held = [sys.executable, str(REPO / "tests" / "support" / "endless_child.py"), str(tiny_model_dir)] + _cmd(killed, tiny_cache_dir, set_file)[3:]
    proc = subprocess.Popen(held, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while _count(killed / "rows.jsonl") < HANGS_AT - 1 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)  # the run is inside its endless sentence, and stays there
    proc.wait()
    n_at_kill = _count(killed / "rows.jsonl")
    assert n_at_kill == HANGS_AT - 1
    assert not (killed / "status.json").exists()

    # Started again as a plain run: the sentence ends like any other (40 frames).
    resumed = subprocess.run(_cmd(killed, tiny_cache_dir, set_file), cwd=REPO, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{n_at_kill}/{SENTENCES} done" in resumed.stderr

    whole = tmp_path / "whole"
    ref = subprocess.run(_cmd(whole, tiny_cache_dir, set_file), cwd=REPO, capture_output=True, text=True, timeout=300)
    assert ref.returncode == 0, ref.stderr

    a, b = rows_of(killed), rows_of(whole)
    ids = [r["id"] for r in a]
    assert len(ids) == len(set(ids)) == SENTENCES
    assert ids == [r["id"] for r in b]
    assert not list(killed.glob("**/*.tmp"))
    for ra, rb in zip(a, b):
        for key in ("seed", "frames", "stop_fired", "runaway", "p_stop", "duration_s"):
            assert ra[key] == rb[key], (ra["id"], key)
        wa, _ = sf.read(killed / ra["wav"])
        wb, _ = sf.read(whole / rb["wav"])
        assert (wa == wb).all(), ra["id"]

    # a third start of a finished run does nothing
    again = subprocess.run(_cmd(killed, tiny_cache_dir, set_file), cwd=REPO, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and rows_of(killed) == a
