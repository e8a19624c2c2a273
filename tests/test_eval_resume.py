"""A run killed with SIGKILL mid-way and started again loses and duplicates nothing, and
ends equal to an uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import soundfile as sf

from eval_fixtures import rows_of

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]


def _cmd(out: Path, cache: Path) -> list[str]:
    # batch size 1: each utterance is generated alone in both runs, so even the audio is
    # bit-equal (batch shapes change float rounding, facts §3).
    return [sys.executable, "-m", "eval", "run", "--model", "tiny", "--model-cache", str(cache), "--set", "core",
            "--limit", "8", "--max-frames", "40", "--batch-size", "1", "--seed", "11", "--out", str(out)]


def _count(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_killed_run_resumes_without_loss_or_duplicates(tmp_path, tiny_cache_dir):
    killed = tmp_path / "killed"
    proc = subprocess.Popen(_cmd(killed, tiny_cache_dir), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while _count(killed / "rows.jsonl") < 3 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    n_at_kill = _count(killed / "rows.jsonl")
    assert 3 <= n_at_kill < 8, f"could not interrupt the run mid-way ({n_at_kill} rows)"
    assert not (killed / "status.json").exists()

    resumed = subprocess.run(_cmd(killed, tiny_cache_dir), cwd=REPO, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{n_at_kill}/8 done" in resumed.stderr

    whole = tmp_path / "whole"
    ref = subprocess.run(_cmd(whole, tiny_cache_dir), cwd=REPO, capture_output=True, text=True, timeout=300)
    assert ref.returncode == 0, ref.stderr

    a, b = rows_of(killed), rows_of(whole)
    ids = [r["id"] for r in a]
    assert len(ids) == len(set(ids)) == 8
    assert ids == [r["id"] for r in b]
    assert not list(killed.glob("**/*.tmp"))
    for ra, rb in zip(a, b):
        for key in ("seed", "frames", "stop_fired", "runaway", "p_stop", "duration_s"):
            assert ra[key] == rb[key], (ra["id"], key)
        wa, _ = sf.read(killed / ra["wav"])
        wb, _ = sf.read(whole / rb["wav"])
        assert (wa == wb).all(), ra["id"]

    # a third start of a finished run does nothing
    again = subprocess.run(_cmd(killed, tiny_cache_dir), cwd=REPO, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and rows_of(killed) == a
