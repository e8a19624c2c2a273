"""WER against what the model read (issue 65): a row keeps its written text and the text front end's
reading (`spoken`); scoring reports WER against the written text as always, and against the
reading as a separate figure (`wer_spoken`, the summary's `wer_spoken_corpus`)."""

from __future__ import annotations

import pytest
from tests.support.eval_fixtures import fake_run

from eval.report.summary import write_outputs
from eval.runs.rows import row_spoken
from eval.runs.run import RunConfig


def test_wer_against_the_written_and_the_read_text(tmp_path):
    texts = ["Gepard is here.", "The cat sat."]
    hyps = ["gay pard is here", "the cat sat"]
    extra = [{"spoken": "gay pard is here."}, {"spoken": "The cat sat."}]
    df, summary = write_outputs(fake_run(tmp_path / "r", texts, hyps, extra=extra), replicates=50)
    wer, said = dict(zip(df["id"], df["wer"])), dict(zip(df["id"], df["wer_spoken"]))
    assert wer["u000"] == pytest.approx(2 / 3) and said["u000"] == 0.0  # "gepard" -> "gay pard": 1 sub + 1 ins
    assert wer["u001"] == said["u001"] == 0.0
    o = summary["overall"]
    assert o["wer_corpus"]["value"] == pytest.approx(2 / 6)  # unchanged: against the written text
    assert o["wer_spoken_corpus"]["value"] == 0.0


def test_a_row_keeps_what_gepard_read():
    from gepard_demo.settings import SamplingSettings

    cfg = RunConfig(engine="tiny", sampling=SamplingSettings(text_normalization="rules", lexicon_entries="SQL = sequel"))
    assert row_spoken(cfg, "SQL costs $5.") == "sequel costs five dollars."
    assert row_spoken(RunConfig(engine="piper"), "SQL costs $5.") is None
