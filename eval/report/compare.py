"""Compare two scored runs over their common utterance ids, with paired bootstrap CIs.

Exit codes of `python -m eval compare BASE NEW`: 0 no significant regression, 1 the corpus
WER increase is significant (the 95% CI's lower bound of WER_new - WER_base is above
--max-wer-increase, in absolute WER, default 0), 2 bad input (missing run, no common ASR
scores, no common utterances, same id with different text).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from eval.report.summary import load_table
from eval.runs.score import scored_tags
from eval.scoring.bootstrap import DEFAULT_REPLICATES, DEFAULT_SEED, paired_mean_diff_ci, paired_ratio_diff_ci


class CompareError(ValueError):
    """Input that cannot be compared (exit code 2)."""


@dataclass
class Comparison:
    tag: str
    n_common: int
    n_base_only: int
    n_new_only: int
    rows: list[dict]  # metric, base, new, delta, ci_low, ci_high
    wer_delta: dict
    regression: bool
    max_wer_increase: float

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _pick_tag(base: Path, new: Path, tag: str | None) -> str:
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
        raise CompareError(f"no ASR scores in common (base: {tb or 'none'}, new: {tn or 'none'}); run `python -m eval score` on both with the same --asr/--asr-model")
    if len(common) > 1:
        raise CompareError(f"several common ASR scores {common}: pick one with --asr-tag")
    return common[0]


def compare(base: str | Path, new: str | Path, max_wer_increase: float = 0.0, tag: str | None = None,
            replicates: int = DEFAULT_REPLICATES, seed: int = DEFAULT_SEED) -> Comparison:
    base, new = Path(base), Path(new)
    tag = _pick_tag(base, new, tag)
    a, _ = load_table(base, tag)
    b, _ = load_table(new, tag)
    a, b = a[a["wer"].notna()], b[b["wer"].notna()]
    m = a.merge(b, on="id", suffixes=("_a", "_b"))
    if m.empty:
        raise CompareError("the two runs have no scored utterance ids in common")
    bad = m[m["text_a"] != m["text_b"]]
    if len(bad):
        raise CompareError(f"{len(bad)} ids have different texts in the two runs (e.g. {bad['id'].iloc[0]!r})")
    wer = paired_ratio_diff_ci(m["errors_a"], m["n_ref_a"], m["errors_b"], m["n_ref_b"], replicates, seed)
    cer = paired_ratio_diff_ci(m["char_edits_a"], m["n_ref_chars_a"], m["char_edits_b"], m["n_ref_chars_b"], replicates, seed)
    rows = [
        {"metric": "corpus WER", "base": m["errors_a"].sum() / m["n_ref_a"].sum(), "new": m["errors_b"].sum() / m["n_ref_b"].sum(), **_d(wer)},
        {"metric": "corpus CER", "base": m["char_edits_a"].sum() / m["n_ref_chars_a"].sum(), "new": m["char_edits_b"].sum() / m["n_ref_chars_b"].sum(), **_d(cer)},
    ]
    for col, name in (("wer", "mean per-utterance WER"), ("exact", "exact match rate"), ("catastrophic", "catastrophic rate"),
                      ("stop_fired", "stop fired rate"), ("runaway", "runaway rate"), ("truncated", "truncation rate"),
                      ("overlong", "overlong rate"), ("duration_ratio", "mean duration ratio")):
        x, y = m[f"{col}_a"], m[f"{col}_b"]
        ok = x.notna() & y.notna()
        if not ok.any():
            continue
        x, y = x[ok].astype(float).to_numpy(), y[ok].astype(float).to_numpy()
        d = paired_mean_diff_ci(x, y, replicates, seed)
        rows.append({"metric": name, "base": float(np.mean(x)), "new": float(np.mean(y)), **_d(d)})
    return Comparison(
        tag=tag, n_common=len(m), n_base_only=len(set(a["id"]) - set(b["id"])), n_new_only=len(set(b["id"]) - set(a["id"])),
        rows=rows, wer_delta=wer.as_dict(), regression=bool(wer.low > max_wer_increase), max_wer_increase=max_wer_increase,
    )


def _d(iv) -> dict:
    return {"delta": iv.value, "ci_low": iv.low, "ci_high": iv.high}


def format_comparison(c: Comparison, base: str, new: str) -> str:
    df = pd.DataFrame(c.rows)
    lines = [f"base: {base}", f"new:  {new}",
             f"ASR {c.tag}; {c.n_common} common utterances ({c.n_base_only} only in base, {c.n_new_only} only in new); paired bootstrap 95% CIs",
             "", f"{'metric':<24} {'base':>9} {'new':>9} {'delta':>9}   95% CI"]
    for r in df.itertuples():
        lines.append(f"{r.metric:<24} {r.base:>9.4f} {r.new:>9.4f} {r.delta:>+9.4f}   [{r.ci_low:+.4f}, {r.ci_high:+.4f}]")
    verdict = "REGRESSION" if c.regression else "no significant regression"
    lines += ["", f"{verdict}: corpus WER change CI lower bound {c.wer_delta['ci_low']:+.4f} vs allowed increase {c.max_wer_increase:+.4f}"]
    return "\n".join(lines)
