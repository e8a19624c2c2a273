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
from eval.report.failures import DEFINITIONS as FAILURE_DEFINITIONS
from eval.report.columns import probe_columns, reward_columns
from eval.report.failures import failure_table
from eval.report.where import where_in_time
from eval.runs.run import RunError, synthesized_rows
from eval.runs.score import scored_tags
from eval.runs.words import load_words
from eval.scoring.bootstrap import DEFAULT_REPLICATES, DEFAULT_SEED, mean_ci, ratio_ci
from eval.scoring.metrics import CATASTROPHIC_WER, length_figures
from eval.scoring.derail import DerailRule
from eval.scoring.rates import Count

# Timing and prosody figures summarized as spreads (eval/scoring/timing.py defines each).
TIMING = ("speaking_rate_wps", "pause_count", "longest_pause_s", "leading_silence_s", "trailing_silence_s",
          "speech_ratio", "f0_median_hz", "f0_range_st")

DEFINITIONS = {
    "wer_corpus": "corpus WER = sum(S+D+I) / sum(N_ref) over utterances, after Whisper's EnglishTextNormalizer on both sides (headline)",
    "wer_mean": "mean per-utterance WER = mean of (S+D+I)/N_ref (seed-tts-eval style; weighs short sentences up)",
    "cer_corpus": "corpus CER = sum(character edits) / sum(reference characters), normalized text, spaces included",
    "exact_match_rate": "share of utterances whose normalized transcript equals the normalized text",
    "catastrophic_rate": f"share of utterances with per-utterance WER > {CATASTROPHIC_WER}",
    "ci": "95% percentile bootstrap over utterances, fixed seed (eval.scoring.bootstrap); rates of events (exact match, catastrophic, stop fired, runaway, truncation, overlong, premature stop, every failure) are k of n with a Wilson 95% interval (eval.scoring.rates)",
    "stop_fired_rate": "share of utterances where the stop head ended generation",
    "runaway_rate": "share of utterances that hit the frame budget (max_frames) or the force stop without the stop head firing",
    "force_stop_rate": "share of utterances the force stop ended: runaways the guard caught (counted in the runaway rate too)",
    "derail_rate": "share of the utterances the derail rule could judge (a probe trace, at least judge_from frames) whose belief entropy did not settle (derail_rule below; eval/scoring/derail.py)",
    "reward": "the authors' reward per utterance (gepard-train score.py): -1.0 x WER - 0.5 x max(0, dur - dur_max) - 2.0 x [dur < dur_min] - 2.0 x [empty ASR] - 0.5 x (1 - SIM); WER with Whisper's BasicTextNormalizer, dur_min / dur_max = 0.3 / 2.0 x (0.7 + 0.4 x words) s, dur = frames x 1024 / 22050 s (else audio minus end silence), SIM = GE2E speaker_sim where there is a reference voice, else the term is 0 (eval/scoring/reward.py); mean with bootstrap CI",
    "clean_rate": "share of scored utterances that are clean rollouts (score.py): reward WER <= 0.2, dur_min <= dur <= dur_max, not a runaway (its frame cap hit), transcript not empty",
    "probe": "the onset-entropy probe (gepard_demo/model/guards/probe.py): mean belief entropy over frames 0-9 (onset) and 40-59 (settled) and the drop between them, nats; median (p10, p90) over rows that have them",
    "probe_prediction": "flagged by frame N (20, 50, 100: the derail rule's window before N at >= its fraction of the onset; rows that ended before N are not flagged) against each row's outcome (runaway, catastrophic, force stop): precision = flagged that had it / flagged, recall = flagged that had it / had it, k/n with Wilson 95% (eval/charts/probe_charts.py)",
    "token_budget": "failure rates (catastrophic, runaway, derail, any) per text length in tokens (the text once): 1 to 12 tokens each, 13-24, 25+; k/n with Wilson 95% (eval/charts/budget_chart.py)",
    "truncation_rate": "share with duration ratio < 0.5 (speecheval)",
    "overlong_rate": "share with duration ratio > 2.0 (speecheval's runaway by length)",
    "premature_stop_rate": "share where the stop head fired and (duration ratio < 0.5 or the transcript's alignment ends in deleted reference words)",
    "duration_ratio": "audio seconds / expected seconds, expected = 0.7 + 0.4 x words of the input text (median, p10, p90)",
    "frames_per_word": "codec frames / words of the input text (21.5 frames per second)",
    "ttfa_s": "time to first audio (eval.engines): engine local = when the first chunk's last frame was committed (estimated from the row's step rate) + that chunk's measured decode; local-stream = measured in the app's streaming session; server = request sent -> first audio bytes received (network and queueing included); piper = first audio chunk",
    "rtf": "(generation + codec decode seconds) / audio seconds; in a batch, generation time is shared",
    "asr_rtf": "ASR wall seconds / audio seconds",
    "speaker_sim": "voice cloning: mean cosine of Resemblyzer GE2E speaker embeddings of the reference (a recording, or a saved voice's clip) and the output (gepard_demo.voice.similarity), rows with one; GE2E, not the authors' WavLM-SV",
    "failures": "the failure table: each entry k of n utterances with a Wilson 95% interval and the ids (eval/report/failures.py defines every entry)",
    "where": "per failure entry and utterance, where in time it happened, from the row's word alignment (eval/report/where.py)",
    "naturalness": "DNSMOS P.835 SIG / BAK / OVRL and P.808 (speechmos) on the speech, 16 kHz, peak-normalised; mean with bootstrap CI; never used to rank (eval/scoring/naturalness.py)",
    "timing": "Silero VAD speech and pauses, speaking rate = words / speech seconds, F0 median and 5-95% range in semitones from SwiftF0 (eval/scoring/timing.py); medians over utterances",
    "stop_lag_ms": "stop time (frames committed x 1024 / 22050 s) - the VAD's end of speech, ms, rows where the stop head fired: > 0 the stop came after the speech, < 0 it cut into it (median, p10, p90)",
    "clustered": "with several samples per sentence (--seeds K) every CI above resamples sentences, not rows (the bootstrap, rates included); the failure table keeps Wilson over samples, and the seeds block counts sentences",
}


