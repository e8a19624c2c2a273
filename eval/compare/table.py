"""Two scored runs compared measure by measure, overall and per category, on their common pairs.

Pairs: the utterances both runs scored, matched by id (an id is a sentence and, with --seeds K,
its sample), kept only where both have the same text, the same seed (where both engines take
one: Piper's rows have none) and the same normalised reference: otherwise a pair would compare
different things. What is not compared, and why, is
said in `notes`; nothing left in common is an error (exit 2). Both runs need ASR scores from the
same recogniser (the same tag, so the same model and normalisation).

Every measure is defined in MEASURES: what it is, its kind (paired.py computes each kind's
interval) and which way is worse. A delta is always new - base.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from eval.report.failures import ENTRIES
from eval.report.summary import load_table
from eval.runs.score import scored_tags
from eval.scoring.bootstrap import DEFAULT_REPLICATES, DEFAULT_SEED
from eval.scoring.derail import DerailRule

from .paired import Delta, mean_delta, rate_delta, ratio_delta


class CompareError(ValueError):
    """Runs that cannot be compared (exit code 2)."""


@dataclass(frozen=True)
class Measure:
    name: str
    kind: str  # "ratio" (two columns: edits, reference size), "mean" (one per utterance), "rate" (events)
    columns: tuple[str, ...]
    worse: int  # +1: higher is worse, -1: lower is worse
    unit: str
    definition: str


MEASURES = {m.name: m for m in [
    Measure("corpus_wer", "ratio", ("errors", "n_ref"), +1, "WER", "corpus WER = sum(S+D+I) / sum(N_ref) (the headline)"),
    Measure("mean_wer", "mean", ("wer",), +1, "WER", "mean per-utterance WER (seed-tts-eval's figure)"),
    Measure("corpus_cer", "ratio", ("char_edits", "n_ref_chars"), +1, "CER", "corpus CER"),
    *[Measure(entry, "rate", (f"fail_{entry}",), +1, "rate", f"failure-table entry {entry!r} (eval/report/failures.py)")
      for entry in (*ENTRIES, "any")],
    Measure("clean", "rate", ("clean",), -1, "rate",
            "clean rollouts (the authors' rule, eval/scoring/reward.py): reward WER <= 0.2, duration in bounds, "
            "not a runaway, not empty; lower is worse"),
    Measure("reward", "mean", ("reward",), -1, "reward",
            "the authors' reward (gepard-train score.py, eval/scoring/reward.py), mean; lower is worse"),
    Measure("dnsmos_ovrl", "mean", ("dnsmos_ovrl",), -1, "MOS", "DNSMOS P.835 overall (speechmos), mean"),
    Measure("duration_ratio", "mean", ("duration_ratio",), +1, "ratio",
            "audio s / expected s (0.7 + 0.4 x words), mean; a rise means longer than the text needs"),
    Measure("stop_lag_ms", "mean", ("stop_lag_ms",), +1, "ms",
            "stop time - the VAD's end of speech, mean over pairs where both stopped"),
    Measure("speaking_rate_wps", "mean", ("speaking_rate_wps",), -1, "words/s", "words / speech seconds (Silero VAD)"),
    Measure("f0_median_hz", "mean", ("f0_median_hz",), 0, "Hz", "median F0 (SwiftF0); no side is worse"),
    Measure("speaker_sim", "mean", ("speaker_sim",), -1, "cosine",
            "speaker similarity to the reference voice (Resemblyzer GE2E cosine, not the authors' WavLM-SV), mean over "
            "rows with a reference"),
]}
ALL = "all"


@dataclass
class Comparison:
    base: str
    new: str
    tag: str
    pairs: int
    categories: list[str]
    deltas: dict[str, dict[str, Delta]]  # category (ALL first) -> measure -> Delta
    notes: list[str] = field(default_factory=list)
    worse_utterances: list[dict] = field(default_factory=list)
    voices: list[str] = field(default_factory=list)  # the saved voices the pairs were spoken in (--voice)
    voice_deltas: dict[str, dict[str, Delta]] = field(default_factory=dict)  # voice -> measure -> Delta
    absent: dict[str, str] = field(default_factory=dict)  # measure with no overall delta -> which run lacks it, in words

    def as_dict(self) -> dict:
        return {"base": self.base, "new": self.new, "asr": self.tag, "pairs": self.pairs, "categories": self.categories,
                "notes": self.notes, "measures": {m.name: m.definition for m in MEASURES.values()},
                "deltas": {c: {m: d.as_dict() for m, d in ds.items()} for c, ds in self.deltas.items()},
                "voices": self.voices,
                "voice_deltas": {v: {m: d.as_dict() for m, d in ds.items()} for v, ds in self.voice_deltas.items()},
                "worse_utterances": self.worse_utterances}


def common_tag(base: Path, new: Path, tag: str | None = None) -> str:
    for d in (base, new):
        if not (d / "config.json").is_file():
            raise CompareError(f"{d} is not a run folder (no config.json)")
    tb, tn = scored_tags(base), scored_tags(new)
    if tag:
        if tag not in tb or tag not in tn:
            raise CompareError(f"ASR scores {tag!r} missing: base has {tb or 'none'}, new has {tn or 'none'}")
        return tag
    common = sorted(set(tb) & set(tn))
    if not common:
        raise CompareError(f"no ASR scores in common (base: {tb or 'none'}, new: {tn or 'none'}): score both with the "
                           "same --asr / --asr-model (`python -m eval score`)")
    if len(common) > 1:
        raise CompareError(f"several common ASR scores {common}: pick one with --asr-tag")
    return common[0]


def paired_table(base: Path, new: Path, tag: str, derail: DerailRule = DerailRule()) -> tuple[pd.DataFrame, list[str]]:
    """One row per common pair: the base's columns suffixed _a, the new's _b; and the notes."""
    a, _ = load_table(base, tag, derail)
    b, _ = load_table(new, tag, derail)
    a, b = a[a["wer"].notna()], b[b["wer"].notna()]
    m = a.merge(b, on="id", suffixes=("_a", "_b"))
    notes = []
    only_a, only_b = len(set(a["id"]) - set(b["id"])), len(set(b["id"]) - set(a["id"]))
    if only_a or only_b:
        notes.append(f"compared on the {len(m)} utterances both runs scored: {only_a} only in the base, "
                     f"{only_b} only in the new run (different sets or limits)")
    for col, what in (("text", "texts"), ("seed", "seeds"), ("ref_norm", "normalised references")):
        differ = m[f"{col}_a"].astype(str) != m[f"{col}_b"].astype(str)
        if col == "seed":  # an engine without seeds (Piper, a files row without one) pairs with any seed
            differ &= m["seed_a"].notna() & m["seed_b"].notna()
        if differ.any():
            notes.append(f"{int(differ.sum())} utterances left out: their {what} differ between the runs "
                         f"(e.g. {m.loc[differ, 'id'].iloc[0]!r})")
            m = m[~differ]
    if m.empty:
        raise CompareError("the two runs have no comparable utterances in common: " + "; ".join(notes or ["none scored"]))
    clusters = m["sentence_a"] if "sentence_a" in m and m["sentence_a"].notna().all() else m["id"]
    return m.assign(_cluster=clusters.astype(str).to_numpy()), notes


def measure_delta(m: pd.DataFrame, measure: Measure, replicates: int, seed: int) -> Delta | None:
    cols = [f"{c}_{s}" for s in "ab" for c in measure.columns]
    if not all(c in m for c in cols):
        return None
    ok = m[cols].notna().all(axis=1)
    if not ok.any():
        return None
    p = m[ok]
    if measure.kind == "ratio":
        num, den = measure.columns
        if p[f"{den}_a"].sum() <= 0 or p[f"{den}_b"].sum() <= 0:
            return None
        return ratio_delta(p[f"{num}_a"], p[f"{den}_a"], p[f"{num}_b"], p[f"{den}_b"], p["_cluster"], replicates, seed)
    col = measure.columns[0]
    if measure.kind == "rate":
        return rate_delta(p[f"{col}_a"].astype(bool), p[f"{col}_b"].astype(bool), p["_cluster"], replicates, seed)
    return mean_delta(p[f"{col}_a"].astype(float), p[f"{col}_b"].astype(float), p["_cluster"], replicates, seed)


def compare_runs(base: str | Path, new: str | Path, tag: str | None = None, replicates: int = DEFAULT_REPLICATES,
                 seed: int = DEFAULT_SEED, worst: int = 20, derail: DerailRule = DerailRule()) -> Comparison:
    base, new = Path(base), Path(new)
    tag = common_tag(base, new, tag)
    m, notes = paired_table(base, new, tag, derail)
    categories = sorted(m["category_a"].dropna().unique())

    def deltas_of(part: pd.DataFrame) -> dict[str, Delta]:
        found = {name: measure_delta(part, measure, replicates, seed) for name, measure in MEASURES.items()}
        return {k: v for k, v in found.items() if v is not None}

    deltas = {cat: deltas_of(m if cat == ALL else m[m["category_a"] == cat]) for cat in [ALL, *categories]}
    voices = sorted(m["voice_a"].dropna().unique()) if "voice_a" in m else []
    voice_deltas = {v: deltas_of(m[m["voice_a"] == v]) for v in voices}
    absent = {name: absence(m, measure, base, new) for name, measure in MEASURES.items() if name not in deltas[ALL]}
    return Comparison(str(base), str(new), tag, len(m), categories, deltas, notes, worse_utterances(m, base, new, worst),
                      voices, voice_deltas, absent)


def absence(m: pd.DataFrame, measure: Measure, base: Path, new: Path) -> str:
    """Why the pairs give `measure` no delta, as facts about each run (the gate's refusal says
    what the measure needs): its values are missing or null in every compared row."""
    what = measure.name
    parts = []
    for side, run in (("a", base), ("b", new)):
        cols = [f"{c}_{side}" for c in measure.columns]
        have = int(m[cols].notna().all(axis=1).sum()) if all(c in m for c in cols) else 0
        if have:
            continue
        why = f"{run} has no {what} value in any of its {len(m)} compared rows"
        if measure.name.startswith("dnsmos") and not (run / "dnsmos.jsonl").is_file():
            why += " (no dnsmos.jsonl: it was scored with --dnsmos off)"
        elif measure.name.startswith("dnsmos"):
            why += " (its DNSMOS scores are null: Silero VAD found under 1 s of speech in every clip)"
        parts.append(why)
    return "; ".join(parts) or f"no compared row has {what} in both runs"


def worse_utterances(m: pd.DataFrame, base: Path, new: Path, worst: int) -> list[dict]:
    """The pairs that got worse, worst first: per-utterance WER up, or a failure entry that only
    the new run has; each with both WAVs (paths relative to the comparison's runs)."""
    fails = [e for e in (*ENTRIES,) if f"fail_{e}_a" in m]
    rows = []
    for r in m.to_dict("records"):
        d = r["wer_b"] - r["wer_a"]
        new_fails = [e for e in fails if _true(r[f"fail_{e}_b"]) and not _true(r[f"fail_{e}_a"])]
        if d <= 0 and not new_fails:
            continue
        rows.append({"id": r["id"], "category": r["category_a"], "text": r["text_a"], "seed": _int(r["seed_a"]),
                     "wer_base": float(r["wer_a"]), "wer_new": float(r["wer_b"]), "wer_delta": float(d),
                     "new_failures": new_fails, "hyp_base": r["hyp_a"], "hyp_new": r["hyp_b"],
                     "wav_base": str(base / r["wav_a"]), "wav_new": str(new / r["wav_b"])})
    rows.sort(key=lambda x: (-len(x["new_failures"]), -x["wer_delta"], x["id"]))
    return rows[:worst]


def _true(v) -> bool:
    return v is not None and not pd.isna(v) and bool(v)


def _int(v):
    return None if v is None or pd.isna(v) else int(v)


def fmt(measure: Measure, value: float) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "–"
    if measure.unit in ("WER", "CER", "rate"):
        return f"{100 * value:.2f}%"
    return f"{value:.3g}"
