"""Every `curl` line of README.md and docs/DEPLOY.md, run as written, in the docs' order, against one
real `python -m gepard_demo serve` process started from README's own serve line (issue 64: the docs'
commands had stopped working as written, and nothing ran these).

A line is read from a ```bash block, continuations joined; only its port is changed. Its comment says
what it returns and is the check: a JSON shape (`{"success": true, "message": ...}`: the same keys,
the literals equal, `...` any value, `[...]` any list, `{...}` any object), a WAV file where it writes
`-o FILE`, SSE events where it says so; a line whose comment names none of these fails, so a new
line says what it gives. `curl -s` exits 0 on a 400 too, so the output is what proves a line works.
README's voice-cloning lines are run by tests/docs/test_readme_cloning.py (a body made by a `python3 -c`
line first); every other curl line of the two docs is run here.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import soundfile as sf
from tests.support.processes import start_server, stop_process
from tests.docs.test_readme_cloning import readme_commands
from tests.support.sound import voice_like, wav_bytes

ROOT = Path(__file__).resolve().parents[2]
README, DEPLOY = ROOT / "README.md", ROOT / "docs" / "DEPLOY.md"
DOC_HOST = "localhost:8091"
SERVE = ".venv/bin/python -m gepard_demo serve "


def bash_lines(path: Path) -> list[str]:
    """Each line of the doc's ```bash blocks, continuation lines joined, comments kept."""
    blocks = re.findall(r"^```bash\n(.*?)^```", path.read_text(encoding="utf-8"), re.S | re.M)
    return [line.strip() for block in blocks for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def curl_lines(path: Path) -> list[tuple[str, str]]:
    """(command, what its comment says it returns) for each curl line that no other test runs."""
    cloning = set(readme_commands()) if path == README else set()
    out = []
    for line in bash_lines(path):
        if line.startswith("curl ") and line not in cloning:
            command, _, comment = line.partition(" # ")  # bash's comment: a # after a space
            out.append((" ".join(command.split()), comment.strip()))
    return out


def shape_of(comment: str):
    """A comment's JSON shape as a value: `[...]` any list, `{...}` any object, `...` anything (None)."""
    text = comment.replace("[...]", "[]").replace("{...}", "{}").replace("...", "null")
    return json.loads(text)


def matches(shape, value) -> bool:
    if shape is None:
        return True
    if isinstance(shape, dict):
        return isinstance(value, dict) and (not shape or (set(shape) == set(value)
                                                          and all(matches(shape[k], value[k]) for k in shape)))
    if isinstance(shape, list):
        return isinstance(value, list) and all(matches(s, v) for s, v in zip(shape, value))
    return shape == value and type(shape) is type(value)


def sse_events(text: str) -> list[dict]:
    """The `data:` of each SSE event, its `event:` line checked against its type."""
    events = []
    for block in filter(None, text.strip().split("\n\n")):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        assert set(fields) == {"event", "data"}, ("not an SSE event", block[:300])
        data = json.loads(fields["data"])
        assert fields["event"] == data["type"], block[:300]
        events.append(data)
    return events


def check_output(command: str, comment: str, stdout: str, cwd: Path) -> None:
    """What the line's comment says it returns, checked; a comment that says nothing checkable fails."""
    written = re.search(r"\s-o\s+(\S+)", command)
    if comment.startswith("{"):
        assert matches(shape_of(comment), json.loads(stdout)), (command, comment, stdout[:500])
    elif written:
        wav = cwd / written.group(1)
        assert wav.read_bytes()[:4] == b"RIFF", (command, wav.read_bytes()[:300])  # not an error body
        assert sf.info(str(wav)).frames > 0 and not stdout, command
    elif "SSE" in comment:
        events = sse_events(stdout)
        assert [e["type"] for e in events[:-1]] == ["speech.audio.delta"] * (len(events) - 1), command
        assert events and events[-1]["type"] == "speech.audio.done", (command, stdout[-500:])
        assert sum(len(base64.b64decode(e["audio"])) for e in events[:-1]) > 0, command
    else:
        pytest.fail(f"{command!r}: its comment {comment!r} says neither a JSON shape, a file (-o) nor SSE")


@pytest.fixture(scope="module")
def port(tiny_cache_dir, tmp_path_factory):
    """README's serve line as written (port aside), on a tiny cache and a saved-voices folder of its own."""
    serve = [line for line in bash_lines(README) if line.startswith(SERVE)]
    assert len(serve) == 1, serve
    argv = serve[0].split()[1:]
    voices = tmp_path_factory.mktemp("voices")

    def command(p: int) -> list[str]:
        given = [str(p) if a == DOC_HOST.split(":")[1] else a for a in argv]
        return [sys.executable, *given, "--cache-dir", str(tiny_cache_dir), "--voices-dir", str(voices),
                "--log-level", "warning"]

    proc, url = start_server(command, cwd=ROOT)
    try:
        yield int(url.rsplit(":", 1)[1])
    finally:
        stop_process(proc)


def test_every_curl_line_is_read():
    """README's Serving lines and DEPLOY's saved-voice lines, each with the comment that is its check."""
    readme, deploy = curl_lines(README), curl_lines(DEPLOY)
    assert len(readme) >= 2 and len(deploy) >= 4, (readme, deploy)
    assert all(DOC_HOST in command and comment for command, comment in readme + deploy), readme + deploy
    assert any("-F audio_sample=@me.wav" in c for c, _ in deploy) and any("-X DELETE" in c for c, _ in deploy)


@pytest.mark.skipif(shutil.which("curl") is None, reason="the docs' commands need curl")
def test_the_docs_curl_lines_work_as_written(port, tmp_path):
    (tmp_path / "me.wav").write_bytes(wav_bytes(voice_like(5.0, seed=7)))  # the clip DEPLOY's upload names
    for command, comment in curl_lines(README) + curl_lines(DEPLOY):
        for old in tmp_path.glob("out.*"):
            old.unlink()
        run = subprocess.run(["bash", "-c", command.replace(DOC_HOST, f"localhost:{port}")], cwd=tmp_path,
                             capture_output=True, text=True, errors="replace", timeout=300)
        assert run.returncode == 0 and not run.stderr, (command, run.returncode, run.stderr)
        check_output(command, comment, run.stdout, tmp_path)
