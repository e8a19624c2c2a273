"""`python -m eval run --engine server` over a pool: several real speech servers (ours, on the
tiny model, each with its own engine) with requests in flight on each. The rows equal a
sequential run's; a server that dies mid-run hands its utterances to the live ones; with every
server dead the run exits 2, keeps its rows and resumes."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from app_fixtures import free_port, wait_for_port
from codec_fixtures import POOLED_PCM16_LSB
from eval_fixtures import rows_of

from eval.cli import main
from gepard_demo.settings import StreamSettings

pytestmark = pytest.mark.numerics  # results depend on the CPU's kernels: make test-isa runs it under other ISAs

LIMIT, FRAMES = "6", "12"


class Served:
    """One in-process speech server on its own tiny engine + codec; `kill()` drops it mid-run."""

    def __init__(self, cache_dir: Path):
        import uvicorn

        from gepard_demo.codec import load_codec
        from gepard_demo.model.engine import GepardEngine
        from gepard_demo.serving.server import build_speech_app

        engine = GepardEngine.load("tiny", cache_dir=cache_dir)
        app = build_speech_app(engine, load_codec(engine.codec_source()), engine.default_sampling(), StreamSettings())
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="critical",
                                                    timeout_graceful_shutdown=0))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        wait_for_port(self.port)

    def kill(self) -> None:
        self.server.should_exit = self.server.force_exit = True
        self.thread.join(15)


@pytest.fixture(scope="module")
def servers(tiny_cache_dir):
    started = [Served(tiny_cache_dir) for _ in range(2)]
    yield started
    for s in started:
        s.kill()


def _run(out: Path, *urls: str, extra: tuple[str, ...] = ()) -> int:
    args = ["run", "--engine", "server", "--set", "smoke", "--limit", LIMIT, "--max-frames", FRAMES, "--seed", "7",
            "--out", str(out), *extra]
    for u in urls:
        args += ["--server-url", u]
    return main(args)


def _same_rows(a: Path, b: Path) -> None:
    ra = {r["id"]: r for r in rows_of(a)}
    rb = {r["id"]: r for r in rows_of(b)}
    assert sorted(ra) == sorted(rb) and len(ra) == int(LIMIT)
    timing = {"ttfa_s", "rtf", "gen_s", "settings"}
    for uid in ra:
        assert {k: v for k, v in ra[uid].items() if k not in timing} == {k: v for k, v in rb[uid].items() if k not in timing}
        wa, _ = sf.read(a / ra[uid]["wav"], dtype="int16")
        wb, _ = sf.read(b / rb[uid]["wav"], dtype="int16")
        # The same frames (the rows above); the audio within the pooled codec's rounding, since
        # requests that overlap on a server decode together (codec/batched.py: not bit-equal).
        assert len(wa) == len(wb) and np.abs(wa.astype(int) - wb.astype(int)).max() <= POOLED_PCM16_LSB, uid


def _kill_after_first_row(server: Served, run_dir: Path) -> tuple[threading.Thread, list[int]]:
    """Kills the server once the run has a row; the list receives how many rows there were."""
    rows_then: list[int] = []

    def watch():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            rows = run_dir / "rows.jsonl"
            if rows.is_file() and rows.read_text().strip():
                server.kill()
                rows_then.append(len(rows.read_text().splitlines()))
                return
            time.sleep(0.01)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t, rows_then


def test_pool_rows_equal_a_sequential_run_and_survive_dead_servers(servers, tiny_cache_dir, tmp_path, capsys):
    a, b = servers
    seq = tmp_path / "seq"
    assert _run(seq, a.url) == 0

    # two servers, two requests in flight on each, plus one that never answered: left out
    dead = f"http://127.0.0.1:{free_port()}"
    pool = tmp_path / "pool"
    assert _run(pool, a.url, dead, b.url, extra=("--concurrency", "2")) == 0
    assert "left out" in capsys.readouterr().err
    _same_rows(seq, pool)

    # a server that dies after the first row: its utterances move to the live one
    dying = Served(tiny_cache_dir)
    moved = tmp_path / "moved"
    watcher, rows_then = _kill_after_first_row(dying, moved)
    assert _run(moved, dying.url, a.url) == 0
    watcher.join(5)
    assert not dying.thread.is_alive() and rows_then[0] < int(LIMIT)  # it died mid-run
    _same_rows(seq, moved)

    # every server dies: exit 2 naming them, the finished rows stay, and a rerun resumes
    last = Served(tiny_cache_dir)
    stopped = tmp_path / "stopped"
    watcher, _ = _kill_after_first_row(last, stopped)
    assert _run(stopped, last.url) == 2
    watcher.join(5)
    err = capsys.readouterr().err
    assert last.url in err and "every Gepard server is gone" in err and "resume" in err
    kept = rows_of(stopped)
    assert 1 <= len(kept) < int(LIMIT)
    assert _run(stopped, a.url, b.url, extra=("--concurrency", "2")) == 0
    assert rows_of(stopped)[: len(kept)] == kept
    _same_rows(seq, stopped)


def test_urls_from_a_file(servers, tmp_path):
    a, b = servers
    listing = tmp_path / "servers.txt"
    listing.write_text(f"# the pool\n{a.url}\n\n{b.url}  # second\n")
    assert main(["run", "--engine", "server", "--server-urls", str(listing), "--set", "smoke", "--limit", "2",
                 "--max-frames", FRAMES, "--out", str(tmp_path / "r")]) == 0
    assert rows_of(tmp_path / "r")[0]["settings"]["server_urls"] == [a.url, b.url]
    assert main(["run", "--engine", "server", "--server-url", a.url, "--server-url", a.url,
                 "--out", str(tmp_path / "twice")]) == 2


def test_a_killed_pool_run_resumes(servers, tiny_cache_dir, tmp_path):
    """SIGKILL the eval process once it has written a row; the same command finishes the run
    and keeps what was there (a torn last line, if any, is dropped and redone)."""
    import signal
    import subprocess
    import sys

    a, b = servers
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "eval", "run", "--engine", "server", "--server-url", a.url, "--server-url", b.url,
           "--set", "smoke", "--limit", LIMIT, "--max-frames", "200", "--seed", "7", "--out", str(out)]
    proc = subprocess.Popen(cmd, cwd=Path(__file__).resolve().parents[1], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    rows = out / "rows.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and not (rows.is_file() and rows.read_text().strip()):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    kept = rows_of(out)
    assert 1 <= len(kept) < int(LIMIT), "the kill must land mid-run"
    assert main(cmd[3:]) == 0
    done = rows_of(out)
    assert done[: len(kept)] == kept and sorted(r["id"] for r in done) == [f"smoke-{i}" for i in range(1, 7)]
