"""`python -m eval run --engine server` over a pool: several real speech servers (ours, on the
tiny model, each with its own engine) with requests in flight on each. The rows equal a
sequential run's; a server that dies mid-run hands its utterances to the live ones; with every
server dead the run exits 2, keeps its rows and resumes. Where a server dies or the run is
killed is chosen by the test: the request there never ends (hold_fixtures.endless_text_patch)."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from tests.support.app_fixtures import free_port, wait_for_port
from tests.support.codec_fixtures import POOLED_PCM16_LSB
from tests.support.hold_fixtures import ENDLESS_TEXT, endless_text_patch, wait_until, within
from tests.support.eval_fixtures import rows_of

from eval.cli import main
from gepard_demo.settings import StreamSettings

# numerics: results depend on the CPU's kernels (make test-isa runs it under other ISAs); slow: several
# real servers, each loading the model
pytestmark = [pytest.mark.numerics, pytest.mark.slow]

LIMIT, FRAMES = "6", "12"
ROOT = Path(__file__).resolve().parents[3]


class Served:
    """One in-process speech server on its own tiny engine + codec; `kill()` drops it mid-run."""

    def __init__(self, cache_dir: Path):
        import uvicorn

        from gepard_demo.codec import load_codec
        from gepard_demo.model.engine import GepardEngine
        from gepard_demo.serving.server import build_speech_app

        self.engine = engine = GepardEngine.load("tiny", cache_dir=cache_dir)
        app = build_speech_app(engine, load_codec(engine.codec_source()), engine.default_sampling(), StreamSettings())
        self.scheduler = app.state.scheduler
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


def _run(out: Path, *urls: str, extra: tuple[str, ...] = (), set_file: Path | None = None) -> int:
    args = ["run", "--engine", "server", "--set", str(set_file or "smoke"), "--limit", LIMIT, "--max-frames", FRAMES,
            "--seed", "7", "--out", str(out), *extra]
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


def _kill_when(server: Served, ready) -> threading.Thread:
    """Kills the server (mid-request: it holds one that never ends) once ready() holds."""

    def watch():
        wait_until(ready, 120, "the server holding its endless request")
        server.kill()

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def _row_count(run_dir: Path) -> int:
    rows = run_dir / "rows.jsonl"
    return rows.read_bytes().count(b"\n") if rows.is_file() else 0


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

    # a server that dies holding an utterance (on it, none ever ends) once the run has a row:
    # what it held moves to the live one
    dying = Served(tiny_cache_dir)
    undo = endless_text_patch(dying.engine.tokenizer, text=None, talker=dying.engine.talker)
    moved = tmp_path / "moved"
    try:
        watcher = _kill_when(dying, lambda: dying.scheduler.load()["running"] == 1 and _row_count(moved) >= 1)
        assert _run(moved, dying.url, a.url) == 0
    finally:
        undo()
    watcher.join(5)
    assert not dying.thread.is_alive()
    within(lambda: dying.scheduler.load()["running"] == 0)  # a server going down lets go of what it ran
    _same_rows(seq, moved)

    # every server dies: exit 2 naming them, the finished rows stay, and a rerun resumes. The
    # second sentence never ends on this server, so it dies with the first row written.
    last = Served(tiny_cache_dir)
    undo = endless_text_patch(last.engine.tokenizer, talker=last.engine.talker)
    stopped = tmp_path / "stopped"
    held_set = _set_with_endless(tmp_path, 2)
    try:
        watcher = _kill_when(last, lambda: last.scheduler.load()["running"] == 1 and _row_count(stopped) == 1)
        assert _run(stopped, last.url, set_file=held_set) == 2
    finally:
        undo()
    watcher.join(5)
    err = capsys.readouterr().err
    assert last.url in err and "every Gepard server is gone" in err and "resume" in err
    kept = rows_of(stopped)
    assert len(kept) == 1
    assert _run(stopped, a.url, b.url, extra=("--concurrency", "2"), set_file=held_set) == 0
    assert rows_of(stopped)[: len(kept)] == kept and len(rows_of(stopped)) == int(LIMIT)


def _set_with_endless(tmp_path: Path, nth: int) -> Path:
    """smoke, its nth sentence replaced by one that starts with ENDLESS_TEXT."""
    import json

    rows = [json.loads(line) for line in (ROOT / "eval/sets/smoke.jsonl").read_text().splitlines()]
    rows[nth - 1]["text"] = f"{ENDLESS_TEXT}, or so it says."
    path = tmp_path / f"set-endless-{nth}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_urls_from_a_file(servers, tmp_path):
    a, b = servers
    listing = tmp_path / "servers.txt"
    listing.write_text(f"# the pool\n{a.url}\n\n{b.url}  # second\n")
    assert main(["run", "--engine", "server", "--server-urls", str(listing), "--set", "smoke", "--limit", "2",
                 "--max-frames", FRAMES, "--out", str(tmp_path / "r")]) == 0
    assert rows_of(tmp_path / "r")[0]["settings"]["server_urls"] == [a.url, b.url]
    assert main(["run", "--engine", "server", "--server-url", a.url, "--server-url", a.url,
                 "--out", str(tmp_path / "twice")]) == 2


def test_a_killed_pool_run_resumes(servers, tiny_engine, tmp_path):
    """SIGKILL the eval process while one server holds a sentence that never ends and every other
    sentence is done; the same command then finishes the run and keeps what was there."""
    import signal
    import subprocess
    import sys

    a, b = servers
    out, set_file = tmp_path / "killed", _set_with_endless(tmp_path, 2)
    cmd = [sys.executable, "-m", "eval", "run", "--engine", "server", "--server-url", a.url, "--server-url", b.url,
           "--set", str(set_file), "--max-frames", "200", "--seed", "7", "--out", str(out)]
    undo = endless_text_patch(tiny_engine.tokenizer)  # on the servers (this process): smoke-2 never ends
    try:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: _row_count(out) == int(LIMIT) - 1, 120, "every sentence but the endless one")
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        undo()
    kept = rows_of(out)
    assert len(kept) == int(LIMIT) - 1 and "smoke-2" not in {r["id"] for r in kept}
    assert main(cmd[3:]) == 0
    done = rows_of(out)
    assert done[: len(kept)] == kept and sorted(r["id"] for r in done) == [f"smoke-{i}" for i in range(1, 7)]
