"""The type checker holds the seams: a class whose method differs from its Protocol's fails
`make typecheck` (mypy.ini). Checked on the real tree with one module shadowed by
an edited copy (mypy's --shadow-file), so nothing in the checkout changes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # one mypy run over the project (a minute and a half without its cache)


@pytest.mark.parametrize("module,before,after,seam", [
    ("gepard_demo/ui/hosts/served.py", "def new_session(self, request: SessionRequest) -> ServedSession:",
     "def new_session(self, request: SessionRequest, *, warm: bool) -> ServedSession:",
     "def new_session(self, request: SessionRequest)"),  # a PageHost subclass: the override itself is refused
    ("gepard_demo/streaming/session.py", "    def wait_line(self) -> str | None:",
     "    def wait_line(self, why: str) -> str | None:", "_SynthesisSession_is_a_Session"),
], ids=["host", "session"])
def test_a_class_whose_method_differs_from_its_protocol_fails_the_type_check(tmp_path, module, before, after, seam):
    source = (ROOT / module).read_text()
    assert before in source, f"{module} no longer has {before!r}: update this test"
    shadow = tmp_path / Path(module).name
    shadow.write_text(source.replace(before, after))
    run = subprocess.run([sys.executable, "-m", "mypy", "--shadow-file", module, str(shadow)], cwd=ROOT,
                         capture_output=True, text=True)
    lines = [line for line in run.stdout.splitlines() if line.startswith(module) and "error:" in line]
    seam_line = next(n for n, text in enumerate(source.splitlines(), 1) if seam in text)
    assert any(line.startswith(f"{module}:{seam_line}:") for line in lines), run.stdout[-3000:]
