"""The authors' reward and clean rate in a run's summary, and with several samples per sentence the
best of K by reward and the oracle (minimum) WER beside the mean, on a hand-made scored run whose
numbers are worked out here."""

from __future__ import annotations

import pytest
from tests.support.eval_fixtures import fake_run

from eval.report.summary import write_outputs

TEXT = "alpha bravo charlie delta echo foxtrot golf hotel india juliet"  # 10 words: 100 frames = 4.64 s, bounds [1.41, 9.4] s
# sentence a: samples with 0, 2 and 10 errors; sentence b: 1, 1 and 3 errors (the 3rd sample ran away)
HYPS = {"a": [TEXT, "alpha bravo charlie delta echo foxtrot golf hotel", ""],
        "b": ["alpha bravo charlie delta echo foxtrot golf hotel india", "bravo charlie delta echo foxtrot golf hotel india juliet",
              "alpha bravo charlie delta echo foxtrot golf"]}


def _run(tmp_path):
    texts, hyps, ids, extra = [], [], [], []
    for sent, hs in HYPS.items():
        for k, h in enumerate(hs):
            texts.append(TEXT)
            hyps.append(h)
            ids.append(sent if k == 0 else f"{sent}~{k}")
            extra.append({"sentence": sent, "sample": k, "category": "c", "runaway": sent == "b" and k == 2})
    return fake_run(tmp_path / "r", texts, hyps, ids=ids, extra=extra)


def test_reward_clean_and_best_of_k(tmp_path):
    df, summ = write_outputs(_run(tmp_path), replicates=200)
    wer = {"a": [0.0, 0.2, 1.0], "b": [0.1, 0.1, 0.3]}
    # reward = -WER (every duration in bounds), and -2 more for the empty transcript
    want = {"a": [0.0, -0.2, -3.0], "b": [-0.1, -0.1, -0.3]}
    got, got_wer = dict(zip(df["id"], df["reward"])), dict(zip(df["id"], df["reward_wer"]))
    for sent in HYPS:
        for k in range(3):
            uid = sent if k == 0 else f"{sent}~{k}"
            assert got[uid] == pytest.approx(want[sent][k]) and got_wer[uid] == pytest.approx(wer[sent][k])
    # clean: WER <= 0.2, not a runaway, not empty: a, a~1, b, b~1 (b~2 has WER 0.3 and ran away)
    assert list(df.loc[df["clean"].astype(bool), "id"]) == ["a", "a~1", "b", "b~1"]
    o = summ["overall"]
    assert (o["clean_rate"]["k"], o["clean_rate"]["n"]) == (4, 6)
    assert o["reward"]["value"] == pytest.approx(sum(sum(v) for v in want.values()) / 6)
    s = summ["seeds"]
    assert s["oracle_wer"] == pytest.approx((0.0 + 0.1) / 2) and s["mean_wer"] == pytest.approx((1.2 / 3 + 0.5 / 3) / 2)
    # best by reward: a's sample 0 (0 errors), b's sample 0 or 1 (tied, 1 error each): 1 error of 20
    assert s["wer_best_by_reward"]["value"] == pytest.approx(1 / 20)
    assert s["reward_best"] == pytest.approx((0.0 - 0.1) / 2) and s["reward_mean"] == pytest.approx((-3.2 / 3 - 0.5 / 3) / 2)
    assert (s["any_clean"]["k"], s["any_clean"]["n"]) == (2, 2)
