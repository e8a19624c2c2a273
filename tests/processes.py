"""A real second process and its end: the one teardown the tests and the benchmarks share.

A child starts in a process group of its own, so that `stop_process` ends what it forked too:
the `spaces` runtime's GPU workers outlived the child before (five left, 4.4 GB, after one run
of the suite). Plain Python (no pytest): benchmarks import it with tests/ on sys.path.
"""

from __future__ import annotations

import os
import signal
import subprocess


def spawn(cmd: list[str], **popen) -> subprocess.Popen:
    """subprocess.Popen in a new process group (`stop_process` ends the group)."""
    return subprocess.Popen(cmd, start_new_session=True, **popen)


def stop_process(proc: subprocess.Popen, grace_s: float = 15) -> None:
    """SIGTERM (the process cleans up: uvicorn closes its connections, the app its GPU workers),
    SIGKILL past `grace_s`, then SIGKILL to whatever of its group is left."""
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:  # the group is gone: nothing was left
        pass
