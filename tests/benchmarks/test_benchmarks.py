"""Every script in benchmarks/ still runs: each one's --quick (benchmarks/quick.py), end to end, as
a real process from the repo root. Nothing else runs them, and a benchmark that rots fails only
when someone next measures with it (zerogpu_spaces.py's positional /generate arguments did).
The scripts of the prepared GPU command (benchmarks/gpu_check.sh) run once, through its --dry-run,
which passes each its --quick: that proves the command and them together.

A new script is picked up by the glob; the tables below only say where a known one's files go and
what its finished run prints. No timing is checked: a quick run's figures mean nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.processes import spawn, stop_process

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
HELPER = "quick.py"  # the flag's one home, not a benchmark
SCRIPTS = sorted(p for p in (ROOT / "benchmarks").glob("*.py") if p.name != HELPER)
GPU_CHECK = ROOT / "benchmarks" / "gpu_check.sh"
# gpu_check.sh's sections, in its order: (section, script); the dry run runs these scripts' --quick.
SECTIONS = [("timeline", "stream_timeline"), ("gpu_smoke", "gpu_smoke"), ("load_knee", "load_knee")]
BY_GPU_CHECK = {script for _, script in SECTIONS}
HANG_S = 300  # catches a hang; a quick run takes seconds (under a minute with a browser or a server)

# Beyond --quick: tiny's cache (the session's) where a script takes it as a flag (the others that
# read GEPARD_CACHE_DIR get it from the environment), and its files in tmp, never the repo.
EXTRA = {
    "busy_page": ["--cache-dir", "{cache}"],
    "compare_speed": ["--work", "{tmp}/work"],
    "concurrency": ["--cache-dir", "{cache}"],
    "first_audio_normalized": ["--cache-dir", "{cache}"],
    "demo_latency": ["--cache-dir", "{cache}", "--out", "{tmp}/demo_latency.json"],
    "eval_fanout": ["--model-cache", "{cache}", "--out", "{tmp}/out"],
    "eval_throughput": ["--model-cache", "{cache}", "--out", "{tmp}/out"],
    "gpu_smoke": ["--device", "cpu", "--json", "{tmp}/gpu_smoke.json"],
    "hangup_lag": ["--cache-dir", "{cache}"],
    "load_knee": ["--out", "{tmp}/out"],
    "long_text": ["--cache-dir", "{cache}", "--out", "{tmp}/long_text.json"],
    "sweep_cost": ["--model-cache", "{cache}", "--out", "{tmp}/out"],
    "zerogpu_spaces": ["--cache-dir", "{cache}"],
}
# What each prints once it has measured everything (its last table's row, its JSON's verdict).
PRINTS = {
    "alignment_cost": "| edge error, start at the first sample |",
    "busy_page": '"answered": 8,',
    "cloning_cfg": "| whole prefix |",
    "codec_stream": "exact stream / whole decode =",
    "compare_speed": "exit code 1 (1: the cut WAVs breach the gate",
    "concurrency": '"pooled_vs_solo_max_pcm16_lsb"',
    "cpu_levers": "| one layer, 2 threads |",
    "cpu_realtime": "## 5. End to end",
    "decode_loops": "| greedy batch8, 8 frames: rows equal, first parting, max dp_stop | 8/8, None,",
    "demo_latency": "click-to-sound ",
    "eval_fanout": '"same_audio_as_1_server": true',
    "eval_throughput": '"f0_median_abs_diff_hz_swift_vs_pyin"',
    "first_audio_normalized": "| rules | ",
    "gpu_smoke": "| greedy batch8, 43 frames: rows equal, first parting, max dp_stop | 8/8, None,",
    "guardrail_cost": " both ",
    "hangup_lag": '"mode": "emulate"',
    "load_knee": "| tiny | realtime | ramp | 2 |",
    "long_text": "ahead / one after another, effective RTF",
    "padded_attention": '"padded_sdpa_vs_ours"',
    "server_hangup": "this checkout's worst:",
    "session_overhead": "| graphed, server ramp 10..86 |",
    "speech_stream": '"50 words/s"',
    "stream_timeline": "ops launched per audio second:",
    "sweep_cost": "rows identical (frames, stop, runaway, p_stop): yes",
    "talker_step": "hybrid padded step: layout check",
    "text_normalization": "| ours: nemo (rules + NeMo on windows) |",
    "voice_uploads": "the listing's JSON:",
    "zerogpu_asks": '"rows": [',
    "zerogpu_spaces": '"ok": true',
}


def marks(script: Path) -> list:
    # A script that drives Chromium is a browser test, as the app's are (pytest.ini).
    return [pytest.mark.browser] if "playwright" in script.read_text(encoding="utf-8") else []


def test_there_are_benchmarks_and_each_takes_quick():
    assert SCRIPTS
    lacking = [p.name for p in SCRIPTS if "add_quick(" not in p.read_text(encoding="utf-8")]
    assert not lacking, f"declare --quick through benchmarks/quick.py's add_quick: {lacking}"
    check = GPU_CHECK.read_text(encoding="utf-8")
    assert all(f"section {name} " in check and f"benchmarks/{script}.py" in check for name, script in SECTIONS)


def run(cmd: list[str], env: dict) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of cmd from the repo root. Past HANG_S it gets Ctrl-C first,
    so that its own `finally` stops the servers it started, then SIGKILL; either way a failure."""
    proc = spawn(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            stop_process(proc)
            out, err = proc.communicate()
        pytest.fail(f"{cmd[1]} still ran after {HANG_S} s\n{out[-2000:]}\n{err[-3000:]}")
    return proc.returncode, out, err


@pytest.mark.parametrize("script", [pytest.param(p, id=p.stem, marks=marks(p)) for p in SCRIPTS
                                    if p.stem not in BY_GPU_CHECK])
def test_quick_run(script, tiny_cache_dir, tmp_path):
    extra = [a.format(cache=tiny_cache_dir, tmp=tmp_path) for a in EXTRA.get(script.stem, [])]
    env = {**os.environ, "GEPARD_CACHE_DIR": str(tiny_cache_dir), "HF_HUB_OFFLINE": "1"}
    # -X faulthandler: a native crash (a signal, not an exit code) prints each thread's Python stack.
    code, out, err = run([sys.executable, "-X", "faulthandler", str(script), "--quick", *extra], env)
    tail = f"\n--- stdout ---\n{out[-3000:]}\n--- stderr ---\n{err[-5000:]}"
    assert code == 0, f"{script.name} --quick exited {code}{tail}"
    assert out.strip() and PRINTS.get(script.stem, "") in out, f"{script.name} did not print its result{tail}"


def test_the_gpu_check_dry_run_runs_every_section(tmp_path):
    """bash benchmarks/gpu_check.sh --dry-run: each section on the CPU at tiny shapes, its files in $OUT."""
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable, "HF_HUB_OFFLINE": "1"}
    proc = spawn(["bash", str(GPU_CHECK), "--dry-run"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                 stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=3 * HANG_S)
    except subprocess.TimeoutExpired:
        stop_process(proc)
        out, err = proc.communicate()
        pytest.fail(f"gpu_check.sh --dry-run still ran after {3 * HANG_S} s\n{out[-3000:]}")
    assert proc.returncode == 0, err[-2000:]
    sections = (tmp_path / "sections.txt").read_text().split("\n")
    assert sections[:3] == [f"{name} 0" for name, _ in SECTIONS], out[-3000:]
    for name, script in SECTIONS:
        assert PRINTS[script] in (tmp_path / f"{name}.log").read_text(), f"{script}.py did not print its result"
    timeline = json.loads((tmp_path / "timeline" / "timeline.json").read_text())
    assert timeline["device"] == "cpu" and timeline["rows"] and "ops launched" in (tmp_path / "timeline" / "timeline.md").read_text()
    assert (tmp_path / "load-knee").is_dir()
    # gpu_smoke.py, what a GPU machine runs first, on the CPU: the picked precision passes the guard,
    # both loops make the same greedy frames (fp32 and the pick; solo and a padded batch of 8), the
    # fixed-shape step launches fewer ops, and the codec on the "device" is the CPU's.
    r = json.loads((tmp_path / "gpu_smoke.json").read_text())
    assert r["precision"] == "bf16" and r["guard"]["passes"] and r["codec_snr_db"] == float("inf")
    assert {k: (s["frames"], s["rtf"] > 0) for k, s in r["stream"].items()} == {"growing": (43, True), "fixed": (43, True)}
    for equal in (r["equality_fp32"], r["loops"]["equality"]):
        assert (equal["solo"]["rows_equal"], equal["batch8"]["rows_equal"]) == ("1/1", "8/8")
    assert r["loops"]["ops_per_step"]["fixed"]["launched_by_host"] < r["loops"]["ops_per_step"]["growing"]["launched_by_host"]
    assert set(r["precisions"]) == {"fp32", "tf32", "low", "pick"}
    assert set(r["memory"]) == {"1x100", "16x30"} and "guard vs fp32" in (tmp_path / "gpu_smoke.log").read_text()
