"""A busy page keeps serving (issue 36): the app's memory and its answers under many visitors.

`app.py --model tiny --no-eval-tab` runs in a second process with its defaults (4 places, realtime
admission, per-client 2, finished audio kept 60 s / 64 MB). N Generates (500 by default) come from
10 visitors, each making its share one after another through gradio_client (`/generate`, one short
sentence, `--max-frames` frames, no audio listener: an API client reads the WAV), each visitor named
by the X-Forwarded-For it sends through 127.0.0.1 (a trusted proxy by default, as a proxy in front
of the app would be). Sampled every 50 ms: the server process's RSS (psutil if installed, else
/proc/PID/status VmRSS); every 200 ms: the registry's load (`GET /gepard/load`: the finished jobs
kept and their bytes against the bound).

Printed (JSON): RSS at the start (the app warmed up, before any Generate), its peak and the end
(all answered, 2 s idle); the kept bytes' peak against the bound; Generates answered per minute
of wall time; refusals by cause (none is expected: no visitor runs two at once).

    flock /tmp/gepard-heavy.lock .venv/bin/python benchmarks/busy_page.py [--generates 500] [--clients 10]
        [--max-frames 20] [--cache-dir DIR]
--quick: 8 Generates of 8 frames from 2 visitors.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

import httpx  # noqa: E402
from tests.support.app_fixtures import args, client_at, free_port, new_id, wait_for_port  # noqa: E402
from tests.support.processes import spawn, stop_process  # noqa: E402
from quick import add_quick  # noqa: E402

CAUSES = {"this address already has": "per-client", "too many Generates running on this server": "in all"}


def rss_bytes(pid: int) -> int:
    try:
        import psutil

        return psutil.Process(pid).memory_info().rss
    except ImportError:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"no VmRSS for process {pid}")


class Sampler(threading.Thread):
    """Calls `read` every `every_s` and keeps the largest value (and the last)."""

    def __init__(self, read, every_s: float):
        super().__init__(daemon=True)
        self.read, self.every_s = read, every_s
        self.peak = self.last = 0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                self.last = self.read()
            except (OSError, httpx.HTTPError, RuntimeError):
                pass  # one missed sample
            self.peak = max(self.peak, self.last)
            time.sleep(self.every_s)


def cause(message: str) -> str:
    return next((name for text, name in CAUSES.items() if text in message), f"other: {message[:120]}")


def drive(url: str, generates: int, clients: int, max_frames: int,
          on_answer=lambda n: None) -> tuple[int, Counter, float]:
    """Each visitor makes its share one after another; (answered, refusals by cause, wall s).
    `on_answer(n)` is called with the running count after each answered Generate."""
    from gradio_client.exceptions import AppError

    shares = [generates // clients + (1 if i < generates % clients else 0) for i in range(clients)]
    answered, refused, lock = [0], Counter(), threading.Lock()

    def visitor(i: int, n: int) -> None:
        client = client_at(url, f"203.0.113.{i + 1}")
        try:
            for k in range(n):
                try:
                    status = client.predict(*args(new_id(), max_frames=max_frames, seed=1000 * i + k),
                                            api_name="/generate")[0]
                    with lock:
                        if status.startswith("Done"):
                            answered[0] += 1
                            on_answer(answered[0])
                        else:
                            refused[f"other: {status[:120]}"] += 1
                except AppError as exc:
                    with lock:
                        refused[cause(exc.message)] += 1
        finally:
            client.close()

    t0 = time.monotonic()
    threads = [threading.Thread(target=visitor, args=(i, n)) for i, n in enumerate(shares)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answered[0], refused, time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--generates", type=int, default=500)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--max-frames", type=int, default=20, help="each Generate's frame budget (tiny runs to it)")
    ap.add_argument("--cache-dir", default=None, help="where tiny is built (default: the app's own)")
    add_quick(ap)
    a = ap.parse_args()
    if a.quick:
        a.generates, a.clients, a.max_frames = 8, 2, 8
    port = free_port()
    env = dict(os.environ)
    if a.cache_dir:
        env["GEPARD_CACHE_DIR"] = a.cache_dir
    log = Path(tempfile.mkdtemp(prefix="busy-page-")) / "app.log"
    cmd = [sys.executable, str(ROOT / "app.py"), "--model", "tiny", "--no-eval-tab", "--port", str(port)]
    proc = spawn(cmd, cwd=ROOT, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, timeout=300)
        url = f"http://127.0.0.1:{port}"
        time.sleep(1.0)
        start = rss_bytes(proc.pid)
        rss = Sampler(lambda: rss_bytes(proc.pid), 0.05)
        kept = Sampler(lambda: httpx.get(f"{url}/gepard/load", timeout=10).json()["kept_bytes"], 0.2)
        rss.start()
        kept.start()
        # RSS after every tenth of the Generates: whether the process levels off once the kept
        # jobs reach their steady state (60 s of finished Generates) or keeps growing.
        step, trace = max(1, a.generates // 10), {}
        on_answer = lambda n: trace.setdefault(n, rss_bytes(proc.pid)) if n % step == 0 else None  # noqa: E731
        answered, refused, wall = drive(url, a.generates, a.clients, a.max_frames, on_answer)
        time.sleep(2.0)
        end = rss_bytes(proc.pid)
        load = httpx.get(f"{url}/gepard/load", timeout=10).json()
        rss.stop.set()
        kept.stop.set()
    finally:
        stop_process(proc)
    mb = lambda n: round(n / 2**20, 1)  # noqa: E731
    print(json.dumps({
        "generates": a.generates, "clients": a.clients, "max_frames": a.max_frames,
        "answered": answered, "refused_by_cause": dict(refused),
        "wall_s": round(wall, 1), "answered_per_min": round(60 * answered / wall, 1),
        "rss_mb": {"start": mb(start), "peak": mb(max(rss.peak, start, end)), "end": mb(end)},
        "rss_mb_after_answered": {n: mb(v) for n, v in sorted(trace.items())},
        "kept_audio_mb": {"peak": mb(kept.peak), "end": mb(load["kept_bytes"]), "bound": mb(load["keep_bytes"])},
        "finished_jobs_kept_at_end": load["kept"], "dropped_unheard": load["dropped"],
    }, indent=2))
    # A refusal of no known cause is an error (a Generate the page could not take), not a busy page.
    errors = sum(n for why, n in refused.items() if why.startswith("other"))
    all_answered = answered + sum(refused.values()) == a.generates
    return 0 if all_answered and not errors and kept.peak <= load["keep_bytes"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
