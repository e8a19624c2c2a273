"""docs/DESIGN.md's tree is a map of the code as it is: every Python and JS module under
gepard_demo/, eval/ and benchmarks/ has its line there, and every line names a file or folder
that exists. Read from the disk, not from git, so a module not yet committed counts too.

The tree's format: one entry a line, two spaces of indent a level, a folder's name ends in "/",
the entry's job after it; a line indented as far as the jobs column continues the job above.
A package's __init__.py has no line of its own: its folder's line stands for it.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "DESIGN.md"
MAPPED = ("gepard_demo", "eval", "benchmarks")
SUFFIXES = (".py", ".js")
ENTRY_INDENT = 16  # an entry is indented less than this; a job's continuation, more


def tree_entries() -> list[tuple[str, str]]:
    """(path, job) for every entry of DESIGN's tree, a folder's path ending in "/"."""
    match = re.search(r"^## The tree\n.*?^```\n(.*?)^```", DESIGN.read_text(encoding="utf-8"), re.S | re.M)
    assert match, "docs/DESIGN.md has no '## The tree' section with a code block"
    entries, folders = [], []
    for number, line in enumerate(match.group(1).splitlines(), 1):
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip() or indent >= ENTRY_INDENT:
            continue
        assert indent % 2 == 0 and indent // 2 <= len(folders), f"DESIGN's tree, line {number}: bad indent: {line!r}"
        name, _, job = line.strip().partition(" ")
        folders = folders[: indent // 2]
        path = "".join(folders) + name
        entries.append((path, job.strip()))
        if name.endswith("/"):
            folders.append(name)
    return entries


def modules_on_disk() -> set[str]:
    found = set()
    for top in MAPPED:
        for f in (ROOT / top).rglob("*"):
            rel = f.relative_to(ROOT)
            if (f.suffix in SUFFIXES and f.is_file() and f.name != "__init__.py"
                    and not any(p == "__pycache__" or p.startswith(".") for p in rel.parts)):
                found.add(rel.as_posix())
    return found


def test_every_module_has_a_line_in_the_tree():
    named = {path for path, _ in tree_entries()}
    missing = sorted(modules_on_disk() - named)
    assert not missing, ("docs/DESIGN.md's tree ('## The tree') has no line for: " + ", ".join(missing)
                         + ". Add one for each, under its folder, saying its job in one line.")


def test_every_line_of_the_tree_names_what_is_on_disk():
    def there(path: str) -> bool:
        return (ROOT / path).is_dir() if path.endswith("/") else (ROOT / path).is_file()

    gone = [path for path, _ in tree_entries() if not there(path)]
    assert not gone, "docs/DESIGN.md's tree names what is not on disk: " + ", ".join(gone)


def test_every_line_of_the_tree_says_its_job():
    silent = [path for path, job in tree_entries() if not job]
    assert not silent, "docs/DESIGN.md's tree has lines without their job: " + ", ".join(silent)
