"""Fixtures for the demo app tests: the tiny codec, a live demo server, a headless browser.

Imported by the test modules that use them (`from app_fixtures import ...`); conftest.py
(owned by the lead) provides `tiny_engine` and `tiny_cache_dir`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from tests.support.processes import spawn, stop_process  # noqa: F401  (stop_process: re-exported to the tests)

from gepard_demo.model.frames import FrameMaker

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"
CHROMIUM = os.environ.get("GEPARD_CHROMIUM", "/usr/bin/chromium")
# facts §8: the flags headless Chromium needs on these machines.
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


# The player's stats once the job with this id ended (played out, stopped or failed), else null.
PLAYER_ENDED = """(jobId) => {
  const p = window.gepardPlayer;
  const s = p.history.find((h) => h.jobId === jobId) || (p.stats.jobId === jobId ? p.stats : null);
  return s && ['ended', 'stopped', 'failed', 'error'].includes(s.state) ? s : null;
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout} s")


@contextlib.contextmanager
def serve_in_thread(app, name: str = "test-server"):
    """An ASGI app under uvicorn on a free 127.0.0.1 port, on a daemon thread; yields the port."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, name=name, daemon=True)
    thread.start()
    wait_for_port(port)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


def flood_listeners(url: str, n: int = 64, hold_s: float = 0.5) -> list:
    """n anonymous GETs of the PCM route for made-up ids at once, each dropped after hold_s:
    per request "dropped", the refusal's status code, or the transport error's name."""
    import asyncio
    import secrets

    import httpx

    async def flood():
        async with httpx.AsyncClient(base_url=url, timeout=5) as c:
            async def one():
                try:
                    async with asyncio.timeout(hold_s):
                        async with c.stream("GET", f"/gepard/pcm/{secrets.token_hex(16)}") as r:
                            return r.status_code if r.status_code != 200 else await r.aread()
                except TimeoutError:
                    return "dropped"
                except httpx.HTTPError as e:
                    return type(e).__name__

            return await asyncio.gather(*(one() for _ in range(n)))

    out = {}
    # Its own thread and loop: a Playwright test keeps an asyncio loop running in this one.
    t = threading.Thread(target=lambda: out.update(r=asyncio.run(flood())))
    t.start()
    t.join(30)
    return out["r"]


@pytest.fixture(scope="session")
def tiny_codec(tiny_engine):
    from gepard_demo.codec import load_codec

    return load_codec(tiny_engine.codec_source())


def start_process(cmd: list[str], port: int, log: Path, env: dict, cwd: Path | None = None,
                  timeout: float = 120) -> subprocess.Popen:
    """A real second process (the app, a speech server) writing to `log`, once it listens on `port`;
    in a process group of its own, so that stop_process ends what it forked too."""
    proc = spawn(cmd, cwd=cwd or ROOT, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, timeout=timeout)
    except TimeoutError:
        stop_process(proc)
        pytest.fail(f"{cmd} did not start: {Path(log).read_text()[-3000:]}")
    return proc


@dataclass
class LiveDemo:
    url: str
    port: int
    demo: object  # gepard_demo.ui.server.DemoApp


@pytest.fixture(scope="session")
def live_demo(tiny_engine, tiny_codec, tmp_path_factory):
    """The real app (PCM route + Gradio page) on a free 127.0.0.1 port, in this process."""
    from app import DEMO_STREAM, find_eval_tab
    from gepard_demo.host_settings import BatchingSettings
    from gepard_demo.ui.hosts.model_host import ModelHost
    from gepard_demo.ui.server import build_app

    # As app.py runs it: a batching host. One place, so the queue line's tests see a queue.
    host = ModelHost(tiny_engine, tiny_codec, requested="tiny").batch(BatchingSettings(max_batch=1))
    eval_tab, eval_tab_error = find_eval_tab()
    demo = build_app(host, stream=DEMO_STREAM, wav_dir=tmp_path_factory.mktemp("wavs"), eval_tab=eval_tab,
                     eval_tab_error=eval_tab_error)
    with serve_in_thread(demo.app, "demo-server") as port:
        yield LiveDemo(f"http://127.0.0.1:{port}", port, demo)


@pytest.fixture(scope="module")
def live_batching_demo(tiny_engine, tiny_codec, tmp_path_factory):
    """The app as app.py runs it: up to 4 visitors decode together (no Eval tab). Admission "cap":
    these tests are about requests decoding together, and whether "realtime" (app.py's default)
    admits a newcomer depends on this machine's measured speed (tests/batching/test_scheduler.py tests that
    rule with costs it sets)."""
    from app import DEMO_STREAM
    from gepard_demo.host_settings import BatchingSettings
    from gepard_demo.ui.hosts.model_host import ModelHost
    from gepard_demo.ui.server import build_app

    host = ModelHost(tiny_engine, tiny_codec, requested="tiny").batch(BatchingSettings(max_batch=4, admission="cap"))
    demo = build_app(host, stream=DEMO_STREAM, wav_dir=tmp_path_factory.mktemp("wavs-batching"))
    with serve_in_thread(demo.app, "demo-batching") as port:
        yield LiveDemo(f"http://127.0.0.1:{port}", port, demo)
    host.scheduler.close()


@pytest.fixture(scope="module")
def browser():
    """Headless Debian Chromium driven by Playwright (its own browser download fails here).

    Module scope: Playwright's sync API keeps an asyncio loop running in the main thread
    while it is open, which would break later tests' asyncio.run()."""
    try:
        from playwright import sync_api
    except ImportError:  # loud, not a skip: the browser tests are part of `make test`
        pytest.fail("playwright is not installed: pip install -r requirements-test.txt")
    if not shutil.which(CHROMIUM) and not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} not found: install the `chromium` apt package (.ci/apt-packages.txt)")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


