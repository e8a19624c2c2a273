"""The per-utterance table of a run and its summary (overall and per category).

Headline WER is the corpus WER = sum(S + D + I) / sum(N_ref) over utterances
(make-speech-benchmark); the mean of per-utterance WERs (seed-tts-eval's figure) is given
too, always labelled "mean per-utterance WER". Every figure below is defined in DEFINITIONS,
which is copied into summary.json and the report.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from eval.jsonio import read_jsonl, replace_atomic, write_json_atomic
from eval.runs.run import RunError, synthesized_rows
from eval.runs.score import scored_tags
from eval.scoring.bootstrap import DEFAULT_REPLICATES, DEFAULT_SEED, mean_ci, ratio_ci
from eval.scoring.metrics import CATASTROPHIC_WER, length_figures

DEFINITIONS = {
    "wer_corpus": "corpus WER = sum(S+D+I) / sum(N_ref) over utterances, after Whisper's EnglishTextNormalizer on both sides (headline)",
    "wer_mean": "mean per-utterance WER = mean of (S+D+I)/N_ref (seed-tts-eval style; weighs short sentences up)",
    "cer_corpus": "corpus CER = sum(character edits) / sum(reference characters), normalized text, spaces included",
    "exact_match_rate": "share of utterances whose normalized transcript equals the normalized text",
    "catastrophic_rate": f"share of utterances with per-utterance WER > {CATASTROPHIC_WER}",
    "ci": "95% percentile bootstrap over utterances, fixed seed (eval.scoring.bootstrap)",
    "stop_fired_rate": "share of utterances where the stop head ended generation",
    "runaway_rate": "share of utterances that hit the frame budget (max_frames) without the stop head firing",
    "truncation_rate": "share with duration ratio < 0.5 (speecheval)",
    "overlong_rate": "share with duration ratio > 2.0 (speecheval's runaway by length)",
    "premature_stop_rate": "share where the stop head fired and (duration ratio < 0.5 or the transcript's alignment ends in deleted reference words)",
    "duration_ratio": "audio seconds / expected seconds, expected = 0.7 + 0.4 x words of the input text (median, p10, p90)",
    "frames_per_word": "codec frames / words of the input text (21.5 frames per second)",
    "ttfa_s": "time to first audio (eval.engines): engine local = when the first chunk's last frame was committed (estimated from the row's step rate) + that chunk's measured decode; local-stream = measured in the app's streaming session; server = request sent -> first audio bytes received (network and queueing included); piper = first audio chunk",
    "rtf": "(generation + codec decode seconds) / audio seconds; in a batch, generation time is shared",
    "asr_rtf": "ASR wall seconds / audio seconds",
    "speaker_sim": "voice cloning: mean cosine of Resemblyzer GE2E speaker embeddings of the reference recording and the output (eval.scoring.speaker_similarity), rows with a reference",
}


def load_table(run_dir: str | Path, tag: str | None = None) -> tuple[pd.DataFrame, str | None]:
    """(table, asr tag) for a run: synthesis rows joined with one ASR tag's scores.

    tag None: the run's only ASR tag, or the most recently written one; no scores: None.
    """
    run_dir = Path(run_dir)
    rows = synthesized_rows(run_dir)
    df = pd.DataFrame(rows)
    df["p_stop"] = df["p_stop"].map(lambda p: json.dumps(p) if p is not None else None)
    df["p_stop_max"] = [max(json.loads(p)) if p else np.nan for p in df["p_stop"]]
    df["settings"] = df["settings"].map(json.dumps)
    tags = scored_tags(run_dir)
    if tag is None and tags:
        tag = max(tags, key=lambda t: (run_dir / "asr" / t / "scores.jsonl").stat().st_mtime)
    if tag is not None:
        if tag not in tags:
            raise RunError(f"{run_dir} has no ASR scores {tag!r} (has: {tags or 'none'})")
        sc = pd.DataFrame(read_jsonl(run_dir / "asr" / tag / "scores.jsonl"))
        df = df.merge(sc, on="id", how="left")
        scored = df["ref_norm"].notna()
        df["exact"] = pd.Series((df["ref_norm"] == df["hyp_norm"]), dtype="boolean").where(scored, pd.NA)
        df["catastrophic"] = pd.Series(df["wer"] > CATASTROPHIC_WER, dtype="boolean").where(scored, pd.NA)
    ends = df["end_deletions"] if "end_deletions" in df else pd.Series([None] * len(df))
    figs = [length_figures(w, f if f is not None and not pd.isna(f) else 0, d, bool(sf) if sf is not None and not pd.isna(sf) else False,
                           None if e is None or pd.isna(e) else int(e))
            for w, f, d, sf, e in zip(df["words"], df["frames"], df["duration_s"], df["stop_fired"], ends)]
    df = pd.concat([df, pd.DataFrame(figs, index=df.index)], axis=1)
    # Reference engines have no frames and no stop head: those figures are missing, not 0.
    has_frames = df["frames"].notna()
    df["frames_per_word"] = df["frames_per_word"].astype(float).where(has_frames, np.nan)
    df["premature_stop"] = df["premature_stop"].astype("boolean").where(has_frames, pd.NA)
    for col in ("stop_fired", "runaway", "truncated", "overlong"):
        df[col] = df[col].astype("boolean")
    return df, tag


def _rate(series: pd.Series, replicates: int, seed: int) -> dict | None:
    s = series.dropna().astype(float)
    if s.empty:
        return None
    return {**mean_ci(s.to_numpy(), replicates, seed).as_dict(), "n": int(s.size)}


def _spread(series: pd.Series) -> dict | None:
    s = series.dropna().astype(float)
    if s.empty:
        return None
    return {"median": float(s.median()), "p10": float(s.quantile(0.1)), "p90": float(s.quantile(0.9)), "mean": float(s.mean())}


def summarize_group(df: pd.DataFrame, replicates: int = DEFAULT_REPLICATES, seed: int = DEFAULT_SEED) -> dict:
    out: dict = {"n": int(len(df))}
    if "wer" in df and df["wer"].notna().any():
        sc = df[df["wer"].notna()]
        out["n_scored"] = int(len(sc))
        out["wer_corpus"] = {**ratio_ci(sc["errors"], sc["n_ref"], replicates, seed).as_dict(),
                             "errors": int(sc["errors"].sum()), "ref_words": int(sc["n_ref"].sum()),
                             "sub": int(sc["sub"].sum()), "del": int(sc["dele"].sum()), "ins": int(sc["ins"].sum())}
        out["wer_mean"] = mean_ci(sc["wer"].to_numpy(float), replicates, seed).as_dict()
        out["cer_corpus"] = ratio_ci(sc["char_edits"], sc["n_ref_chars"], replicates, seed).as_dict()
        out["exact_match_rate"] = _rate(sc["exact"], replicates, seed)
        out["catastrophic_rate"] = _rate(sc["catastrophic"], replicates, seed)
        if "asr_s" in sc:
            out["asr_rtf"] = float(sc["asr_s"].sum() / max(sc["duration_s"].sum(), 1e-9))
    out["stop_fired_rate"] = _rate(df["stop_fired"], replicates, seed)
    out["runaway_rate"] = _rate(df["runaway"], replicates, seed)
    out["truncation_rate"] = _rate(df["truncated"], replicates, seed)
    out["overlong_rate"] = _rate(df["overlong"], replicates, seed)
    out["premature_stop_rate"] = _rate(df["premature_stop"], replicates, seed)
    out["duration_ratio"] = _spread(df["duration_ratio"])
    out["frames_per_word"] = _spread(df["frames_per_word"])
    out["duration_s"] = _spread(df["duration_s"])
    out["ttfa_s"] = _spread(df["ttfa_s"])
    out["rtf"] = _spread(df["rtf"])
    if "speaker_sim" in df and df["speaker_sim"].notna().any():
        out["speaker_sim"] = _rate(df["speaker_sim"], replicates, seed)
    return out


def summarize(df: pd.DataFrame, tag: str | None, run_config: dict | None = None,
              replicates: int = DEFAULT_REPLICATES, seed: int = DEFAULT_SEED) -> dict:
    return {
        "asr": tag,
        "run": run_config,
        "bootstrap": {"replicates": replicates, "seed": seed, "level": 0.95},
        "overall": summarize_group(df, replicates, seed),
        "by_category": {c: summarize_group(g, replicates, seed) for c, g in df.groupby("category", sort=True)},
        "definitions": DEFINITIONS,
    }


def write_outputs(run_dir: str | Path, tag: str | None = None, replicates: int = DEFAULT_REPLICATES,
                  seed: int = DEFAULT_SEED) -> tuple[pd.DataFrame, dict]:
    """table.csv, table.parquet, summary.json in the run folder (for one ASR tag)."""
    run_dir = Path(run_dir)
    df, tag = load_table(run_dir, tag)
    cfg = json.loads((run_dir / "config.json").read_text())
    summary = summarize(df, tag, cfg, replicates, seed)
    replace_atomic(run_dir / "table.csv", lambda tmp: df.to_csv(tmp, index=False))
    replace_atomic(run_dir / "table.parquet", lambda tmp: df.to_parquet(tmp, index=False))
    write_json_atomic(run_dir / "summary.json", summary)
    return df, summary
