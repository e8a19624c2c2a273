"""A run named on the command line: its folder, one rule for every `python -m eval` command.

A run is named by its folder's path (`runs/smoke`, `/data/runs/smoke`), or, where a command has a
runs folder (a listening session's), by its name in it (`smoke`). The folder must hold a run
(config.json); what a command needs beyond that (scores, rows) it says itself. Not for the Eval
tab: a visitor's run names stay inside its runs folder (eval/ui/runs_view.run_folder).
"""

from __future__ import annotations

import os
from pathlib import Path

from eval.runs.run import RunError


def run_path(arg: str | Path, runs_dir: str | Path | None = None) -> Path:
    """The run folder `arg` names: a name in `runs_dir` (when given), else a path."""
    given = Path(arg)
    if not str(arg).strip():
        raise RunError("a run is needed: its folder (e.g. runs/NAME)")
    tries = ([Path(runs_dir) / given] if runs_dir is not None and not given.is_absolute() else []) + [given]
    for folder in tries:
        if (folder / "config.json").is_file():
            return folder
    where = f" (looked for {' and '.join(str(t) for t in tries)})" if len(tries) > 1 else ""
    raise RunError(f"{str(arg)!r} is not a run folder: no config.json{where}")


def name_in(folder: Path, runs_dir: str | Path) -> str:
    """The run's name relative to runs_dir (`smoke`, or `../elsewhere/run` for one outside it)."""
    return Path(os.path.relpath(folder.resolve(), Path(runs_dir).resolve())).as_posix()
