"""Helpers for the eval tests: hand-made run folders (no engine, no ASR) and tiny engines."""

from __future__ import annotations

import json
from pathlib import Path

from eval.jsonio import append_jsonl, write_json_atomic
from eval.runs.score import score_row


def fake_run(run_dir: Path, texts: list[str], hyps: list[str], tag: str = "faster-whisper_tiny.en_int8",
             ids: list[str] | None = None, extra: list[dict] | None = None, wavs: bool = False) -> Path:
    """A scored run folder whose transcripts are `hyps` (scored with the real normalizer/metrics).
    extra: per utterance, fields that replace the row's (category, seed, runaway, ...); wavs: write
    a short WAV per row too (for what plays or links them)."""
    run_dir.mkdir(parents=True)
    ids = ids or [f"u{i:03d}" for i in range(len(texts))]
    extra = extra or [{}] * len(texts)
    write_json_atomic(run_dir / "config.json", {"version": 1, "run": {"engine": "fake", "model": "none", "set": "hand"},
                                                "set_sha256": "x", "items": len(texts)})
    (run_dir / "asr" / tag).mkdir(parents=True)
    for uid, text, hyp, more in zip(ids, texts, hyps, extra):
        words = len(text.split())
        row = {"id": uid, "category": "c" + str(len(text) % 2), "text": text, "words": words, "frames": 10 * words,
               "stop_fired": True, "stop_frame": 10 * words, "runaway": False, "duration_s": 0.7 + 0.4 * words,
               "p_stop": [0.1] * (10 * words) + [0.9], "ttfa_s": 0.1, "rtf": 0.5, "seed": 1, "wav": f"wav/{uid}.wav",
               "settings": {}, **more}
        if wavs:
            import numpy as np
            import soundfile as sf

            (run_dir / "wav").mkdir(exist_ok=True)
            sf.write(run_dir / row["wav"], np.zeros(2205, np.float32), 22050)
        append_jsonl(run_dir / "rows.jsonl", row)
        append_jsonl(run_dir / "asr" / tag / "scores.jsonl", {**score_row(row, hyp), "asr_s": 0.1})
    return run_dir


def rows_of(run_dir: Path) -> list[dict]:
    return [json.loads(l) for l in (Path(run_dir) / "rows.jsonl").read_text().splitlines() if l.strip()]
