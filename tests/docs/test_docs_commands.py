"""Every `python -m eval ...` and `python -m gepard_demo synth ...` line of README.md and
eval/README.md, run as written, in the docs' order, in a fresh folder per doc (issue 64: the docs'
commands had stopped working as written).

A command is read from the doc's ```bash blocks (continuation lines joined, comments dropped, the
`[optional]` parts left out) and run as a real process on the tiny checkpoint. What may differ from
the doc is listed here, per command, and nothing else: flags appended to scale a command of minutes
down (a smaller set, fewer points), a placeholder filled in, the files a command reads made first.
A command that cannot run offline on tiny (a server, the real weights) is listed with why. A doc
line that is in neither list fails the test, so a command added to or changed in the docs is run
(or its reason given) from then on.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

ROOT = Path(__file__).resolve().parents[2]
README, EVAL_README = ROOT / "README.md", ROOT / "eval" / "README.md"
# tiny's random stop head rarely fires, so each of its rows runs to the 1000-frame budget (20 s on a
# busy 2-core machine): its runs and sweeps get a short budget, and one sentence where a doc command
# runs a whole grid or set.
SHORT = ["--max-frames", "60"]
FAST = ["--limit", "1", *SHORT]


def doc_commands(path: Path) -> list[str]:
    """The doc's eval and synth command lines, each as one line: `.venv/bin/` and comments
    dropped, continuations joined, `[optional]` groups left out."""
    out, inside, pending = [], False, ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        if raw.startswith("```"):
            inside = not inside and raw.startswith("```bash")
            continue
        if not inside:
            continue
        line = raw.strip()
        more = line.endswith("\\")
        pending += " " + re.sub(r"(^|\s)#.*$", "", line[:-1] if more else line)
        if more:
            continue
        cmd, pending = re.sub(r"^\.venv/bin/", "", " ".join(pending.split())), ""
        if cmd.startswith(("python -m eval ", "python -m gepard_demo synth ")):
            while re.search(r"\[[^\[\]]*\]", cmd):
                cmd = re.sub(r"\s*\[[^\[\]]*\]", "", cmd)
            out.append(" ".join(cmd.split()))
    return out


def _copy(src: str, *dests: str):
    """runs/<dest> as a copy of runs/<src>: the two runs a comparison's doc line names."""
    def make(work: Path) -> None:
        for d in dests:
            shutil.rmtree(work / "runs" / d, ignore_errors=True)
            shutil.copytree(work / "runs" / src, work / "runs" / d)
    return make


def _chapter(work: Path) -> None:
    (work / "chapter.txt").write_text("The first sentence of a chapter.\n\nAnd its second one.\n", encoding="utf-8")


def _my_voice(work: Path) -> None:
    """me.wav: 4 s of a voice-like tone (the reference is 3-15 s of sound)."""
    t = np.arange(int(4.0 * 22050)) / 22050
    f0 = 140 * (1 + 0.05 * np.sin(2 * np.pi * 3 * t))
    wave = sum(np.sin(2 * np.pi * k * np.cumsum(f0) / 22050) / k for k in range(1, 6))
    sf.write(work / "me.wav", (0.3 * wave * (0.6 + 0.4 * np.sin(2 * np.pi * 4 * t) ** 2)).astype(np.float32), 22050)


