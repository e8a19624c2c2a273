"""ZeroGPU's device API on loopback, for the real `spaces` package (tests and benchmarks).

A ZeroGPU Space's `spaces` talks to a device API (SPACES_ZERO_DEVICE_API_URL): it reports the
Space ready, schedules each call (with the visitor's X-IP-Token and the seconds the call asks
for), lets the worker process use the GPU and releases it. `DeviceApi` serves the endpoints and
answers spaces 0.51 expects (spaces/zero/api.py and client.py), records every call, and answers
a scripted `/schedule` as ZeroGPU would refuse it: quota exceeded, an illegal duration, a queue
that times out, no GPU, or a queue held until the test lets it go.

`spaces_app_command` starts app.py under `tests/support/app_child.py`, which lets a CPU build of
torch pass spaces' CUDA checks in that process only.
"""

from __future__ import annotations

import http.server
import json
import os
import sys
import threading
import time
from collections import deque
from pathlib import Path
from urllib.parse import parse_qs, urlparse

ROOT = Path(__file__).resolve().parents[2]
GPU_UUID = "GPU-00000000-0000-0000-0000-000000000000"

# Scripted answers to /schedule, as ZeroGPU gives them (spaces/zero/client.py reads them).
GRANT = "grant"
QUOTA = "quota"  # 429: the visitor's quota cannot cover the ask
ILLEGAL = "illegal"  # 429 with a negative wait: the ask is above the maximum
NO_GPU = "no_gpu"  # 503
QUEUE_TIMEOUT = "queue_timeout"  # queued, then "failed" after the wait
QUEUED = "queued"  # queued: pings until `release_queue()`, then granted (`hold_next_queue()` scripts one)


class DeviceApi(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, uuid: str = GPU_UUID):
        self.uuid = uuid
        self.calls: list[tuple[str, dict]] = []
        self.script: deque[str] = deque()  # the next /schedule answers (then: GRANT)
        self.left_s, self.auth = 12, "regular"  # what a QUOTA answer says
        self.fresh_next = False  # the next grant is not "idle": spaces forks a fresh worker for it
        self.queue_open = threading.Event()
        self.queued = threading.Event()  # a schedule is waiting in the held queue
        self.queue_closed = threading.Event()  # ... and its client went away
        self.active: set[str] = set()  # allow tokens scheduled and not yet released
        self.peak_active = 0
        self._lock = threading.Lock()
        self._tokens = 0
        super().__init__(("127.0.0.1", 0), _Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"

    def paths(self) -> list[str]:
        with self._lock:
            return [path for path, _ in self.calls]

    def schedules(self) -> list[dict]:
        with self._lock:
            return [q for path, q in self.calls if path == "/schedule"]

    def releases(self) -> list[dict]:
        with self._lock:
            return [q for path, q in self.calls if path == "/release"]

    def hold_next_queue(self) -> None:
        """The next /schedule waits in ZeroGPU's queue (pings) until `release_queue()`."""
        self.queue_open, self.queued, self.queue_closed = threading.Event(), threading.Event(), threading.Event()
        with self._lock:
            self.script.append(QUEUED)

    def release_queue(self) -> None:
        self.queue_open.set()

    def _record(self, path: str, query: dict) -> None:
        with self._lock:
            self.calls.append((path, query))

    def _grant(self) -> dict:
        with self._lock:
            self._tokens += 1
            token = f"allow-{self._tokens}"
            self.active.add(token)
            self.peak_active = max(self.peak_active, len(self.active))
            # "idle": spaces may reuse the worker that served this GPU last (one per GPU index);
            # calls at once get a GPU (and so a worker) each, as ZeroGPU hands them out.
            index, idle, self.fresh_next = len(self.active) - 1, not self.fresh_next, False
        return {"idle": idle, "nvidiaIndex": index, "nvidiaUUID": self.uuid, "allowToken": token}

    def _released(self, token: str) -> None:
        with self._lock:
            self.active.discard(token)

    def close(self) -> None:
        self.queue_open.set()
        self.shutdown()
        self.server_close()


class _Handler(http.server.BaseHTTPRequestHandler):
    server: DeviceApi
    protocol_version = "HTTP/1.1"

    def do_POST(self):  # noqa: N802  (http.server's names)
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        self.server._record(url.path, query)
        if url.path == "/schedule":
            return self._schedule()
        if url.path == "/release":
            self.server._released(query.get("allowToken", ""))
        self._json(200, {} if url.path != "/queue-size" else 0)

    do_GET = do_POST

    def _schedule(self):
        api = self.server
        with api._lock:
            answer = api.script.popleft() if api.script else GRANT
        if answer == GRANT:
            return self._json(200, api._grant())
        if answer == QUOTA:
            return self._json(429, {"left": api.left_s, "wait": 3600}, {"X-Authenticated": api.auth})
        if answer == ILLEGAL:
            return self._json(429, {"left": api.left_s, "wait": -1}, {"X-Authenticated": api.auth})
        if answer == NO_GPU:
            return self._json(503, {"detail": "no GPU"})
        # Queued: spaces reads server-sent events, a ping at a time, until succeeded or failed.
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("X-Queuing-Reason", "node")
        self.end_headers()
        queued, queue_open, queue_closed = api.queued, api.queue_open, api.queue_closed
        queued.set()
        try:
            if answer == QUEUE_TIMEOUT:
                self._event("ping")
                time.sleep(0.3)  # spaces reads one event a read: ZeroGPU's come apart in time
                return self._event("failed")
            while not queue_open.wait(0.2):
                self._event("ping")
            self._event("succeeded", json.dumps(api._grant()))
        except (BrokenPipeError, ConnectionResetError):
            queue_closed.set()  # the app gave up waiting (its visitor left)
        finally:
            self.close_connection = True

    def _event(self, name: str, data: str | None = None) -> None:
        # spaces parses each read as one event: send each whole, then flush
        body = f"event: {name}\n" + (f"data: {data}\n" if data is not None else "") + "\n"
        self.wfile.write(body.encode())
        self.wfile.flush()

    def _json(self, status: int, body, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def spaces_env(api: DeviceApi, work: Path, cache_dir: Path | None = None, **extra: str) -> dict:
    """The environment of a ZeroGPU Space, pointed at `api`."""
    env = {**os.environ, "SPACES_ZERO_GPU": "true", "SPACES_ZERO_DEVICE_API_URL": api.url,
           "ZEROGPU_OFFLOAD_DIR": str(work / "offload"), "PYTHONUNBUFFERED": "1", **extra}
    if cache_dir is not None:
        env["GEPARD_CACHE_DIR"] = str(cache_dir)
    return env


def spaces_app_command(port: int, *args: str) -> list[str]:
    """app.py on the tiny model under the real `spaces` (tests/support/app_child.py's CPU shim)."""
    return [sys.executable, str(ROOT / "tests" / "support" / "app_child.py"), "--model", "tiny", "--port", str(port), *args]


def wait_until(condition, seconds: float, what: str) -> None:
    t0 = time.monotonic()
    while not condition():
        if time.monotonic() - t0 > seconds:
            raise AssertionError(f"{what} did not happen within {seconds} s")
        time.sleep(0.02)
