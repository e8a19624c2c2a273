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


def interruptible(cmd: list[str], **popen) -> subprocess.Popen:
    """subprocess.Popen of a child that takes Ctrl-C (SIGINT) as one started from a terminal does.
    A suite started in the background by a non-interactive shell (`make test &`, as CI harnesses
    and agents start it) runs with SIGINT ignored, and an ignored signal stays ignored across exec:
    the child's Python then installs no KeyboardInterrupt handler and rightly ignores Ctrl-C (the
    Ctrl-C test hung so in three fresh-clone runs of `.ci/run` started that way). A handled signal
    is reset to its default at exec, so SIGINT is handled here while the child starts. Main
    thread only (signal.signal)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(cmd, **popen)
    finally:
        signal.signal(signal.SIGINT, previous)


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


def start_server(command, cwd=None, ready_path: str = "/v1/models", timeout_s: float = 300.0):
    """A server in a second process on a free 127.0.0.1 port, ready: `command(port)` is its argv.
    Returns (process, "http://127.0.0.1:PORT"); raises RuntimeError when it dies or never answers
    `ready_path` within timeout_s (the process is stopped first)."""
    import socket
    import time
    import urllib.error
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = spawn(command(port), cwd=cwd, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(url + ready_path, timeout=2) as r:
                if r.status == 200:
                    return proc, url
        except (urllib.error.URLError, OSError):
            time.sleep(0.5)
    stop_process(proc)
    raise RuntimeError(f"the server `{' '.join(command(port))}` did not start (exit code {proc.returncode})")
