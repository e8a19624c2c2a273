"""The type checker `make test` runs: mypy over gepard_demo/ and eval/ as mypy.ini says (strict on
the request types and the seams' Protocols, each class a seam names held to its Protocol).

It fails on any error that is not recorded debt. The debt (.ci/mypy-debt.txt) is what the code
written before the checker ran still has, one line per error as "path: message [code]" (no line
numbers, so an edit elsewhere in a file does not move it). It may only shrink: a new error fails,
and so does a fixed one still listed (rerun with --update to drop it; --update never adds).

    .venv/bin/python .ci/typecheck.py [--update]
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEBT = ROOT / ".ci" / "mypy-debt.txt"
ERROR = re.compile(r"^(?P<path>[^:]+):\d+(?::\d+)?: error: (?P<what>.*)$")


def errors(output: str) -> Counter[str]:
    found: Counter[str] = Counter()
    for line in output.splitlines():
        if m := ERROR.match(line):
            found[f"{m['path']}: {m['what'].strip()}"] += 1
    return found


def main(argv: list[str]) -> int:
    run = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    if run.returncode not in (0, 1):  # 2: mypy itself failed (a config or syntax error)
        print(run.stdout + run.stderr, file=sys.stderr)
        return 2
    now = errors(run.stdout)
    debt = errors_in(DEBT)
    new, fixed = now - debt, debt - now
    if "--update" in argv:
        kept = debt - fixed
        DEBT.write_text("".join(f"{e}\n" for e in sorted(kept.elements())))
        print(f"typecheck: debt {sum(debt.values())} -> {sum(kept.values())} errors")
        fixed = Counter()
    for line in run.stdout.splitlines():
        if (m := ERROR.match(line)) and f"{m['path']}: {m['what'].strip()}" in new:
            print(line)
    if fixed:
        print(f"typecheck: {sum(fixed.values())} recorded errors are fixed: drop them (.ci/typecheck.py --update)")
        for e in sorted(fixed):
            print(f"  fixed: {e}")
    print(f"typecheck: {sum(new.values())} new errors; {sum(now.values())} in all, "
          f"{sum((now - new).values())} of them recorded debt (.ci/mypy-debt.txt)")
    return 1 if new or fixed else 0


def errors_in(path: Path) -> Counter[str]:
    return Counter(line for line in path.read_text().splitlines() if line.strip()) if path.exists() else Counter()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
