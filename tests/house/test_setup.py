"""A fresh machine: `make test` installs the system packages itself or says the one command.

Runs the real .ci/system-packages.sh with stand-in `id`, `dpkg-query`, `sudo` and `apt-get`
first on PATH (they record how they were called), so no test touches the machine's apt.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "system-packages.sh"


def listed_packages() -> list[str]:
    lines = (ROOT / ".ci" / "apt-packages.txt").read_text().splitlines()
    return [w for line in lines if not line.strip().startswith("#") for w in line.split()]


def _stub(bin_dir: Path, name: str, body: str) -> None:
    p = bin_dir / name
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(0o755)


def run_script(tmp_path: Path, *, uid: int, installed: set[str], sudo_ok: bool | None):
    """sudo_ok None: no sudo at all; True/False: passwordless sudo works or not."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    _stub(bin_dir, "id", f'[ "$1" = "-u" ] && echo {uid}')
    cases = "\n".join(f'  {p}) echo "install ok installed"; exit 0;;' for p in installed)
    _stub(bin_dir, "dpkg-query", f'for last; do :; done\ncase "$last" in\n{cases}\n  *) exit 1;;\nesac')
    _stub(bin_dir, "apt-get", f'echo "apt-get $*" >> {log}')
    if sudo_ok is not None:
        # `sudo -n true` answers whether a password is needed; anything else runs the command.
        _stub(bin_dir, "sudo", f'[ "$1" = "-n" ] && shift\n[ "$1" = "true" ] && exit {0 if sudo_ok else 1}\n'
                               f'echo "sudo $*" >> {log}\nexec "$@"')
    else:
        _stub(bin_dir, "sudo", "echo 'sudo: a password is required' >&2; exit 1")
        (bin_dir / "sudo").unlink()  # and truly absent: `command -v sudo` finds nothing first on PATH
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    r = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30)
    calls = log.read_text().splitlines() if log.exists() else []
    return r, calls


def test_nothing_missing_touches_nothing(tmp_path):
    r, calls = run_script(tmp_path, uid=1000, installed=set(listed_packages()), sudo_ok=None)
    assert r.returncode == 0, r.stderr
    assert calls == []


def test_not_root_without_sudo_stops_with_the_one_command(tmp_path):
    if Path("/usr/bin/sudo").exists() or Path("/bin/sudo").exists():
        pytest.skip("this machine has a real sudo on PATH; the no-sudo case cannot be staged")
    pkgs = listed_packages()
    r, calls = run_script(tmp_path, uid=1000, installed={pkgs[-1]}, sudo_ok=None)
    assert r.returncode == 1
    assert calls == []  # stopped at once, installed nothing
    missing = " ".join(pkgs[:-1])
    assert f"sudo sh -c 'apt-get update && apt-get install -y --no-install-recommends {missing}'" in r.stderr


def test_sudo_that_wants_a_password_also_stops(tmp_path):
    r, calls = run_script(tmp_path, uid=1000, installed=set(), sudo_ok=False)
    assert r.returncode == 1 and calls == []
    assert "apt-get install -y --no-install-recommends " + " ".join(listed_packages()) in r.stderr


def test_root_installs_whats_missing(tmp_path):
    pkgs = listed_packages()
    r, calls = run_script(tmp_path, uid=0, installed={pkgs[0]}, sudo_ok=None)
    assert r.returncode == 0, r.stderr
    assert calls[0].startswith("apt-get update")
    assert calls[-1].split("--no-install-recommends ")[1].split() == pkgs[1:]


def test_passwordless_sudo_installs(tmp_path):
    r, calls = run_script(tmp_path, uid=1000, installed=set(), sudo_ok=True)
    assert r.returncode == 0, r.stderr
    assert [c.split()[0] for c in calls] == ["sudo", "apt-get", "sudo", "apt-get"]
    assert calls[-1].endswith(" ".join(listed_packages()))


def test_make_test_checks_system_packages_first():
    # Run as a top-level make even when the suite itself runs under `make test` (MAKELEVEL > 0
    # would add "Entering directory" lines).
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    r = subprocess.run(["make", "--no-print-directory", "-n", "-B", "test"], cwd=ROOT, capture_output=True,
                       text=True, timeout=30, env={**env, "VENV": "/nonexistent-venv"})
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    assert lines[0].endswith(".ci/system-packages.sh"), lines[:3]
    assert any(line.endswith(".ci/suite.sh") for line in lines)  # the suite, which runs pytest
    assert "-m pytest" in (ROOT / ".ci" / "suite.sh").read_text()
