"""`python -m eval load`: requests as `vllm bench serve --omni` sends them, its figures under its
names, against a real server in this process (uvicorn on a thread) and a stand-in for vLLM-Omni;
Ctrl-C in a real second process. The continuity figure is checked against the wheel's own code."""

from __future__ import annotations

import faulthandler
import json
import math
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from tests.support.app_fixtures import serve_in_thread, tiny_codec  # noqa: F401  (tiny_codec: fixture)
from tests.support.hold_fixtures import ENDLESS_TEXT, endless_text_patch, wait_until, within
from tests.support.processes import interruptible
from tests.support.vllm_omni_reference import bench_names, continuity_stats

from eval.cli import main
from eval.jsonio import read_jsonl
from eval.load.metrics import RequestRow, continuity, parse_goodput, summarize
from eval.load.runner import LoadConfig
from gepard_demo.settings import StreamSettings
from gepard_demo.host_settings import BatchingSettings
from gepard_demo.units import SAMPLE_RATE, SAMPLES_PER_FRAME

ROOT = Path(__file__).resolve().parents[3]
FIXED = StreamSettings(first_chunk_frames=4, chunk_frames=8, chunk_schedule="fixed")
FRAMES = 24
STEP_S = 0.02  # the served batch's wait a step: chunks 160 ms apart, each its own read on a slow host too


def test_continuity_is_the_wheels_on_the_same_arrivals():
    wheel = continuity_stats()
    rng = np.random.default_rng(7)
    cases = [([], []), ([0.3], [4410]), ([0.2, 0.2, 0.9], [100, 3, 44100]), ([0.0, 1.0], [44100, 1])]
    for _ in range(300):
        n = int(rng.integers(1, 12))
        arrivals = np.cumsum(rng.exponential(0.3, n)).tolist()
        cases.append((arrivals, rng.integers(1, 60_000, n).tolist()))
    for arrivals, sizes in cases:
        for rate in (22050, 24000):
            ours, theirs = continuity(arrivals, sizes, rate), wheel(arrivals, sizes, rate)
            assert (ours.max_underrun_s, ours.underrun_event_count, ours.is_continuous) == \
                (theirs.max_underrun_s, theirs.underrun_event_count, theirs.is_continuous)


def _row(i: int, arrivals: list[float], sizes: list[int], e2el: float, start: float = 0.0) -> RequestRow:
    row = RequestRow(index=i, text="t", server="s", start_time=start, chunk_arrivals=arrivals, chunk_bytes=sizes)
    return row.finish(e2el, 22050)


def test_each_figure_has_the_benchs_name_and_definition():
    names = bench_names()
    rows = [_row(0, [0.2, 0.5], [22050, 22050], 0.6),  # 1 s of audio; the player waits 0 at 0.5 s
            _row(1, [0.4, 1.5], [4410, 44100], 1.6, start=0.1),  # 0.1 s of audio, then 1.0 s starved
            RequestRow(index=2, text="t", server="s", start_time=0.2, error="HTTP 500: boom")]
    s = summarize(rows, duration_s=2.0, goodput=parse_goodput(["audio_ttfp:300", "e2el:5000"]))
    for const in ("MEAN_AUDIO_TTFP_MS", "MEDIAN_AUDIO_TTFP_MS", "STD_AUDIO_TTFP_MS", "TOTAL_AUDIO_DURATION_S",
                  "TOTAL_AUDIO_FRAMES", "AUDIO_THROUGHPUT", "MEAN_AUDIO_RTF", "MEDIAN_AUDIO_RTF",
                  "MEAN_AUDIO_DURATION_S", "MEDIAN_AUDIO_UNDERRUN_S", "AUDIO_CONTINUITY_OK_RATE"):
        assert names[const] in s, const
    assert rows[0].audio_duration == 1.0 and rows[0].audio_ttfp == 0.2 and rows[0].audio_rtf == 0.6
    assert rows[1].audio_frames == (4410 + 44100) // 2 and math.isclose(rows[1].audio_underrun, 1.0)
    assert (s["completed"], s["failed"], s["failed_reasons"]) == (2, 1, {"HTTP 500: boom": 1})
    assert s["median_audio_ttfp_ms"] == pytest.approx(300.0) and s["p99_audio_ttfp_ms"] == pytest.approx(398.0)
    assert s["audio_throughput"] == pytest.approx((1.0 + 24255 / 22050) / 2.0)
    assert s["audio_continuity_ok_rate"] == 0.5 and s["request_goodput"] == 0.5  # only row 0 within 300 ms
    assert s["max_concurrent_requests"] == 2


