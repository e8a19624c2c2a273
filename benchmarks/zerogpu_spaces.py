"""ZeroGPU with the real `spaces` package: app.py on a stand-in ZeroGPU device API on loopback.

A ZeroGPU Space's `spaces` talks to a device API (SPACES_ZERO_DEVICE_API_URL) to report the Space
ready, schedule each call, let its worker use the GPU and release it. This script serves the
endpoints spaces 0.51 calls (/startup-report, /schedule, /allow, /release) on 127.0.0.1, starts
`app.py --model tiny` with SPACES_ZERO_GPU=true, and checks, in order:

1. start-up: the app comes up under spaces' CUDA emulation (spaces raises if anything initialises
   CUDA in the main process) and the start-up report reaches the API, although the app never calls
   gr.Blocks.launch (gepard_demo/zerogpu/startup.py);
2. schedule: a Generate through the page's API asks for a call with the duration computed from
   its request (gepard_demo/zerogpu/budget.py), and the text, seed and frame budget it was given;
3. the call: with an NVIDIA GPU here the API hands out its UUID and spaces' worker runs the call
   on it: the audio must come back with exactly the frames asked for. Without a GPU the worker
   cannot initialise CUDA; the page's error says so and the script reports it (steps 1-2 are what
   such a machine can check).

It needs a CUDA build of torch (spaces reads torch.version.cuda); PyPI's torch 2.13.0 is one.
Run: python benchmarks/zerogpu_spaces.py [--frames 40]   (prints one JSON line; exit 1 on a failed check)
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def gpu_uuid() -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    out = subprocess.run(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"], capture_output=True, text=True)
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


class DeviceApi(http.server.ThreadingHTTPServer):
    """The device API's endpoints as spaces 0.51 calls them (spaces/zero/api.py)."""

    def __init__(self, uuid: str):
        self.calls: list[tuple[str, dict]] = []
        self.uuid = uuid
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        url = urlparse(self.path)
        self.server.calls.append((url.path, {k: v[0] for k, v in parse_qs(url.query).items()}))
        body = b""
        if url.path == "/schedule":
            body = json.dumps({"idle": False, "nvidiaIndex": 0, "nvidiaUUID": self.server.uuid,
                               "allowToken": f"token-{len(self.server.calls)}"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST

    def log_message(self, *args):
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port: int, proc: subprocess.Popen, timeout: float) -> bool:
    end = time.time() + timeout
    while time.time() < end and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return True
        except OSError:
            time.sleep(0.5)
    return False


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frames", type=int, default=40)
    p.add_argument("--timeout", type=float, default=240)
    args = p.parse_args(argv)
    uuid = gpu_uuid()
    api = DeviceApi(uuid or "GPU-00000000-0000-0000-0000-000000000000")
    threading.Thread(target=api.serve_forever, daemon=True).start()
    work = Path(tempfile.mkdtemp(prefix="zerogpu-spaces-"))
    port = free_port()
    env = {**os.environ, "SPACES_ZERO_GPU": "true", "SPACES_ZERO_DEVICE_API_URL": f"http://127.0.0.1:{api.server_port}",
           "ZEROGPU_OFFLOAD_DIR": str(work / "offload"), "HOME": str(work)}
    log = work / "app.log"
    proc = subprocess.Popen([sys.executable, str(ROOT / "app.py"), "--model", "tiny", "--port", str(port),
                             "--cache-dir", str(work / "cache")], cwd=work, env=env, stdout=open(log, "w"),
                            stderr=subprocess.STDOUT)
    result: dict = {"gpu": uuid, "log": str(log)}
    try:
        result["started"] = wait_for(port, proc, args.timeout)
        result["startup_reported"] = any(path == "/startup-report" for path, _ in api.calls)
        if result["started"]:
            from gradio_client import Client

            client = Client(f"http://127.0.0.1:{port}", verbose=False)
            try:
                out = client.predict("", "Hello from ZeroGPU.", 0.3, 0, False, 0.99, 7, False, args.frames, 10, 10,
                                     "exact", 8, 20, 0, None, 1.0, 0, api_name="/generate")
                result["generate"] = out[0]
            except Exception as exc:  # noqa: BLE001  reported: without a GPU the worker cannot start
                result["generate_error"] = str(exc)[:300]
        schedules = [q for path, q in api.calls if path == "/schedule"]
        result["scheduled_durations_s"] = [int(q.get("durationSeconds", 0)) for q in schedules]
        result["api_calls"] = [path for path, _ in api.calls]
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
    text = log.read_text()
    result["cuda_initialised_in_main"] = "Low-level CUDA init" in text or "CUDA has been initialized" in text
    from gepard_demo.zerogpu.budget import GpuBudget

    want = GpuBudget().stream_s("Hello from ZeroGPU.", args.frames, None, False)
    checks = {
        "start-up under spaces, report sent": result["started"] and result["startup_reported"],
        "no CUDA in the main process": not result["cuda_initialised_in_main"],
        "a Generate scheduled with its own duration": result["scheduled_durations_s"][:1] == [want],
        "the call ran on the GPU" if uuid else "no GPU here: the call could not run (expected)":
            (str(result.get("generate", "")).startswith("Done") if uuid else "generate_error" in result),
    }
    result["checks"] = checks
    print(json.dumps(result))
    if not all(checks.values()):
        print(text[-4000:], file=sys.stderr)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
