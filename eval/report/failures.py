"""The failure table: how often each way an autoregressive TTS fails happened, as counts.

Each entry is k of n utterances with a Wilson 95% interval (eval.scoring.rates) and the ids of
its k, so the report links their WAVs; n counts only the utterances the entry could be judged
on (a transcript entry needs ASR scores, a frame loop needs codes). Per utterance:

- catastrophic: per-utterance WER > 0.5 (speecheval).
- runaway: the frame budget or the force stop ended it before the stop head fired (the engine
  says so; a served model: our server's report, or frames >= max_new_tokens from the audio's
  length).
- force_stop: the force stop (the authors' guardrail, `--force-stop-frames`) ended it. A force-stopped
  run is a runaway the guard caught: it counts as both, so runaway keeps meaning "the stop head
  never ended it" whether or not a guard was on.
- derail: the onset-entropy probe says the run never settled, or settled and rose again
  (eval/scoring/derail.py: its rule and thresholds); not judged on rows without a probe trace
  (Piper, files, vLLM-Omni) or shorter than the rule's judge_from frames.
- truncated: duration ratio < 0.5 (audio seconds / expected seconds, 0.7 + 0.4 x words).
- loop: the transcript repeats an n-gram past the reference or keeps talking after its end,
  or the codec frames repeat for 1 s or more (eval.scoring.loops, every threshold there).
- long_pause: a pause inside the speech of at least LONG_PAUSE_S (1.0 s), from Silero VAD
  (eval.scoring.timing); Whisper's transcript does not show one.
- leading_silence: at least EDGE_SILENCE_S (1.0 s) before the first speech.
- trailing_silence: at least EDGE_SILENCE_S after the last speech, beyond the end silence the
  run asked for (its stream settings' silence_ms; a served model's own is not known: 0).
- no_speech: the VAD found no speech at all (the silences are then not judged).
- empty_transcript: the ASR heard no words at all.
- server_error: a served request the server failed (HTTP 5xx): a row with no audio, judged on
  nothing else.
- any: at least one of the above.

With several samples per sentence (--seeds K) n counts samples; the per-sentence view is in the
summary's "seeds" block (eval.report.seeds).
"""

from __future__ import annotations

import json

import pandas as pd

from eval.scoring.metrics import CATASTROPHIC_WER, TRUNCATION_RATIO
from eval.scoring.rates import Count

LONG_PAUSE_S = 1.0
EDGE_SILENCE_S = 1.0
ENTRIES = ("catastrophic", "runaway", "force_stop", "derail", "truncated", "loop", "long_pause", "leading_silence", "trailing_silence",
           "no_speech", "empty_transcript", "server_error")
DEFINITIONS = {
    "catastrophic": f"per-utterance WER > {CATASTROPHIC_WER}",
    "runaway": "the frame budget or the force stop ended it before the stop head fired",
    "force_stop": "the force stop ended it: a runaway the guard caught, counted in runaway too",
    "derail": "the probe's belief entropy did not settle below the derail rule's share of its onset "
              "(eval/scoring/derail.py; the rule in use is the summary's derail_rule)",
    "truncated": f"duration ratio < {TRUNCATION_RATIO} (audio / (0.7 + 0.4 x words) s)",
    "loop": "the transcript repeats an n-gram past the reference (2+ extra, or 3+ for one word) or has 3+ words "
            "after the reference's end, or the codec frames repeat for 1 s or more (eval/scoring/loops.py)",
    "long_pause": f"a pause inside the speech of {LONG_PAUSE_S:g} s or more (Silero VAD)",
    "leading_silence": f"{EDGE_SILENCE_S:g} s or more before the first speech (Silero VAD)",
    "trailing_silence": f"{EDGE_SILENCE_S:g} s or more after the last speech, beyond the run's own end silence",
    "no_speech": "Silero VAD finds no speech in the audio (silence, or noise it rejects)",
    "empty_transcript": "the ASR transcript has no words",
    "server_error": "the server failed the request (HTTP 5xx): no audio",
    "any": "at least one of the above",
}


def _either(*flags):
    known = [f for f in flags if f is not None and not pd.isna(f)]
    return None if not known else any(bool(f) for f in known)


def _end_silence_s(settings) -> float:
    try:
        return float(json.loads(settings).get("stream", {}).get("silence_ms", 0.0)) / 1000
    except (TypeError, ValueError, AttributeError):
        return 0.0


def flags(df: pd.DataFrame) -> pd.DataFrame:
    """One boolean column per entry (None where it cannot be judged), from a run's table."""
    col = lambda name: df[name] if name in df else pd.Series([None] * len(df), index=df.index)  # noqa: E731
    f = pd.DataFrame(index=df.index)
    f["catastrophic"] = [None if pd.isna(w) else w > CATASTROPHIC_WER for w in col("wer")]
    f["runaway"] = [None if pd.isna(r) else bool(r) for r in col("runaway")]
    f["force_stop"] = [None if pd.isna(r) else bool(r) for r in col("force_stopped")]
    f["derail"] = [None if pd.isna(r) else bool(r) for r in col("derail")]
    f["truncated"] = [None if pd.isna(r) else r < TRUNCATION_RATIO for r in col("duration_ratio")]
    f["loop"] = [_either(a, b) for a, b in zip(col("transcript_loop"), col("frame_loop"))]
    f["long_pause"] = [None if pd.isna(p) else p >= LONG_PAUSE_S for p in col("longest_pause_s")]
    f["leading_silence"] = [None if pd.isna(s) else s >= EDGE_SILENCE_S for s in col("leading_silence_s")]
    f["trailing_silence"] = [None if pd.isna(s) else s - _end_silence_s(cfg) >= EDGE_SILENCE_S
                             for s, cfg in zip(col("trailing_silence_s"), col("settings"))]
    f["no_speech"] = [None if pd.isna(n) else n == 0 for n in col("spans")]
    f["empty_transcript"] = [None if not isinstance(h, str) else not h.split() for h in col("hyp_norm")]
    f["server_error"] = [bool(e) if isinstance(e, str) else False for e in col("server_error")]
    # A request the server failed has no audio to judge: it counts as a server error only.
    judged = [e for e in ENTRIES if e != "server_error"]
    f = f.astype(object)
    f.loc[f["server_error"].astype(bool), judged] = None
    f["any"] = [_either(*row) for row in f[list(ENTRIES)].itertuples(index=False)]
    return f


def failure_table(df: pd.DataFrame) -> dict:
    """{entry: Count.as_dict() + definition} over the rows of df (its fail_* columns when it has them)."""
    fl = df[[f"fail_{e}" for e in (*ENTRIES, "any")]].set_axis([*ENTRIES, "any"], axis=1) if "fail_any" in df else flags(df)
    ids = df["id"].tolist()
    return {name: {**Count.of(dict(zip(ids, fl[name]))).as_dict(), "definition": DEFINITIONS[name]}
            for name in (*ENTRIES, "any")}