def load_table(run_dir: str | Path, tag: str | None = None,
               derail: DerailRule = DerailRule()) -> tuple[pd.DataFrame, str | None]:
    """(table, asr tag) for a run: synthesis rows joined with one ASR tag's scores.

    tag None: the run's only ASR tag, or the most recently written one; no scores: None.
    derail: the derail rule's thresholds (eval/scoring/derail.py) for the derail and probe columns.
    """
    run_dir = Path(run_dir)
    rows = synthesized_rows(run_dir)
    df = probe_columns(pd.DataFrame(rows), derail)
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
        df = reward_columns(df)
    df = _with_measures(df, run_dir)
    ends = df["end_deletions"] if "end_deletions" in df else pd.Series([None] * len(df))
    figs = [length_figures(w, f if f is not None and not pd.isna(f) else 0, d, bool(sf) if sf is not None and not pd.isna(sf) else False,
                           None if e is None or pd.isna(e) else int(e))
            for w, f, d, sf, e in zip(df["words"], df["frames"], df["duration_s"], df["stop_fired"], ends)]
    df = pd.concat([df, pd.DataFrame(figs, index=df.index)], axis=1)
    # Reference engines have no frames and no stop head: those figures are missing, not 0.
    has_frames = df["frames"].notna()
    df["frames_per_word"] = df["frames_per_word"].astype(float).where(has_frames, np.nan)
    df["premature_stop"] = df["premature_stop"].astype("boolean").where(has_frames, pd.NA)
    for col in ("stop_fired", "runaway", "truncated", "overlong", "force_stopped", "derail"):
        if col in df:
            df[col] = df[col].astype("boolean")
    return with_failure_flags(df), tag


def _with_measures(df: pd.DataFrame, run_dir: Path) -> pd.DataFrame:
    """The audio measures (eval.runs.measure), the transcript's loop figures and the stop lag."""
    from eval.runs.measure import load_measures
    from eval.scoring.loops import transcript_loop

    measured = load_measures(run_dir)
    if measured:
        df = df.merge(pd.DataFrame(measured), on="id", how="left")
    if "hyp_norm" in df:
        loops = [transcript_loop(r, h) if isinstance(h, str) else {} for r, h in zip(df["ref_norm"], df["hyp_norm"])]
        df = pd.concat([df, pd.DataFrame(loops, index=df.index)], axis=1)
    if "end_of_speech_s" in df:
        spf_s = 1024 / df["sample_rate"]
        stopped = df["stop_fired"].fillna(False).astype(bool) & df["stop_frame"].notna()
        df["stop_lag_ms"] = ((df["stop_frame"] * spf_s - df["end_of_speech_s"]) * 1000).where(stopped)
    return df