def pcm_f32(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<f4").astype(np.float32)


SLIDER_HOLDS = """([id, want]) => {
  const num = document.querySelector(`#${id} input[type=number]`);
  const range = document.querySelector(`#${id} input[type=range]`);
  return num && range && Number(num.value) === want && Number(range.value) === want;
}"""


def fixed_seed(page, seed: int) -> None:
    """Untick "random seed" and type this one, as a person would."""
    page.uncheck("#gepard-random-seed input")
    box = page.locator("#gepard-seed input")
    box.fill(str(seed))
    box.press("Enter")
    box.blur()


def set_number(page, elem_id: str, value: float, attempts: int = 3) -> None:
    """Type a value into a Gradio slider's number box as a person would, and wait until the
    slider itself holds it (its range input follows the component's state, the number box
    alone does not). Under load a slider inside a just-opened accordion can mount after the
    first fill and reset the box, so a value that did not stick is typed again."""
    box = page.locator(f"#{elem_id} input[type=number]")
    for _ in range(attempts):
        box.fill(str(value))
        box.press("Enter")
        box.blur()
        try:
            page.wait_for_function(SLIDER_HOLDS, arg=[elem_id, float(value)], timeout=2_000)
            page.wait_for_timeout(100)  # a late mount would reset it now; check it held
            if page.evaluate(SLIDER_HOLDS, [elem_id, float(value)]):
                return
        except Exception:  # playwright TimeoutError: type it again
            pass
    raise AssertionError(f"slider #{elem_id} did not take the value {value}")


# -- the page's API, as tests drive it (gradio_client for the event, HTTP for the PCM) ----------

DEFAULTS = dict(
    text="Hello world, this is Gepard.", temperature=0.3, top_k=0, greedy=False, stop_threshold=0.5,
    seed=1234, random_seed=False, max_frames=60, first_chunk_frames=10, chunk_frames=10, chunk_schedule="ramp",
    decode_mode="exact", lookback_frames=8, fade_ms=20, silence_ms=100, ref_audio=None, cfg_scale=1.0, cfg_frames=0,
    repetition_penalty=1.0, repetition_window=32, force_stop_frames="off", text_arrival="at once", words_per_s=10,
    text_normalization="off", lexicon_entries="",
)
ORDER = list(DEFAULTS)


@pytest.fixture(scope="module")
def client(live_demo):
    from gradio_client import Client

    return Client(live_demo.url, verbose=False)


def args(job_id: str, **over):
    """The /generate API's arguments: the job id, then every control (DEFAULTS, with `over`)."""
    values = {**DEFAULTS, **over}
    return [job_id] + [values[k] for k in ORDER]


def new_id() -> str:
    return secrets.token_hex(16)


class Listener(threading.Thread):
    """Reads a job's PCM stream the way the page does, recording when bytes arrived."""

    def __init__(self, url: str, job_id: str, stop_after_bytes: int | None = None):
        super().__init__(daemon=True)
        self.url, self.job_id, self.stop_after = url, job_id, stop_after_bytes
        self.data = bytearray()
        self.reads = 0
        self.status = None
        self.connected = threading.Event()

    def run(self):
        import httpx

        with httpx.stream("GET", f"{self.url}/gepard/pcm/{self.job_id}", timeout=120) as r:
            self.status = r.status_code
            self.headers = r.headers
            self.connected.set()
            for part in r.iter_bytes():
                self.data += part
                self.reads += 1
                if self.stop_after is not None and len(self.data) >= self.stop_after:
                    return  # leaving the with-block closes the connection mid-stream


def lsb_apart(a, b) -> int:
    """The largest difference between two float streams made from int16 PCM, in LSBs (a different
    length is a failure). A server decodes the requests that share its batch
    in one pooled codec call, which may move a sample by one LSB (docs/DESIGN.md, "What is exact")."""
    import numpy as np

    assert len(a) == len(b) and len(a) > 0, (len(a), len(b))
    return int(np.abs(np.round(np.asarray(a) * 32768) - np.round(np.asarray(b) * 32768)).max())


def received_by(stats: dict, when_ms: float) -> float:
    """Audio seconds the page had received by performance.now() time `when_ms` (its arrivals)."""
    return max((n for t, n in stats["arrivals"] if t <= when_ms), default=0) / 22050


def gaps_with_audio_in_hand(stats: dict, slack_s: float = 0.2) -> list[dict]:
    """The player's gaps its own audio could have filled: when the silence was rendered (heard at
    starvedAt, less the output latency), the page had received more than had played, by more than
    slack_s (a read on its way to the audio thread, the clocks' mapping under load). A gap a slow
    host makes (the audio had not come) is not one; a player that starves with audio in hand is."""
    out = []
    for g in stats["gaps"]:
        came = received_by(stats, g["starvedAt"] - (stats["outputLatencyMs"] or 0))
        if came > g["atS"] + slack_s:
            out.append({**g, "receivedByThenS": came})
    return out


def generate_with_stream(client, url, **over):
    job_id = new_id()
    listener = Listener(url, job_id)
    listener.start()
    listener.connected.wait(10)
    result = client.submit(*args(job_id, **over), api_name="/generate").result(timeout=120)
    listener.join(30)
    assert not listener.is_alive()
    return result, listener


# -- visitors from distinct addresses (the per-client rule tells clients apart by address) -------

# Ten visitors' addresses (TEST-NET-3, never a real host). A test's clients connect from 127.0.0.1,
# which the server trusts as a proxy (TrafficSettings.trusted_proxies, uvicorn's default too), so
# the X-Forwarded-For they send names the visitor, as a proxy in front of the app would.
VISITOR_ADDRESSES = [f"203.0.113.{i}" for i in range(1, 11)]


def client_at(url: str, address: str):
    """gradio_client's Client for a visitor at `address`, through the trusted local proxy.
    (gradio_client cannot bind a source address: it passes its httpx options to httpx.get too.)"""
    from gradio_client import Client

    return Client(url, verbose=False, headers={"X-Forwarded-For": address})


class SlowEngine(FrameMaker):
    """The tiny engine at a set pace (a frame every step_s), slower than real time as the
    real-shape model is on a small CPU: what the automatic start buffer is for."""

    def __init__(self, inner, step_s: float):
        self.inner, self.step_s = inner, step_s

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def stream_frames(self, request):
        # Frame k comes step_s x k after the first: the pace is the same on any host whose own
        # step (and what the consumer does between two steps) takes less than step_s.
        due = None
        for step in self.inner.stream_frames(request):
            now = time.monotonic()
            due = now + self.step_s if due is None else due + self.step_s
            time.sleep(max(0.0, due - now))
            yield step
