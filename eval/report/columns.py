"""Per-utterance columns a run's table gets from its rows and scores, beside the metrics of
eval/scoring/metrics.py (load_table in summary.py adds them):

- derail, derail_ratio, derail_at: the derail rule on the row's probe entropy (eval/scoring/derail.py,
  with the thresholds the caller gives: `--derail-fraction`, `--derail-from`, `--derail-window`,
  `--derail-onset`); None where the row has no trace or is too short to judge.
- probe_20, probe_50, probe_100: flagged by frame N (derail.probe_at): what an early stop acting
  at frame N would see; False for a row that ended before frame N.
- reward, clean, reward_wer, reward_cer, empty_asr, reward_dur_s, dur_min, dur_max: the authors'
  reward and clean rollout (eval/scoring/reward.py), on scored rows (not on a failed server request).
The traces (entropy, nll) are kept as JSON text in the table, as p_stop is.
"""

from __future__ import annotations

import json

import pandas as pd

from eval.scoring.derail import DerailRule, judge, probe_at
from eval.scoring.reward import reward, speech_seconds

PROBE_FRAMES = (20, 50, 100)
REWARD_COLUMNS = ("reward", "clean", "reward_wer", "reward_cer", "empty_asr", "reward_dur_s", "dur_min", "dur_max")


def _list(v):
    if isinstance(v, str):
        v = json.loads(v)
    return v if isinstance(v, list) else None


def _frames(v):
    return None if v is None or pd.isna(v) else int(v)


def probe_columns(df: pd.DataFrame, rule: DerailRule) -> pd.DataFrame:
    """derail, derail_ratio, derail_at and probe_<N>; the traces as JSON text."""
    df = df.copy()
    for name in ("entropy", "nll"):
        if name not in df:
            df[name] = None
    traces = [_list(e) for e in df["entropy"]]
    frames = [_frames(f) for f in df["frames"]]
    judged = pd.DataFrame([judge(e, f, rule) for e, f in zip(traces, frames)], index=df.index)
    df[["derail", "derail_ratio", "derail_at"]] = judged[["derail", "derail_ratio", "derail_at"]].astype(object)
    for n in PROBE_FRAMES:
        df[f"probe_{n}"] = pd.Series([probe_at(e, f, n, rule) for e, f in zip(traces, frames)], index=df.index,
                                     dtype=object)
    for name in ("entropy", "nll"):
        df[name] = [None if v is None else json.dumps(v) for v in (_list(x) for x in df[name])]
    return df


def _silence_ms(settings) -> float:
    try:
        return float(json.loads(settings).get("stream", {}).get("silence_ms", 0.0))
    except (TypeError, ValueError, AttributeError):
        return 0.0


def reward_columns(df: pd.DataFrame) -> pd.DataFrame:
    """The reward columns on rows with a transcript (module docstring)."""
    if "hyp" not in df:
        return df
    col = lambda name: df[name] if name in df else pd.Series([None] * len(df), index=df.index)  # noqa: E731
    out: list[dict] = []  # per row: reward()'s parts, or {} where there is no reward
    for text, hyp, frames, dur, settings, runaway, sim, err in zip(
            df["text"], df["hyp"], df["frames"], df["duration_s"], col("settings"), col("runaway"),
            col("speaker_sim"), col("server_error")):
        if not isinstance(hyp, str) or isinstance(err, str):
            out.append({})
            continue
        truncated = None if runaway is None or pd.isna(runaway) else bool(runaway)
        s = None if sim is None or pd.isna(sim) else float(sim)
        out.append(reward(text, hyp, speech_seconds(_frames(frames), dur, _silence_ms(settings)), truncated, s))
    r = pd.DataFrame(out, index=df.index, columns=list(REWARD_COLUMNS))
    r["clean"] = r["clean"].astype("boolean")
    r["empty_asr"] = r["empty_asr"].astype("boolean")
    return pd.concat([df, r], axis=1)
