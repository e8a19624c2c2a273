"""Several samples per sentence (--seeds K): seeds, resume, the clustered bootstrap and the
per-sentence view, on the tiny checkpoint and on hand-made transcripts."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from tests.support.app_fixtures import tiny_codec  # noqa: F401  (fixture)
from tests.support.eval_fixtures import rows_of

from eval.cli import main
from eval.report.seeds import seeds_summary
from eval.report.summary import summarize_group
from eval.runs.run import RunConfig, RunError, run
from eval.runs.seeds import sample_seed, utterance_seed
from eval.sweeps.grid import SweepConfig
from eval.sweeps.sweep import sweep
from gepard_demo.settings import SamplingSettings


def test_k_samples_with_their_own_seeds_and_sample_zero_is_the_one_sample_run(tiny_engine, tiny_codec, tmp_path):
    from eval.engines.local import GepardLocal

    engine = GepardLocal(tiny_engine, tiny_codec)
    cfg = RunConfig(set="smoke", limit=2, sampling=SamplingSettings(max_frames=10), base_seed=3)
    run(cfg.__class__(**{**cfg.__dict__, "seeds": 3}), tmp_path / "k3", engine=engine, log=lambda m: None)
    run(cfg, tmp_path / "k1", engine=engine, log=lambda m: None)
    k3, k1 = rows_of(tmp_path / "k3"), rows_of(tmp_path / "k1")
    assert [r["id"] for r in k3] == ["smoke-1", "smoke-1~1", "smoke-1~2", "smoke-2", "smoke-2~1", "smoke-2~2"]
    assert [(r["sentence"], r["sample"]) for r in k3[:3]] == [("smoke-1", 0), ("smoke-1", 1), ("smoke-1", 2)]
    assert len({r["seed"] for r in k3}) == 6 and k3[1]["seed"] == sample_seed(3, "smoke-1", 1)
    # sample 0 is exactly the one-sample run's row: same id, seed and audio
    assert k3[0]["seed"] == k1[0]["seed"] == utterance_seed(3, "smoke-1")
    assert (tmp_path / "k3" / "wav" / "smoke-1.wav").read_bytes() == (tmp_path / "k1" / "wav" / "smoke-1.wav").read_bytes()
    # K is part of the run's identity: resuming with another K is refused
    with pytest.raises(RunError, match="seeds"):
        run(cfg.__class__(**{**cfg.__dict__, "seeds": 2}), tmp_path / "k3", engine=engine, log=lambda m: None)


@pytest.mark.slow
def test_a_killed_multi_sample_run_resumes_to_the_same_rows(tiny_cache_dir, tmp_path):
    args = ["run", "--model", "tiny", "--model-cache", str(tiny_cache_dir), "--set", "smoke", "--limit", "2",
            "--seeds", "2", "--max-frames", "8", "--seed", "5"]
    assert main([*args, "--out", str(tmp_path / "whole")]) == 0
    assert main([*args, "--out", str(tmp_path / "cut")]) == 0
    lines = (tmp_path / "cut" / "rows.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "cut" / "rows.jsonl").write_text("".join(lines[:3]) + lines[3][:40])  # killed mid-row
    assert main(["run", "--out", str(tmp_path / "cut")]) == 0  # resumes from the saved config
    cut, whole = rows_of(tmp_path / "cut"), rows_of(tmp_path / "whole")
    key = lambda r: (r["id"], r["sentence"], r["sample"], r["seed"], r["frames"])  # noqa: E731
    assert [key(r) for r in cut] == [key(r) for r in whole] and len(cut) == 4
    for a, b in zip(cut, whole):  # the resumed rows ran in another batch shape: rounding only (facts §3)
        assert a["p_stop"] == pytest.approx(b["p_stop"], abs=1e-4)


def _multi(rows):
    """A scored table as load_table makes it, from (errors, n_ref) per row."""
    df = pd.DataFrame(rows).assign(words=4, duration_s=2.3, frames=50, stop_fired=True, runaway=False,
                                   truncated=False, overlong=False, premature_stop=False, frames_per_word=12.5,
                                   duration_ratio=1.0, ttfa_s=0.1, rtf=0.5)
    return df.assign(sub=0, dele=df["errors"], ins=0, char_edits=df["errors"], n_ref_chars=10,
                     exact=df["errors"] == 0, catastrophic=df["wer"] > 0.5)


def test_per_sentence_view_and_best_of_k():
    # sentence a fails in one sample of three (by chance), b in all three, c in none
    rows = []
    for sent, errors in (("a", [0, 0, 3]), ("b", [3, 4, 3]), ("c", [0, 0, 0])):
        for k, e in enumerate(errors):
            rows.append({"id": sent if k == 0 else f"{sent}~{k}", "sentence": sent, "sample": k, "category": "x",
                         "errors": e, "n_ref": 4, "wer": e / 4, "hyp_norm": "w" * (e < 4), "ref_norm": "w w w w"})
    df = _multi(rows)
    s = seeds_summary(df, 200, 1)
    assert (s["always_fail"], s["sometimes_fail"], s["never_fail"]) == (1, 1, 1) and s["sentences"] == 3
    assert s["wer_single_sample"]["value"] == pytest.approx(3 / 12)  # a0, b0, c0
    assert s["wer_best_of_k"]["value"] == pytest.approx(3 / 12)  # b's best is still 3 errors
    assert s["worst"][0]["sentence"] == "b" and s["worst"][0]["p_fail"] == 1.0
    assert seeds_summary(df[df["sample"] == 0], 200, 1) is None  # one sample per sentence: no seeds view


def test_the_bootstrap_resamples_sentences_when_there_are_several_samples():
    # two sentences: one always right, one always wrong; six samples each
    rows = [{"id": f"{s}~{k}", "sentence": s, "sample": k, "category": "x", "errors": 0 if s == "a" else 4, "n_ref": 4,
             "wer": 0.0 if s == "a" else 1.0} for s in "ab" for k in range(6)]
    clustered = summarize_group(_multi(rows), 500, 1)["wer_corpus"]
    flat = summarize_group(_multi(rows).drop(columns=["sentence"]), 500, 1)["wer_corpus"]
    # resampling 2 sentences can draw both right or both wrong; resampling 12 rows cannot get close
    assert clustered["ci_low"] == 0.0 and clustered["ci_high"] == 1.0
    assert flat["ci_high"] - flat["ci_low"] < 0.7


def test_a_sweep_with_seeds_runs_every_point_k_times(tiny_engine, tiny_codec, tmp_path):
    from eval.engines.local import GepardLocal

    base = RunConfig(set="smoke", limit=2, seeds=2, sampling=SamplingSettings(max_frames=12))
    sweep(SweepConfig(base=base, swept=(("temperature", (0.5,)), ("stop_threshold", (0.3, 0.6)))), tmp_path / "sw",
          engine=GepardLocal(tiny_engine, tiny_codec), log=lambda m: None)
    for point in ("T0.5_S0.3", "T0.5_S0.6"):
        rows = rows_of(tmp_path / "sw" / point)
        assert [r["id"] for r in rows] == ["smoke-1", "smoke-1~1", "smoke-2", "smoke-2~1"]
    assert json.loads((tmp_path / "sw" / "sweep.json").read_text())["config"]["base"]["seeds"] == 2
