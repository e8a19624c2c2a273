"""A killed app's WAV folder does not pile up in the temporary folder: the next app's start removes
it, and only it (real processes, one killed with SIGKILL, one alive)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from gepard_demo.ui.jobs.wav_sink import owned_wav_dir

ROOT = Path(__file__).resolve().parents[3]
# A process that makes its WAV folder as the app does at its start, says where, and stays.
HOLDER = ("import sys, time; from gepard_demo.ui.jobs.wav_sink import owned_wav_dir; "
          "print(owned_wav_dir(sys.argv[1]), flush=True); time.sleep(120)")


def holder(root: Path) -> tuple[subprocess.Popen, Path]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(root)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    return proc, Path(proc.stdout.readline().strip())


def test_a_killed_apps_wav_folder_goes_at_the_next_start_and_a_running_ones_stays(tmp_path):
    killed, killed_dir = holder(tmp_path)
    alive, alive_dir = holder(tmp_path)
    old = tmp_path / "gepard-wavs-before-owners"  # made by an older app: no owner to ask, left alone
    old.mkdir()
    try:
        (killed_dir / "job.wav").write_bytes(b"RIFF")
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(10)
        assert killed_dir.is_dir()  # a kill leaves it behind
        mine = owned_wav_dir(tmp_path)  # the next app's start
        assert not killed_dir.exists()
        assert alive_dir.is_dir() and old.is_dir() and mine.is_dir()
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([alive_dir.name, old.name, mine.name])
        assert (alive_dir / ".owner").read_text() == str(alive.pid)
    finally:
        alive.kill()
        alive.wait(10)
    owned_wav_dir(tmp_path)  # once its owner is gone, the other goes too; this process's own stays
    assert not alive_dir.exists() and mine.is_dir()