# Per doc, in its order: (the command as the doc has it, flags appended, placeholders, setup, exit code).
PLANS = {
    README: [
        # Two of smoke's six rows: what the two comparisons below read needs no more.
        ("python -m eval run --set smoke --out runs/smoke --asr faster-whisper", ["--limit", "2", *SHORT], {}, None, 0),
        ("python -m eval run --set smoke --engine piper --out runs/piper --asr faster-whisper", ["--limit", "2"], {},
         None, 0),
        ('python -m gepard_demo synth "Hello there." -o out.wav --seed 1 --temperature 0.3 --stop-threshold 0.5 '
         "--max-frames 1000 --first-chunk-frames 10 --chunk-frames 86 --decode-mode exact --fade-ms 20 --silence-ms 100",
         [], {}, None, 0),
        ("python -m gepard_demo synth --text-file chapter.txt -o chapter.wav", SHORT, {}, _chapter, 0),
        ("python -m eval run --set core --out runs/core --asr faster-whisper", ["--limit", "2", *SHORT], {}, None, 0),
        ("python -m eval sweep --out runs/sweep --temperatures 0.3 0.7 --stop-thresholds 0.3 0.5 0.7 --asr faster-whisper",
         FAST, {}, None, 0),
        # The example gate on what the README makes: two tiny runs, then two Piper runs.
        ("python -m eval compare runs/base runs/new --gate eval/gates/example.yaml", [], {},
         _copy("smoke", "base", "new"), 0),
        ("python -m eval compare runs/base runs/new --gate eval/gates/example.yaml", [], {},
         _copy("piper", "base", "new"), 0),
        ('python -m gepard_demo synth "Say it in my voice." --ref-audio me.wav --cfg-scale 2.5 --cfg-frames 20 -o out.wav',
         SHORT, {}, _my_voice, 0),
        ("python -m eval sweep --out runs/cfg --ref-audio me.wav --axis cfg_scale=1,2,3", FAST, {}, None, 0),
    ],
    EVAL_README: [
        ("python -m eval sets", [], {}, None, 0),
        ("python -m eval run --model tiny --set smoke --out runs/NAME", SHORT, {}, None, 0),
        ("python -m eval run --engine piper --set core --out runs/piper", ["--limit", "3"], {}, None, 0),
        ("python -m eval run --engine files --files DIR_OR_MANIFEST --set core --out runs/other", ["--limit", "3"],
         {"DIR_OR_MANIFEST": "runs/piper/wav"}, None, 0),
        ("python -m eval score runs/NAME --asr faster-whisper --asr-model tiny.en", [], {}, None, 0),
        ("python -m eval report runs/NAME", [], {}, None, 0),
        ("python -m eval compare runs/BASE runs/NEW", [], {}, _copy("NAME", "BASE", "NEW"), 0),
        ("python -m eval listening runs/listening/NAME --new runs/BASE runs/NEW", [], {}, None, 0),
        ("python -m eval listening runs/listening/NAME", [], {}, None, 0),
        ("python -m eval sweep --out runs/sweep --temperatures 0.3 0.7 1.0 --stop-thresholds 0.3 0.5 0.7", FAST, {},
         None, 0),
        ("python -m eval stream-chart --out runs/stream",
         ["--limit", "1", "--max-frames", "30", "--chunk-sizes", "5", "43", "--lookbacks", "0", "8"], {}, None, 0),
        ("python -m eval tail-chart --out runs/tail", ["--limit", "1", "--fades-ms", "0", "10", "--silences-ms", "0"], {},
         None, 0),
    ],
}
NOT_RUN = {  # command: why it cannot run offline on the tiny checkpoint
    "python -m eval run --set smoke --model gepard-1.0 --out runs/gepard --asr faster-whisper":
        "the real weights (a download)",
    "python -m eval load http://127.0.0.1:8091 --sweep-concurrency 1,2,4 --gate eval/gates/load-example.yaml":
        "a speech server (tests/eval/load/test_load.py drives one)",
    "python -m eval load http://127.0.0.1:8091": "a speech server (tests/eval/load/test_load.py drives one)",
    "python -m eval run --engine server --server-url http://127.0.0.1:8091 --set core --out runs/served":
        "a speech server (tests/eval/engines/test_served.py drives one)",
}


@pytest.mark.parametrize("doc", [README, EVAL_README], ids=["README", "eval-README"])
def test_every_doc_command_is_run_or_says_why_not(doc):
    planned = {cmd for cmd, *_ in PLANS[doc]}
    found = doc_commands(doc)
    assert found, f"no command read from {doc}"
    assert [c for c in found if c not in planned and c not in NOT_RUN] == []
    assert planned <= set(found)  # a plan for a command the doc no longer has is stale


@pytest.mark.slow
@pytest.mark.parametrize("doc", [README, EVAL_README], ids=["README", "eval-README"])
def test_the_docs_commands_work_as_written(doc, tmp_path, tiny_cache_dir):
    (tmp_path / "eval").symlink_to(ROOT / "eval")  # the gate files, at the paths the docs give
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GEPARD_CACHE_DIR": str(tiny_cache_dir), "GEPARD_MODEL": "tiny"}
    for cmd, more, fill, setup, code in PLANS[doc]:
        if setup:
            setup(tmp_path)
        args = [fill.get(a, a) for a in shlex.split(cmd)[1:]] + more
        proc = subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == code, f"{cmd} {' '.join(more)}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
        if "gepard_demo synth" in cmd:  # the line is a summary: no per-frame arrays
            line = proc.stdout.strip().splitlines()[-1]
            assert len(line) < 2000 and "nll" not in json.loads(line)