@pytest.fixture(scope="module")
def served(tiny_engine, tiny_codec):  # noqa: F811
    from gepard_demo.model.batch import DecodeBatch
    from gepard_demo.serving.server import build_speech_app

    # A wait at each batch step, so the chunks reach the client apart at any host speed; a stop
    # head far from firing: every request runs its whole budget.
    sample = DecodeBatch.sample

    def slow_sample(self):
        time.sleep(STEP_S)
        return sample(self)

    DecodeBatch.sample = slow_sample
    app = build_speech_app(tiny_engine, tiny_codec, tiny_engine.default_sampling().replace(stop_threshold=0.99),
                           FIXED, batching=BatchingSettings(max_batch=4, admission="cap"))
    try:
        with serve_in_thread(app, "load-target") as port:
            yield f"http://127.0.0.1:{port}", app.state.scheduler
    finally:
        DecodeBatch.sample = sample


def _load(url: str, out: Path, *flags: str) -> int:
    return main(["load", url, "--out", str(out), "--set", "smoke", "--num-warmups", "0", *flags])


def test_a_sweep_measures_what_the_server_sent_and_writes_the_benchs_folder(served, tmp_path, capsys):
    url, _ = served
    out = tmp_path / "sweep"
    rc = _load(url, out, "--sweep-concurrency", "1,2", "--num-prompts", "3",
               "--extra-body", json.dumps({"max_new_tokens": FRAMES}), "--goodput", "audio_ttfp:600000")
    assert rc == 0, capsys.readouterr().err
    rows = read_jsonl(out / "rows.jsonl")
    assert sorted((r["point"], r["index"]) for r in rows) == [(f"concurrency {c}", i) for c in (1, 2) for i in range(3)]
    for r in rows:
        # The instrument: every chunk the server cut arrives as its own read, first the first chunk.
        assert r["success"] and r["sample_rate"] == SAMPLE_RATE
        assert r["chunk_bytes"][0] == 2 * FIXED.first_chunk_frames * SAMPLES_PER_FRAME
        assert len(r["chunk_bytes"]) >= 1 + (FRAMES - FIXED.first_chunk_frames) // FIXED.chunk_frames
        assert r["chunk_arrivals"] == sorted(r["chunk_arrivals"]) and r["audio_ttfp"] == r["chunk_arrivals"][0]
        assert r["audio_bytes"] >= 2 * FRAMES * SAMPLES_PER_FRAME
        assert r["audio_duration"] == r["audio_bytes"] // 2 / SAMPLE_RATE
    point = json.loads((out / "points" / "concurrency-2.json").read_text())
    assert point["max_concurrency"] == 2 and point["backend"] == "openai-audio-speech" and point["sample_rate"] == [SAMPLE_RATE]
    assert point["completed"] == 3 and point["request_goodput"] > 0 and point["max_concurrent_requests"] == 2
    report = (out / "report.md").read_text()
    assert "| concurrency 1 | 3 / 0 |" in report and "| concurrency 2 | 3 / 0 |" in report
    assert (out / "knee.png").stat().st_size > 10_000 and (out / "knee.csv").is_file()


def test_a_gate_names_each_breach_and_exits_1(served, tmp_path, capsys):
    url, _ = served
    gate = tmp_path / "gate.yaml"
    gate.write_text('"concurrency 1":\n  p95_audio_ttfp_ms: "<= 0.001"\n"*":\n  failed: "<= 0"\n')
    rc = _load(url, tmp_path / "gated", "--num-prompts", "2", "--gate", str(gate),
               "--extra-body", json.dumps({"max_new_tokens": 8}))
    err = capsys.readouterr().err
    assert rc == 1 and "gate: concurrency 1: p95_audio_ttfp_ms = " in err and "failed" not in err.split("gate:")[-1]
    assert "p95_audio_ttfp_ms" in (tmp_path / "gated" / "report.md").read_text()


