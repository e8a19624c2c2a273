"""ZeroGPU with the real `spaces` package: app.py against ZeroGPU's device API on loopback.

A ZeroGPU Space's `spaces` talks to a device API (SPACES_ZERO_DEVICE_API_URL) to report the Space
ready, schedule each call, let its worker use the GPU and release it. This script serves those
endpoints on 127.0.0.1 (tests/support/zerogpu_device.py, answering as spaces 0.51 expects), starts app.py
on the tiny model with SPACES_ZERO_GPU=true and checks, in order; any failed check or error is a
failure (exit 1):

1. start-up: the app comes up under spaces' CUDA emulation (which raises if anything initialises
   CUDA in the main process) and the start-up report reaches the API, although the app never
   calls gr.Blocks.launch (gepard_demo/zerogpu/startup.py);
2. a Generate through the page's API, with a visitor's X-IP-Token: scheduled with that token and
   with the seconds its call was sized to (gepard_demo/zerogpu/budget.py; a sentence: at most
   30 s), allowed, run in spaces' worker, released; its audio has exactly the frames asked for;
3. Stop: a long Generate stopped after its first audio is released, with fewer frames made;
4. a refusal: a quota that cannot cover the ask comes back as one line that says what to do.

Where it runs the call: on an NVIDIA GPU with a CUDA build of torch, on the GPU (the API hands
out its UUID); with a CPU build of torch, on the CPU through tests/support/app_child.py's shim (the
least that lets a CPU torch through spaces' CUDA steps; the test suite runs the same). A CUDA
build without a GPU cannot run the call: the script says so and fails.

Run: python benchmarks/zerogpu_spaces.py [--frames 40] [--cache-dir DIR]   (prints one JSON line)
--quick: every check, on 12 frames a Generate.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from quick import add_quick  # noqa: E402

TOKEN = "eyJhbGciOiJub25lIn0.eyJ1c2VyIjoiYmVuY2htYXJrIn0.c2lnbmF0dXJl"
SENTENCE = "Hello from ZeroGPU, one sentence long."


def gpu_uuid() -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    out = subprocess.run(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"], capture_output=True, text=True)
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def args_for(text: str, frames: int, seed: int = 7) -> list:
    """The page's /generate arguments (tests/app_fixtures.args: every declared control, in order),
    a fixed seed and a stop threshold the tiny model never reaches, so each call makes `frames`."""
    from tests.support.app_fixtures import args

    return args("", text=text, max_frames=frames, seed=seed, stop_threshold=0.99, silence_ms=0)


def main(argv: list[str] | None = None) -> int:
    import torch
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    from tests.support.app_fixtures import free_port, wait_for_port
    from tests.support.processes import spawn, stop_process
    from gepard_demo.settings import SamplingSettings
    from gepard_demo.zerogpu.budget import GpuBudget
    from tests.support.zerogpu_device import GPU_UUID, QUOTA, DeviceApi, spaces_app_command, spaces_env, wait_until

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frames", type=int, default=40)
    p.add_argument("--timeout", type=float, default=240)
    p.add_argument("--cache-dir", type=Path, default=None, help="where the app builds tiny (default: a fresh folder)")
    add_quick(p)
    args = p.parse_args(argv)
    if args.quick:
        args.frames = 12
    uuid, cuda_build = gpu_uuid(), torch.version.cuda is not None
    result: dict = {"gpu": uuid, "torch": torch.__version__, "runs_on": "gpu" if uuid and cuda_build else "cpu shim"}
    if cuda_build and uuid is None:
        result["error"] = "a CUDA build of torch and no NVIDIA GPU: the call cannot run (use a GPU, or a CPU build)"
        print(json.dumps(result))
        return 1
    api = DeviceApi(uuid or GPU_UUID)
    work = Path(tempfile.mkdtemp(prefix="zerogpu-spaces-"))
    port, log = free_port(), work / "app.log"
    command = spaces_app_command(port, "--no-eval-tab")
    if result["runs_on"] == "gpu":  # the real runtime, no shim
        command = [sys.executable, str(ROOT / "app.py"), *command[2:]]
    env = spaces_env(api, work, args.cache_dir or work / "cache")
    proc = spawn(command, cwd=work, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT)
    checks: dict[str, bool] = {}
    try:
        wait_for_port(port, timeout=args.timeout)
        checks["start-up under spaces, report sent"] = api.paths()[:1] == ["/startup-report"]
        client = Client(f"http://127.0.0.1:{port}", verbose=False, headers={"X-IP-Token": TOKEN})
        t0 = time.monotonic()
        out = client.predict(*args_for(SENTENCE, args.frames), api_name="/generate")
        result["generate_s"] = round(time.monotonic() - t0, 2)
        (schedule,) = api.schedules()
        want = GpuBudget().ask_s(GpuBudget().call_frames(SENTENCE, 0, SamplingSettings(max_frames=args.frames)),
                                 SamplingSettings(max_frames=args.frames), 0)
        result["asked_s"] = int(schedule["durationSeconds"])
        checks["the visitor's token on the schedule"] = schedule.get("token") == TOKEN
        checks["asked what budget.py sizes (<= 30 s)"] = result["asked_s"] == want <= 30
        checks["the call ran and was released"] = (str(out[0]).startswith("Done") and f"| frames | {args.frames} |" in out[2]
                                                   and "/allow" in api.paths() and api.releases()[-1]["fail"] == "false")
        # Stop after the first audio of a long one.
        job = client.submit(*args_for("A long one, stopped early.", 4000, seed=8), api_name="/generate")
        wait_until(lambda: len(api.schedules()) == 2 and api.active, 120, "the second call")
        time.sleep(1.0)
        released = len(api.releases())
        job.cancel()  # the visitor stops it (Gradio cancels the event: its session stops at the next step)
        wait_until(lambda: len(api.releases()) > released, 60, "the stopped call's release")
        checks["Stop releases the GPU"] = True
        api.script.append(QUOTA)
        try:
            client.predict(*args_for(SENTENCE, args.frames), api_name="/generate")
            checks["a refusal is one clear line"] = False
        except AppError as exc:
            result["refusal"] = str(exc)
            checks["a refusal is one clear line"] = "quota for today is used up" in str(exc) and "<" not in str(exc)
        client.close()
    except Exception as exc:  # noqa: BLE001  every error is a failure, reported
        result["error"] = f"{type(exc).__name__}: {exc}"[:500]
    finally:
        stop_process(proc)  # its whole group: the runtime's forked GPU workers too
        api.close()
    text = log.read_text()
    checks["no CUDA in the main process"] = "Low-level CUDA init" not in text
    result["checks"] = checks
    ok = bool(checks) and all(checks.values()) and "error" not in result
    result["ok"] = ok
    print(json.dumps(result))
    if not ok:
        print(text[-4000:], file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
