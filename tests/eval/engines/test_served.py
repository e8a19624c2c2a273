"""`python -m eval run --engine server`: a served tiny Gepard (`python -m gepard_demo serve`, a
real subprocess) scored like the local one, and a dead or silent server as a clear exit 2
that keeps the finished rows for a resume."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf
from tests.support.app_fixtures import free_port, wait_for_port
from tests.support.processes import spawn, stop_process
from tests.support.eval_fixtures import rows_of
from tests.support.sound import voice_like

from eval.cli import main
from eval.engines.served import GepardServer, ServerError, extensions_for
from eval.engines.request import SynthesisItem
from eval.runs.run import RunConfig, run
from eval.runs.seeds import utterance_seed
from gepard_demo.serving.protocol import delta_event, sse_event
from gepard_demo.settings import SamplingSettings, StreamSettings

REPO = Path(__file__).resolve().parents[3]
FRAMES = "20"


@pytest.fixture(scope="module")
def server_url(tiny_cache_dir):
    port = free_port()
    proc = spawn(
        [sys.executable, "-m", "gepard_demo", "serve", "--model", "tiny", "--cache-dir", str(tiny_cache_dir),
         "--port", str(port), "--log-level", "warning"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_port(port, timeout=90)
    except TimeoutError:
        proc.kill()
        pytest.fail(f"`python -m gepard_demo serve` did not start: {proc.communicate()[1][-2000:]}")
    yield f"http://127.0.0.1:{port}"
    stop_process(proc)


def _run(out: Path, url: str, *extra: str) -> int:
    return main(["run", "--engine", "server", "--server-url", url, "--set", "smoke", "--limit", "3",
                 "--max-frames", FRAMES, "--seed", "7", "--out", str(out), *extra])


def _dead_url() -> str:
    return f"http://127.0.0.1:{free_port()}"  # nothing listens there once the probe socket closed


@pytest.mark.slow
def test_served_run_equals_the_local_streaming_run(server_url, tiny_cache_dir, tmp_path):
    served = tmp_path / "served"
    assert _run(served, server_url) == 0
    rows = rows_of(served)
    assert [r["id"] for r in rows] == ["smoke-1", "smoke-2", "smoke-3"]
    for r in rows:
        assert r["seed"] == utterance_seed(7, r["id"]) and r["sample_rate"] == 22050
        assert r["frames"] > 0 and r["stop_fired"] is not None and r["p_stop"] is None  # our server's done event
        assert 0 < r["ttfa_s"] <= r["gen_s"] and r["decode_s"] == 0
        assert (served / r["wav"]).is_file()
        # only what was sent: a served row must not claim eval's own sampling defaults
        assert r["settings"]["server_urls"] == [server_url] and r["settings"]["seed"] == r["seed"]
        assert "sampling" not in r["settings"]
    cfg = json.loads((served / "config.json").read_text())["run"]
    assert cfg["engine"] == "server" and cfg["model"] == "tiny" and cfg["server_urls"] == [server_url]
    env = json.loads((served / "environment.json").read_text())["sessions"][0]["engine"]
    assert env["server_url"] == server_url and env["random_weights"] is True
    assert env["models"]["data"][0]["id"] == "tiny"

    # the same seeds through the app's streaming session on this process: the same audio
    local = tmp_path / "local"
    assert main(["run", "--engine", "local-stream", "--model", "tiny", "--model-cache", str(tiny_cache_dir),
                 "--set", "smoke", "--limit", "3", "--max-frames", FRAMES, "--seed", "7", "--out", str(local)]) == 0
    for a, b in zip(rows, rows_of(local)):
        wa, _ = sf.read(served / a["wav"])
        wb, _ = sf.read(local / b["wav"])
        assert len(wa) == len(wb) > 0 and np.max(np.abs(wa - wb)) <= 1 / 32768, a["id"]
        # the served run counts frames, stops and runaways as the local one does (the failure table's runaway)
        assert (a["frames"], a["stop_fired"], a["runaway"]) == (b["frames"], b["stop_fired"], b["runaway"]), a["id"]

    # a dead server: exit 2 naming the URL; the finished rows stay and a rerun resumes
    lines = (served / "rows.jsonl").read_text().splitlines(keepends=True)
    (served / "rows.jsonl").write_text("".join(lines[:2]))  # as if the run had stopped after two rows
    dead = _dead_url()
    assert _run(served, dead) == 2
    assert rows_of(served) == rows[:2]
    assert _run(served, server_url) == 0
    assert rows_of(served)[2]["seed"] == rows[2]["seed"]
    assert (served / "status.json").is_file()


@pytest.mark.slow
def test_served_run_with_a_reference_voice_equals_the_local_one(server_url, tiny_cache_dir, tmp_path):
    """--ref-audio through the served engine: the file goes as `ref_audio`, the served tiny
    clones with its own compressor, and the audio equals the local streaming run's with the
    same reference and seeds; rows get speaker similarity like a local run's."""
    ref = tmp_path / "me.flac"
    sf.write(ref, np.stack([voice_like(4.0, 44100, seed=3)] * 2, axis=1), 44100)  # stereo, 44.1 kHz
    served, local = tmp_path / "served", tmp_path / "local"
    assert _run(served, server_url, "--ref-audio", str(ref)) == 0
    assert main(["run", "--engine", "local-stream", "--model", "tiny", "--model-cache", str(tiny_cache_dir),
                 "--set", "smoke", "--limit", "3", "--max-frames", FRAMES, "--seed", "7", "--ref-audio", str(ref),
                 "--out", str(local)]) == 0
    plain = tmp_path / "plain"
    assert _run(plain, server_url) == 0
    for a, b, p in zip(rows_of(served), rows_of(local), rows_of(plain)):
        assert a["ref_audio"] == str(ref.resolve()) and -1 <= a["speaker_sim"] <= 1
        wa, _ = sf.read(served / a["wav"])
        wb, _ = sf.read(local / b["wav"])
        wp, _ = sf.read(plain / p["wav"])
        assert len(wa) == len(wb) > 0 and np.max(np.abs(wa - wb)) <= 1 / 32768, a["id"]
        # the served run counts frames, stops and runaways as the local one does (the failure table's runaway)
        assert (a["frames"], a["stop_fired"], a["runaway"]) == (b["frames"], b["stop_fired"], b["runaway"]), a["id"]
        assert len(wa) != len(wp) or np.max(np.abs(wa - wp)) > 1e-3, "the reference changed nothing"