@pytest.mark.parametrize("flags, gate, says", [
    (["--max-concurrency", "0"], None, "--max-concurrency: must be at least 1"),
    (["--request-rate", "0"], None, "--request-rate: must be > 0"),
    (["--extra-body", "[1]"], None, "--extra-body: '[1]' is not a JSON object"),
    (["--extra-body", '{"bogus": 1}'], None, "refuses the run's request (HTTP 400)"),
    (["--goodput", "ttfp:10"], None, "--goodput: 'ttfp:10' is not KEY:MILLISECONDS"),
    ([], {"*": {"p95_ttft_ms": "<= 1"}}, "unknown figure 'p95_ttft_ms'"),
    ([], {"concurrency 4": {"failed": "<= 0"}}, "names point 'concurrency 4', which this run does not measure"),
    ([], {"*": {"failed": "< 1"}}, "bound must be \"<= N\" or \">= N\""),
])
def test_bad_input_is_refused_before_a_measured_request(served, tmp_path, capsys, flags, gate, says):
    url, _ = served
    if gate is not None:
        (tmp_path / "gate.yaml").write_text(json.dumps(gate))
        flags = [*flags, "--gate", str(tmp_path / "gate.yaml")]
    rc = _load(url, tmp_path / "bad", *flags)
    assert rc == 2 and says in capsys.readouterr().err
    assert not (tmp_path / "bad" / "rows.jsonl").exists()


def test_a_dead_port_and_a_server_that_is_not_a_speech_server(served, tmp_path, capsys):
    from tests.support.app_fixtures import free_port

    assert _load(f"http://127.0.0.1:{free_port()}", tmp_path / "dead") == 2
    assert "no speech server at http://127.0.0.1:" in capsys.readouterr().err
    url, _ = served
    assert _load(url + "/elsewhere", tmp_path / "elsewhere") == 2
    assert "is not a speech server: GET /v1/models answered 404" in capsys.readouterr().err


@pytest.fixture(scope="module")
def vllm_omni_like():
    """A stand-in for vLLM-Omni: its /v1/models entry lists no extension; it speaks 24 kHz PCM
    and says the rate only in a WAV header; a streamed request with seed 500 is answered 500."""
    import io

    import soundfile as sf
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    async def models(request):
        return JSONResponse({"object": "list", "data": [{"id": "nineninesix/gepard-1.0", "object": "model"}]})

    async def speech(request):
        body = await request.json()
        pcm = np.zeros(12_000, dtype=np.int16)
        if not body.get("stream"):
            buf = io.BytesIO()
            sf.write(buf, pcm, 24_000, format="WAV", subtype="PCM_16")
            return Response(buf.getvalue(), media_type="audio/wav")
        if body.get("seed") == 500:
            return JSONResponse({"error": {"message": "engine died"}}, status_code=500)
        return StreamingResponse(iter([pcm[:6000].tobytes(), pcm[6000:].tobytes()]), media_type="audio/pcm")

    app = Starlette(routes=[Route("/v1/models", models), Route("/v1/audio/speech", speech, methods=["POST"])])
    with serve_in_thread(app, "vllm-omni-like") as port:
        yield f"http://127.0.0.1:{port}"


def test_vllm_omni_rate_is_read_not_assumed_and_its_unlisted_fields_are_refused(vllm_omni_like, tmp_path, capsys):
    assert _load(vllm_omni_like, tmp_path / "a", "--num-prompts", "2") == 0
    rows = read_jsonl(tmp_path / "a" / "rows.jsonl")
    assert {(r["sample_rate"], r["audio_duration"]) for r in rows} == {(24_000, 0.5)}
    rc = _load(vllm_omni_like, tmp_path / "b", "--extra-body", json.dumps({"repetition_penalty": 1.2}))
    assert rc == 2 and "--extra-body repetition_penalty: the server at" in capsys.readouterr().err


def test_a_run_where_every_request_failed_exits_2_with_the_reasons(vllm_omni_like, tmp_path, capsys):
    rc = _load(vllm_omni_like, tmp_path / "c", "--num-prompts", "3", "--extra-body", json.dumps({"seed": 500}))
    assert rc == 2 and "no request completed" in capsys.readouterr().err
    assert "| concurrency 1 | HTTP 500: engine died | 3 |" in (tmp_path / "c" / "report.md").read_text()


def test_the_open_loop_releases_requests_at_the_benchs_gamma_intervals(vllm_omni_like, tmp_path):
    rc = _load(vllm_omni_like, tmp_path / "r", "--num-prompts", "6", "--request-rate", "20", "--burstiness", "0.5")
    assert rc == 0
    starts = sorted(r["start_time"] for r in read_jsonl(tmp_path / "r" / "rows.jsonl"))
    rng = np.random.default_rng(0)  # --seed 0: the run's intervals, drawn as the bench draws them
    due = np.concatenate([[0.0], np.cumsum([rng.gamma(0.5, 1.0 / (20 * 0.5)) for _ in range(5)])])
    assert all(s >= d - 1e-3 for s, d in zip(starts, due))  # never released before its time
    assert LoadConfig(urls=("u",), texts=("t",), request_rate=20, max_concurrency=None).label == "rate 20"


