"""What the Eval tab reads back from run folders: the list of runs, a run's report and table, its
rows (failures first) and a row's audio."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from eval.runs.run import RunError, done_rows

if TYPE_CHECKING:
    import numpy as np

# The per-utterance table: each column of a run's table, headed by a short label of whole words
# (the Eval tab sizes each column to keep them whole: ui.takes.header_widths).
TABLE_HEADERS = {"id": "id", "category": "category", "text": "text", "hyp": "heard", "wer": "WER", "frames": "frames",
                 "stop_fired": "stop fired", "runaway": "runaway", "ended_by": "ended by", "duration_s": "audio s",
                 "duration_ratio": "length ratio", "ttfa_s": "TTFA s", "fail_any": "failed", "fail_loop": "loop",
                 "derail": "derail", "entropy_drop": "entropy drop", "reward": "reward", "clean": "clean",
                 "longest_pause_s": "longest pause s", "dnsmos_ovrl": "DNSMOS"}
TABLE_COLUMNS = list(TABLE_HEADERS)
WIDE = ("text", "heard")  # sentences


def list_runs(runs_dir: str | Path) -> list[str]:
    """Run folders under runs_dir (relative names), the newest first."""
    d = Path(runs_dir)
    if not d.is_dir():
        return []
    found = [p for p in d.glob("**/config.json") if (p.parent / "rows.jsonl").is_file()]
    return sorted((str(p.parent.relative_to(d)) for p in found), key=lambda n: -(d / n / "rows.jsonl").stat().st_mtime)


def run_folder(runs_dir: str | Path, name: str) -> Path:
    """runs_dir/name, refused when the name is empty or leaves runs_dir (the tab's inputs are the visitor's)."""
    if not name:
        raise RunError("pick a run")
    root = Path(runs_dir).resolve()
    d = (root / name).resolve()
    if root not in d.parents or not (d / "config.json").is_file():
        raise RunError(f"{name!r} is not a run in {runs_dir}")
    return d


def view_run(runs_dir: str | Path, name: str) -> tuple[str, pd.DataFrame, list[str]]:
    """(summary markdown, per-utterance table, chart paths) of a run, rebuilding its report."""
    from eval.report.markdown import make_report

    if not name:
        return "Pick a run.", shown_table(pd.DataFrame(columns=TABLE_COLUMNS)), []
    d = run_folder(runs_dir, name)
    report = make_report(d)
    text = report.read_text()
    # The report's image links are relative to the run folder; the gallery shows the charts.
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)\n?", "", text)
    table = pd.read_parquet(d / "table.parquet")
    charts = sorted(str(p) for p in (d / "charts").glob("*.png"))
    return text, shown_table(table), charts


def shown_table(table: pd.DataFrame) -> pd.DataFrame:
    """A run's table as the tab shows it: every column in TABLE_COLUMNS' order (one a run did not
    measure, empty), headed by its label, so the column widths always line up."""
    return table.reindex(columns=TABLE_COLUMNS).rename(columns=TABLE_HEADERS)


def failed_rows(runs_dir: str | Path, name: str) -> list[tuple[str, str]]:
    """(label, id) of every utterance the run's failure table lists, labelled with its failures."""
    path = Path(runs_dir) / (name or "") / "summary.json"
    if not name or not path.is_file():
        return []
    failures = json.loads(path.read_text())["overall"].get("failures", {})
    why: dict[str, list[str]] = {}
    for entry, c in failures.items():
        if entry != "any":
            for i in c["ids"]:
                why.setdefault(i, []).append(entry.replace("_", " "))
    return [(f"{i}: {', '.join(w)}", i) for i, w in why.items()]


def row_choices(runs_dir: str | Path, name: str) -> list[tuple[str, str]]:
    """(label, id) of every row of the run: the failure table's first (with their failures), then
    the rest in set order."""
    if not name:
        return []
    failed = failed_rows(runs_dir, name)
    seen = {i for _, i in failed}
    rest = [(f"{r['id']}: {r['text'][:60]}", r["id"]) for r in done_rows(run_folder(runs_dir, name)) if r["id"] not in seen]
    return failed + rest


def find_row(runs_dir: str | Path, name: str, utt_id: str) -> tuple[Path, dict]:
    """(the run folder, the row of utterance `utt_id`)."""
    d = run_folder(runs_dir, name)
    for r in done_rows(d):
        if r["id"] == utt_id:
            return d, r
    raise RunError(f"{name} has no utterance {utt_id!r}")


def row_audio(runs_dir: str | Path, name: str, utt_id: str):
    """(rate, samples) of one utterance's WAV, for the tab's player (None: nothing picked).
    Samples, not a path: a player's URL would name the run (and unblind a listening test)."""
    if not name or not utt_id:
        return None

    d, row = find_row(runs_dir, name, utt_id)
    return wav_samples(d / row["wav"])


def wav_samples(path: str | Path) -> tuple[int, np.ndarray]:
    """(rate, int16 samples) of a run's WAV (16-bit PCM): played as written, with no rescaling on
    the way (Gradio would convert float samples to 16 bits itself, normalising loud ones)."""
    import soundfile as sf

    audio, sr = sf.read(path, dtype="int16")
    return sr, audio