@pytest.mark.slow
def test_served_run_with_guidance_equals_the_local_one(server_url, tiny_cache_dir, tmp_path):
    """--cfg-scale through the served engine goes as our cfg_scale / cfg_frames fields (the
    server says it takes them) and the audio equals the local streaming run's with the same
    guidance; unguided audio differs, so the fields were applied, not dropped."""
    guided = ("--cfg-scale", "2.5", "--cfg-frames", "6")
    served, local, plain = tmp_path / "served", tmp_path / "local", tmp_path / "plain"
    assert _run(served, server_url, *guided) == 0
    assert main(["run", "--engine", "local-stream", "--model", "tiny", "--model-cache", str(tiny_cache_dir),
                 "--set", "smoke", "--limit", "3", "--max-frames", FRAMES, "--seed", "7", *guided,
                 "--out", str(local)]) == 0
    assert _run(plain, server_url) == 0
    for a, b, p in zip(rows_of(served), rows_of(local), rows_of(plain)):
        wa, _ = sf.read(served / a["wav"])
        wb, _ = sf.read(local / b["wav"])
        wp, _ = sf.read(plain / p["wav"])
        assert len(wa) == len(wb) > 0 and np.max(np.abs(wa - wb)) <= 1 / 32768, a["id"]
        # the served run counts frames, stops and runaways as the local one does (the failure table's runaway)
        assert (a["frames"], a["stop_fired"], a["runaway"]) == (b["frames"], b["stop_fired"], b["runaway"]), a["id"]
        assert len(wa) != len(wp) or np.max(np.abs(wa - wp)) > 1e-3, "guidance changed nothing"