def _hang_report(proc: subprocess.Popen, scheduler) -> str:
    """What a hang-up that never came left behind, so a rare hang says which side held on: whether
    the eval process exited, its signal state (ignored, blocked, caught, pending: /proc) and its
    threads' stacks (eval's SIGUSR1 handler) and output, and the threads of this process (the
    server's, the scheduler's)."""
    exited = proc.poll()
    signals = ""
    if exited is None:
        for task in sorted(Path(f"/proc/{proc.pid}/task").iterdir()):
            lines = (task / "status").read_text().splitlines()
            signals += f"thread {task.name}: " + " ".join(x.replace("\t", "") for x in lines
                                                          if x.startswith(("Name", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt"))) + "\n"
        proc.send_signal(signal.SIGUSR1)
        time.sleep(1.0)
        proc.kill()
    _, err = proc.communicate()
    with tempfile.TemporaryFile("w+") as f:
        faulthandler.dump_traceback(f, all_threads=True)
        f.seek(0)
        here = f.read()
    child = f"exited with {exited}" if exited is not None else "was still running"
    message = (f"the server still holds the request {scheduler.load()} after Ctrl-C; the eval process {child}\n"
               f"{signals}--- its stderr ---\n{err[-8000:]}\n--- this process's threads ---\n{here[-12000:]}")
    return message


def test_ctrl_c_keeps_the_finished_rows_and_hangs_up_on_the_rest(served, tiny_engine, tmp_path):
    """A real second process; its second request never ends (endless_text_patch on the server)."""
    url, scheduler = served
    texts = tmp_path / "texts.txt"
    texts.write_text(f"A short sentence.\n{ENDLESS_TEXT}, whatever is asked.\n")
    out = tmp_path / "cut"
    undo = endless_text_patch(tiny_engine.tokenizer)
    try:
        proc = interruptible([sys.executable, "-m", "eval", "load", url, "--out", str(out), "--set", str(texts),
                                 "--num-warmups", "0", "--num-prompts", "2", "--max-concurrency", "2",
                                 "--extra-body", json.dumps({"max_new_tokens": 8})],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_until(lambda: len(read_jsonl(out / "rows.jsonl")) == 1 and scheduler.load()["running"] == 1,
                   seconds=120, what="the short request done, the endless one running")
        proc.send_signal(signal.SIGINT)
        try:
            within(lambda: scheduler.load()["running"] == 0 and scheduler.load()["waiting"] == 0)
        except AssertionError:
            raise AssertionError(_hang_report(proc, scheduler)) from None
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        undo()
    assert proc.returncode == 130, stderr
    assert "Interrupted after" in stderr and "1 finished requests kept" in stderr
    report = (out / "report.md").read_text()
    assert "Interrupted" in report and "| concurrency 2 | 1 / 0 |" in report
    assert [r["index"] for r in read_jsonl(out / "rows.jsonl")] == [0]


def test_the_eval_tab_runs_the_same_load_and_refuses_bad_input_naming_it(served, tmp_path):
    from eval.load.client import LoadError
    from eval.load.gate import LoadGate
    from eval.ui.load_section import load_in_tab

    url, _ = served
    text, chart, folder = load_in_tab(tmp_path, url + "/", "1, 2", 2, 8, set_name="smoke")
    assert "| concurrency 1 | 2 / 0 |" in text and "| concurrency 2 | 2 / 0 |" in text
    assert chart and Path(chart).is_file() and Path(folder).parent == tmp_path / "load"
    for args, says in [(("ftp://x", "1", 2, 8), "server URL"), ((url, "1,x", 2, 8), "concurrency"),
                       ((url, "1", 0, 8), "requests a point"), ((url, "0", 2, 8), "concurrency: name one or more, each at least 1")]:
        with pytest.raises(LoadError, match=says):
            load_in_tab(tmp_path, *args, set_name="smoke")
    LoadGate.load(ROOT / "eval" / "gates" / "load-example.yaml", (50.0, 95.0, 99.0))  # the example is a valid gate
