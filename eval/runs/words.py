"""Each scored row's word alignment, beside its ASR scores and, like them, resumable.

<run>/asr/<tag>/words.jsonl: one row per scored utterance, {"id", "ops", "note", "align_s"}:
the reference words against what was heard, every deletion, insertion and substitution placed at
its time (eval.scoring.word_alignment; on a run whose Gepard read its texts with
text_normalization or a lexicon, the heard words timed over what was said and each op naming its
written token), and the CPU seconds it took. Written by `score` after the
transcripts; a run scored before this existed gets its words on its next `score`.
"""

from __future__ import annotations

import json
import time
from functools import lru_cache
from pathlib import Path

from eval.jsonio import append_jsonl, read_jsonl
from eval.runs.run import synthesized_rows
from eval.scoring.audio import read_mono
from eval.scoring.word_alignment import word_alignment
from gepard_demo.alignment.settings import DEFAULT_WEIGHTS
from gepard_demo.alignment.weights import DEFAULT_CACHE

WORDS_FILE = "words.jsonl"


@lru_cache(maxsize=2)
def shared_aligner(weights: str = DEFAULT_WEIGHTS, cache: str = str(DEFAULT_CACHE)):
    """One aligner per process and weights (a sweep scores many runs); it loads on its first
    utterance with speech."""
    from gepard_demo.alignment.aligner import Aligner
    from gepard_demo.alignment.settings import AlignmentSettings

    return Aligner(AlignmentSettings(weights=weights, cache_dir=cache))


def align_words(run_dir: str | Path, tag: str, aligner=None, cache: Path = DEFAULT_CACHE, log=print) -> int:
    """Align every scored row of `tag` that has no words yet; returns how many were aligned."""
    run_dir = Path(run_dir)
    out = run_dir / "asr" / tag
    scores = read_jsonl(out / "scores.jsonl", repair=True)
    have = {r["id"] for r in read_jsonl(out / WORDS_FILE, repair=True)}
    todo = [s for s in scores if s["id"] not in have]
    if not todo:
        return 0
    rows = {r["id"]: r for r in synthesized_rows(run_dir)}
    run_reading = reading_of(run_dir, log)
    aligner = aligner or shared_aligner(cache=str(cache))
    cpu = audio_s = 0.0
    for s in todo:
        row = rows.get(s["id"])
        if row is None or not row.get("wav"):
            continue
        audio, sr = read_mono(run_dir / row["wav"])
        t0 = time.process_time()
        reading = run_reading if row.get("spoken") is not None else ("off", "")  # None: no Gepard read it
        words = word_alignment(aligner, audio, sr, s["ref_norm"], s["hyp_norm"], row["text"], reading)
        spent = time.process_time() - t0
        append_jsonl(out / WORDS_FILE, {"id": s["id"], **words, "align_s": spent})
        cpu, audio_s = cpu + spent, audio_s + len(audio) / sr
    log(f"word alignment: {len(todo)} utterances, {cpu / max(audio_s, 1e-9):.3f} CPU-s per audio-s")
    return len(todo)


def reading_of(run_dir: Path, log=print) -> tuple[str, str]:
    """How the run's Gepard read its texts: (text_normalization, lexicon_entries) from config.json.
    Where this machine cannot read that way (a "nemo" run scored without its library), the words
    are timed as heard, and the log says so."""
    from gepard_demo.text.front_end import shared
    from gepard_demo.text.lexicon import parse_cached
    from gepard_demo.text.library import LibraryMissing

    sampling = json.loads((run_dir / "config.json").read_text()).get("run", {}).get("sampling") or {}
    reading = (sampling.get("text_normalization") or "off", sampling.get("lexicon_entries") or "")
    try:
        shared().read("It costs $5.50.", reading[0], parse_cached(reading[1], "lexicon_entries"))
    except LibraryMissing as e:
        log(f"word alignment: {e}; the heard words are timed as written, not as the run read its texts")
        return "off", ""
    return reading


def load_words(run_dir: str | Path, tag: str | None) -> dict[str, dict]:
    """id -> {"ops", "note"} of a run's ASR tag (empty when it has none)."""
    if not tag:
        return {}
    return {r["id"]: r for r in read_jsonl(Path(run_dir) / "asr" / tag / WORDS_FILE, repair=True)}