def test_guidance_is_refused_where_the_server_would_drop_it(tmp_path):
    """A vLLM-Omni-like server (its /v1/models entry names no guidance) would drop cfg_scale
    unread: the run is refused before any request instead of scoring unguided audio."""
    posts = []

    def vllm_like(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            posts.append(request)
        return httpx.Response(200, json={"object": "list", "data": [{"id": "tiny", "object": "model"}]})

    server = GepardServer("http://vllm.invalid", transport=httpx.MockTransport(vllm_like))
    with pytest.raises(ServerError, match="takes no guidance"):
        server.synthesize([SynthesisItem("Hello.", 1)], SamplingSettings(cfg_scale=2.0), StreamSettings())
    assert posts == []
    assert extensions_for([server], SamplingSettings()) == {}  # CFG off: nothing extra, nothing refused


def test_dead_or_silent_server_is_exit_2_naming_the_url(tmp_path, capsys):
    dead = _dead_url()
    assert _run(tmp_path / "dead", dead) == 2
    err = capsys.readouterr().err
    assert dead in err and "connection failed" in err
    assert not (tmp_path / "dead").exists()  # checked before anything is written

    with socket.socket() as silent:  # accepts connections (backlog) but never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        assert _run(tmp_path / "silent", url, "--server-timeout", "0.5") == 2
    err = capsys.readouterr().err
    assert url in err and "no answer within 0.5 s" in err


def test_settings_fixed_per_server_are_refused(server_url, tmp_path, capsys):
    assert _run(tmp_path / "t", server_url, "--temperature", "0.9", "--chunk-frames", "20") == 2
    err = capsys.readouterr().err
    assert "temperature=0.9" in err and "chunk_frames=20" in err and "fixed per server" in err
    assert _run(tmp_path / "m", server_url, "--model", "nineninesix/gepard-1.0") == 2
    assert "serves 'tiny'" in capsys.readouterr().err
    assert main(["run", "--engine", "server", "--out", str(tmp_path / "u")]) == 2
    assert "--server-url" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_server_dying_mid_run_keeps_finished_rows(tmp_path):
    """A mock transport: the first utterance arrives in odd-sized pieces (the carried byte),
    then the server is gone."""
    pcm = (np.arange(-300, 301, dtype="<i2") * 50).tobytes()
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"object": "list", "data": [{"id": "tiny", "random_weights": True}]})
        calls.append(json.loads(request.content))
        if len(calls) > 1:
            raise httpx.ConnectError("connection refused", request=request)
        # vLLM-Omni's SSE: audio deltas (odd byte counts, split inside samples), then done
        deltas = b"".join(delta_event(piece, "pcm") for piece in (pcm[:1], pcm[1:4], pcm[4:777], pcm[777:]))
        stream = deltas + sse_event("speech.audio.done", {"usage": {}})
        return httpx.Response(200, content=iter([stream[:50], stream[50:]]), headers={"content-type": "text/event-stream"})

    engine = GepardServer("http://gepard.test:9", transport=httpx.MockTransport(handler))
    cfg = RunConfig(engine="server", model="tiny", limit=3, batch_size=1, server_urls=("http://gepard.test:9",))
    with pytest.raises(ServerError, match="http://gepard.test:9"):
        run(cfg, tmp_path / "r", engine=engine, log=lambda m: None)
    rows = rows_of(tmp_path / "r")
    assert len(rows) == 1 and rows[0]["duration_s"] == 601 / 22050
    audio, sr = sf.read(tmp_path / "r" / rows[0]["wav"], dtype="int16")
    assert sr == 22050 and (audio == np.frombuffer(pcm, "<i2")).all()
    assert calls[0] == {"input": rows[0]["text"], "voice": "default", "response_format": "pcm", "stream": True,
                        "stream_format": "sse", "max_new_tokens": 1000, "seed": rows[0]["seed"]}
    # vLLM-Omni says no frames: from the audio's length (601 samples: one frame, under the budget)
    assert (rows[0]["frames"], rows[0]["stop_fired"], rows[0]["runaway"]) == (1, True, False)


def test_a_failed_request_is_a_row_and_a_full_budget_is_a_runaway(tmp_path):
    """vLLM-Omni as eval sees it: no frames in the protocol, so a stream that fills the frame
    budget is a runaway; a request the server fails (HTTP 500) is a row, and the server stays."""
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"object": "list", "data": [{"id": "tiny"}]})
        calls.append(json.loads(request.content))
        if len(calls) == 2:
            return httpx.Response(500, json={"error": {"message": "CUDA error: an illegal memory access"}})
        frames = 8 if len(calls) == 1 else 3  # the budget below is 8 frames
        pcm = (np.ones(frames * 1024, "<i2") * 100).tobytes()
        stream = delta_event(pcm, "pcm") + sse_event("speech.audio.done", {"usage": {}})
        return httpx.Response(200, content=iter([stream]), headers={"content-type": "text/event-stream"})

    engine = GepardServer("http://gepard.test:9", transport=httpx.MockTransport(handler))
    cfg = RunConfig(engine="server", model="tiny", limit=3, batch_size=1, server_urls=("http://gepard.test:9",),
                    sampling=SamplingSettings(max_frames=8))
    run(cfg, tmp_path / "r", engine=engine, log=lambda m: None)
    rows = rows_of(tmp_path / "r")
    assert len(rows) == 3 and len(calls) == 3
    assert (rows[0]["frames"], rows[0]["runaway"], rows[0]["stop_fired"]) == (8, True, False)
    assert "HTTP 500" in rows[1]["server_error"] and "illegal memory access" in rows[1]["server_error"]
    assert rows[1]["duration_s"] == 0 and rows[1]["frames"] is None
    assert (rows[2]["frames"], rows[2]["runaway"], rows[2]["stop_fired"]) == (3, False, True)
    from eval.report.summary import write_outputs

    f = write_outputs(tmp_path / "r")[1]["overall"]["failures"]
    assert (f["runaway"]["k"], f["runaway"]["ids"]) == (1, [rows[0]["id"]])
    assert (f["server_error"]["k"], f["server_error"]["ids"]) == (1, [rows[1]["id"]])