def with_failure_flags(df: pd.DataFrame) -> pd.DataFrame:
    """The table with one `fail_<entry>` column per failure-table entry (True, False or None)."""
    from eval.report.failures import flags

    return pd.concat([df, flags(df).add_prefix("fail_")], axis=1)


def _clusters(df: pd.DataFrame) -> pd.Series | None:
    """The sentence of each row when sentences have several samples (--seeds K), else None."""
    if "sentence" in df and df["sentence"].notna().all() and df["sentence"].nunique() < len(df):
        return df["sentence"]
    return None


def _rate(series: pd.Series, replicates: int, seed: int, clusters: pd.Series | None = None) -> dict | None:
    s = series.dropna().astype(float)
    if s.empty:
        return None
    if clusters is None:
        return {**mean_ci(s.to_numpy(), replicates, seed).as_dict(), "n": int(s.size)}
    g = s.groupby(clusters[s.index])
    return {**ratio_ci(g.sum(), g.count(), replicates, seed).as_dict(), "n": int(s.size), "clustered": True}


def _share(series: pd.Series, replicates: int, seed: int, clusters: pd.Series | None = None) -> dict | None:
    """A rate of events (a boolean column): k of n with its Wilson 95% interval, which a rare event
    needs (0 of 30 is [0, 11.4%], where the bootstrap says [0, 0]); with several samples per
    sentence, the bootstrap clustered by sentence, since one sentence's samples are not independent."""
    s = series.dropna().astype(bool)
    if s.empty:
        return None
    if clusters is not None:
        rate = _rate(s, replicates, seed, clusters)
        assert rate is not None  # _rate is None only on an empty series, and s is not empty
        return {**rate, "k": int(s.sum())}
    c = Count(int(s.sum()), int(s.size)).as_dict()
    return {"value": c["rate"], "ci_low": c["ci_low"], "ci_high": c["ci_high"], "k": c["k"], "n": c["n"],
            "interval": "wilson"}


def _spread(series: pd.Series) -> dict | None:
    s = series.dropna().astype(float)
    if s.empty:
        return None
    return {"median": float(s.median()), "p10": float(s.quantile(0.1)), "p90": float(s.quantile(0.9)), "mean": float(s.mean())}


def _ratio(num: pd.Series, den: pd.Series, replicates: int, seed: int, clusters: pd.Series | None) -> dict:
    if clusters is not None:
        num, den = num.groupby(clusters[num.index]).sum(), den.groupby(clusters[den.index]).sum()
    return ratio_ci(num, den, replicates, seed).as_dict()


def summarize_group(df: pd.DataFrame, replicates: int = DEFAULT_REPLICATES, seed: int = DEFAULT_SEED) -> dict:
    out: dict = {"n": int(len(df))}
    cl = _clusters(df)
    share = lambda col: _share(df[col], replicates, seed, cl) if col in df else None  # noqa: E731
    mean = lambda col: _rate(df[col], replicates, seed, cl)  # noqa: E731
    if "wer" in df and df["wer"].notna().any():
        sc = df[df["wer"].notna()]
        out["n_scored"] = int(len(sc))
        out["wer_corpus"] = {**_ratio(sc["errors"], sc["n_ref"], replicates, seed, cl),
                             "errors": int(sc["errors"].sum()), "ref_words": int(sc["n_ref"].sum()),
                             "sub": int(sc["sub"].sum()), "del": int(sc["dele"].sum()), "ins": int(sc["ins"].sum())}
        out["wer_mean"] = _rate(sc["wer"], replicates, seed, cl)
        if "wer_spoken" in sc and sc["wer_spoken"].notna().all():  # against what the model read (score_row)
            out["wer_spoken_corpus"] = _ratio(sc["errors_spoken"], sc["n_ref_spoken"], replicates, seed, cl)
        out["cer_corpus"] = _ratio(sc["char_edits"], sc["n_ref_chars"], replicates, seed, cl)
        out["exact_match_rate"] = _share(sc["exact"], replicates, seed, cl)
        out["catastrophic_rate"] = _share(sc["catastrophic"], replicates, seed, cl)
        if "asr_s" in sc:
            out["asr_rtf"] = float(sc["asr_s"].sum() / max(sc["duration_s"].sum(), 1e-9))
    out["stop_fired_rate"] = share("stop_fired")
    out["runaway_rate"] = share("runaway")
    out["force_stop_rate"] = share("force_stopped")
    out["derail_rate"] = share("derail")
    if "reward" in df and df["reward"].notna().any():
        out["reward"] = mean("reward")
        out["clean_rate"] = share("clean")
    out["probe"] = {c: _spread(df[c]) for c in ("entropy_onset", "entropy_settled", "entropy_drop")
                    if c in df and df[c].notna().any()}
    out["truncation_rate"] = share("truncated")
    out["overlong_rate"] = share("overlong")
    out["premature_stop_rate"] = share("premature_stop")
    out["duration_ratio"] = _spread(df["duration_ratio"])
    out["frames_per_word"] = _spread(df["frames_per_word"])
    out["duration_s"] = _spread(df["duration_s"])
    out["ttfa_s"] = _spread(df["ttfa_s"])
    out["rtf"] = _spread(df["rtf"])
    if "speaker_sim" in df and df["speaker_sim"].notna().any():
        out["speaker_sim"] = mean("speaker_sim")
    out["failures"] = failure_table(df)
    out["naturalness"] = {c: mean(c) for c in ("dnsmos_ovrl", "dnsmos_sig", "dnsmos_bak", "dnsmos_p808")
                          if c in df and df[c].notna().any()}
    out["timing"] = {c: _spread(df[c]) for c in TIMING if c in df and df[c].notna().any()}
    out["stop_lag_ms"] = _spread(df["stop_lag_ms"]) if "stop_lag_ms" in df else None
    return out


