"""Audio measures of a run folder, beside its ASR scores and, like them, resumable: what the audio
itself says, whatever transcribed it.

<run>/measures.jsonl, one row per utterance: timing and prosody (eval.scoring.timing: VAD
speech, silences, pauses, speaking rate, F0), the frame loop detector where the row has codes
(eval.scoring.loops), and `measure_s`, the CPU seconds this row took. <run>/dnsmos.jsonl: the
DNSMOS scores (eval.scoring.naturalness), kept apart because they are optional: a later call
with DNSMOS on fills in only what is missing.

DNSMOS is "on" by default and scores every row, whatever it costs: what a run contains follows
from its command, never from how busy the machine was (an "auto" mode that stopped past a CPU
budget once left two runs of one command with different measures). Its measured cost (process
CPU seconds per audio second) is returned and logged, so a slow CPU is seen, not hidden; "off"
(`--dnsmos off`, `--no-dnsmos`) is for quick runs. It pads every clip to 9 s, so short sentences
and slow CPUs cost most.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from eval.jsonio import append_jsonl, read_jsonl
from eval.runs.run import synthesized_rows
from eval.scoring.audio import read_mono, to_16k
from eval.scoring.loops import frame_loop
from eval.scoring.naturalness import dnsmos as dnsmos_scores
from eval.scoring.timing import SpeechTiming, asked_pauses

DNSMOS_MODES = ("on", "off")


def measure(run_dir: str | Path, dnsmos: str = "on", progress=None, log=print) -> dict:
    """Measure every row that has no measures yet; returns {"measured", "dnsmos", "dnsmos_cost"}:
    counts, and DNSMOS's CPU-s per audio-s in this call (None: none scored), which is logged."""
    if dnsmos not in DNSMOS_MODES:
        raise ValueError(f"dnsmos must be one of {', '.join(DNSMOS_MODES)}, got {dnsmos!r}")
    run_dir = Path(run_dir)
    rows = synthesized_rows(run_dir)
    files = {"measures": run_dir / "measures.jsonl", "dnsmos": run_dir / "dnsmos.jsonl"}
    have = {name: {r["id"] for r in read_jsonl(path, repair=True)} for name, path in files.items()}
    scoring = dnsmos != "off"
    todo = [r for r in rows if r["id"] not in have["measures"] or (scoring and r["id"] not in have["dnsmos"])]
    timing = SpeechTiming()
    measured = scored = 0
    dns_cpu = dns_audio = 0.0
    for i, row in enumerate(tqdm(todo, desc=f"measures {run_dir.name}", unit="utt")):
        audio, sr = read_mono(run_dir / row["wav"])
        audio16k = to_16k(audio, sr)
        if row["id"] not in have["measures"]:
            t0 = time.process_time()
            out = {"id": row["id"], **timing.measure(audio16k, row["words"], asked_pauses(row["text"]))}
            if row.get("codes"):
                out.update(frame_loop(np.load(run_dir / row["codes"]), audio, sr))
            out["measure_s"] = time.process_time() - t0
            append_jsonl(files["measures"], out)
            measured += 1
        if scoring and row["id"] not in have["dnsmos"]:
            t0 = time.process_time()
            scores = dnsmos_scores(audio16k)
            spent = time.process_time() - t0
            append_jsonl(files["dnsmos"], {"id": row["id"], **scores, "dnsmos_s": spent})
            scored += 1
            dns_cpu, dns_audio = dns_cpu + spent, dns_audio + len(audio16k) / 16000
        if progress:
            progress(i + 1, len(todo))
    cost = dns_cpu / max(dns_audio, 1e-9) if scored else None  # CPU-s per audio-s
    if cost is not None:
        log(f"DNSMOS scored {scored} utterances: {cost:.2f} CPU-s per audio-s on this machine "
            f"({dns_cpu:.1f} CPU-s); `--dnsmos off` skips it for quick runs")
    return {"measured": measured, "dnsmos": scored, "dnsmos_cost": cost}


def load_measures(run_dir: str | Path) -> list[dict]:
    """Every measured row: measures.jsonl joined with dnsmos.jsonl by id (what exists of them)."""
    run_dir = Path(run_dir)
    rows = {r["id"]: dict(r) for r in read_jsonl(run_dir / "measures.jsonl", repair=True)}
    for r in read_jsonl(run_dir / "dnsmos.jsonl", repair=True):
        rows.setdefault(r["id"], {"id": r["id"]}).update(r)
    return list(rows.values())
