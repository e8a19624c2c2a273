"""Eval's local engine runs a set through one running batch (gepard_demo.batching): every row
equals its utterance made alone. (That a long request does not hold short ones back:
tests/batching/test_scheduler.py's generate_each test.)"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from tests.support.app_fixtures import tiny_codec  # noqa: F401  (fixture)
from tests.support.eval_fixtures import rows_of

from eval.engines.local import GepardLocal
from eval.runs.run import RunConfig, run
from eval.runs.seeds import utterance_seed
from gepard_demo.settings import SamplingSettings

TEXTS = {"a": "Short.", "b": "A somewhat longer sentence than the first.", "c": "And short.", "d": "Last one here.",
         "e": "Five."}


def test_rows_of_the_running_batch_equal_solo_runs(tiny_engine, tiny_codec, tmp_path):  # noqa: F811
    set_file = tmp_path / "set.jsonl"
    set_file.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in TEXTS.items()))
    sampling = SamplingSettings(max_frames=16, stop_threshold=0.999, greedy=True)
    cfg = RunConfig(engine="local", model="tiny", set=str(set_file), sampling=sampling, batch_size=2, base_seed=3)
    run(cfg, tmp_path / "run", engine=GepardLocal(tiny_engine, tiny_codec), log=lambda m: None)
    rows = rows_of(tmp_path / "run")
    assert sorted(r["id"] for r in rows) == sorted(TEXTS)
    for r in rows:
        solo = tiny_engine.generate([TEXTS[r["id"]]], sampling.replace(seed=utterance_seed(3, r["id"])))[0]
        codes = torch.from_numpy(np.load(tmp_path / "run" / r["codes"]).astype(np.int64))
        assert torch.equal(codes, solo.frames), r["id"]
        assert r["p_stop"] == pytest.approx([float(p) for p in solo.p_stop], abs=1e-5)
        audio = tiny_codec.decode(solo.frames)
        assert r["frames"] == solo.num_frames and len(audio) == 16 * tiny_codec.samples_per_frame