def by_voice(df: pd.DataFrame, replicates: int = DEFAULT_REPLICATES, seed: int = DEFAULT_SEED) -> dict:
    """Each saved voice's rows summarized (a run with --voice); {} when no row has one."""
    if "voice" not in df or not df["voice"].notna().any():
        return {}
    return {v: summarize_group(g, replicates, seed) for v, g in df[df["voice"].notna()].groupby("voice", sort=True)}


def summarize(df: pd.DataFrame, tag: str | None, run_config: dict | None = None,
              replicates: int = DEFAULT_REPLICATES, seed: int = DEFAULT_SEED, derail: DerailRule = DerailRule()) -> dict:
    from eval.charts.budget_chart import token_budget_data
    from eval.charts.probe_charts import probe_prediction_data
    from eval.report.seeds import seeds_summary
    from eval.scoring.reward import AUTHORS

    records = lambda d: None if d is None else json.loads(d.to_json(orient="records"))  # noqa: E731
    return {
        "asr": tag,
        "run": run_config,
        "bootstrap": {"replicates": replicates, "seed": seed, "level": 0.95,
                      "clustered_by": "sentence" if _clusters(df) is not None else None},
        "overall": summarize_group(df, replicates, seed),
        "by_category": {c: summarize_group(g, replicates, seed) for c, g in df.groupby("category", sort=True)},
        "by_voice": by_voice(df, replicates, seed),
        "seeds": seeds_summary(df, replicates, seed),
        "derail_rule": {**derail.as_dict(), "rule": derail.describe()},
        "reward_weights": AUTHORS.as_dict(),
        "probe_prediction": records(probe_prediction_data(df)),
        "token_budget": records(token_budget_data(df)),
        "definitions": {**DEFINITIONS, **{f"failure_{k}": v for k, v in FAILURE_DEFINITIONS.items()}},
    }


def write_outputs(run_dir: str | Path, tag: str | None = None, replicates: int = DEFAULT_REPLICATES,
                  seed: int = DEFAULT_SEED, derail: DerailRule = DerailRule()) -> tuple[pd.DataFrame, dict]:
    """table.csv, table.parquet, summary.json in the run folder (for one ASR tag and derail rule)."""
    run_dir = Path(run_dir)
    df, tag = load_table(run_dir, tag, derail)
    cfg = json.loads((run_dir / "config.json").read_text())
    summary = summarize(df, tag, cfg, replicates, seed, derail)
    summary["overall"]["where"] = where_in_time(df, load_words(run_dir, tag))  # each failure placed in time
    replace_atomic(run_dir / "table.csv", lambda tmp: df.to_csv(tmp, index=False))
    replace_atomic(run_dir / "table.parquet", lambda tmp: df.to_parquet(tmp, index=False))
    write_json_atomic(run_dir / "summary.json", summary)
    return df, summary
