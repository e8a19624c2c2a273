"""One load run, from its points to its folder; what an interrupted run keeps.

Rows are appended to rows.jsonl as each request ends (eval/jsonio.py: one fsynced write a row).
Ctrl-C ends the run where it is: the requests in flight are hung up (the servers free them),
every finished request stays in rows.jsonl, and the points finished (and the one cut short, from
its finished rows) are summarized and reported, marked interrupted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from eval.jsonio import append_jsonl
from eval.load.client import LoadError
from eval.load.gate import LoadGate
from eval.load.metrics import RequestRow, summarize
from eval.load.report import write_folder
from eval.load.runner import LoadConfig, run_points


@dataclass(frozen=True)
class LoadOutcome:
    summaries: list[dict]
    breaches: list[str] | None  # None: no gate
    interrupted: str | None  # what an interruption left, in words
    report: Path

    @property
    def measured(self) -> bool:
        """Whether any request completed (exit 2 when none did)."""
        return any(s["completed"] for s in self.summaries)


def default_out() -> Path:
    return Path("runs") / time.strftime("load-%Y%m%d-%H%M%S")


def run_load(points: list[LoadConfig], out: Path, gate: LoadGate | None = None, log=print) -> LoadOutcome:
    """Run every point into `out` (new or empty); the gate is checked against the points first."""
    if gate is not None:
        gate.check_run([p.label for p in points], goodput=bool(points[0].goodput))
    if out.exists() and any(out.iterdir()):
        raise LoadError(f"--out {out}: the folder is not empty (a load run starts in a new one)")
    out.mkdir(parents=True, exist_ok=True)
    rows_file = out / "rows.jsonl"
    finished: dict[str, list[RequestRow]] = {}
    started = time.perf_counter()
    t_point: dict[str, float] = {}

    def on_row(cfg: LoadConfig, row: RequestRow) -> None:
        t_point.setdefault(cfg.label, time.perf_counter())
        finished.setdefault(cfg.label, []).append(row)
        append_jsonl(rows_file, {"point": cfg.label, **row.to_json()})

    interrupted = None
    try:
        summaries = [p.summary for p in run_points(points, on_row, log)]
    except KeyboardInterrupt:
        summaries = []
        for cfg in points:
            rows = finished.get(cfg.label)
            if rows:  # the points done, then the one cut short, from the rows it finished
                duration = max(r.start_time + r.e2el for r in rows)
                summaries.append({**cfg.meta([]), "sample_rate": sorted({r.sample_rate for r in rows if r.sample_rate}),
                                  **summarize(rows, duration, cfg.goodput, cfg.percentiles)})
        done = sum(len(r) for r in finished.values())
        interrupted = (f"Interrupted after {time.perf_counter() - started:.0f} s: {done} finished requests kept in "
                       f"{rows_file}; the requests in flight were hung up and are not counted.")
        log(interrupted)
    breaches = gate.breaches(summaries) if gate is not None and not interrupted else None
    return LoadOutcome(summaries, breaches, interrupted, write_folder(out, summaries, breaches, interrupted))
