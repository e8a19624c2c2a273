"""Sweeps over the guardrail axes: one generation serves every stop threshold and force stop of a
group, each point equal to its direct run (frames, end, probe traces, audio); a whole
`eval sweep` over force_stop_frames x repetition_penalty draws the derail and runaway heatmaps
and finds its default point although sweep.csv spells "off" as an empty cell."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import soundfile as sf
from tests.support.eval_fixtures import rows_of

from eval.cli import main
from eval.engines.local import GepardLocal
from eval.runs.run import RunConfig, run
from eval.sweeps.thresholds import TraceStore, capped, one_pass_points, source_cap
from gepard_demo.model.guards.stop_rule import Derived
from gepard_demo.settings import SamplingSettings

MAX_FRAMES = 120


def test_capped_follows_the_engine_order():
    d = Derived(30, 30, [0.1] * 31)  # stopped at step 30: 30 frames
    assert capped(d, None, 120) is d and capped(d, 31, 120) is d
    c = capped(d, 30, 120)  # step 30 never comes: the force stop ends it after frame 30 is committed
    assert (c.frames, c.stop_fired, c.runaway, c.ended_by, c.p_stop) == (30, False, True, "force_stop", [0.1] * 30)
    r = Derived(120, None, [0.1] * 120, "budget")
    assert capped(r, 120, 120).ended_by == "budget"  # the same frame: the budget is what ended it
    assert capped(r, 12, 120).frames == 12
    auto, off, twelve = (SamplingSettings(force_stop_frames=v) for v in ("auto", None, 12))
    assert source_cap([twelve, auto], "Hello.") == 94 and source_cap([twelve, off], "Hello.") is None
    assert source_cap([twelve, auto], "...") == 12  # "auto" has nothing to scale from: that point errors


@pytest.mark.slow
def test_one_pass_force_stops_equal_direct_runs(tmp_path, tiny_engine):
    from gepard_demo.codec import load_codec

    local = GepardLocal(tiny_engine, load_codec(tiny_engine.codec_source()))
    base = RunConfig(set="smoke", limit=2, batch_size=1,
                     sampling=SamplingSettings(temperature=1.0, max_frames=MAX_FRAMES, repetition_penalty=1.2))
    def points(caps, thresholds=(0.2, 0.5, 0.99)):
        return [(RunConfig(**{**base.__dict__, "sampling": base.sampling.replace(stop_threshold=t, force_stop_frames=c)}),
                 tmp_path / f"S{t:g}_F{c}") for t in thresholds for c in caps]

    pts = points((None, 12, "auto"))
    store = TraceStore(tmp_path / "traces", local)
    counts = one_pass_points(pts, store, log=lambda m: None)
    assert store.generated == 2 and counts["rows"] == 2 * len(pts)  # one source per utterance for all nine points
    # without an "off" point the source is itself force-stopped (at the larger cap, "auto" per text)
    capped_pts = points((8, "auto"), (0.3, 0.99))
    store = TraceStore(tmp_path / "traces", local)
    one_pass_points(capped_pts, store, log=lambda m: None)
    assert store.generated == 2
    ends = set()
    for cfg, d in pts + capped_pts:
        direct = run(cfg, tmp_path / f"direct-{d.name}", engine=local, log=lambda m: None)
        for g, w in zip(rows_of(d), rows_of(direct)):
            for k in ("id", "frames", "stop_fired", "runaway", "ended_by", "force_stopped", "force_stop", "p_stop",
                      "entropy", "nll", "entropy_onset", "seed", "settings"):
                assert g[k] == w[k], (d.name, g["id"], k)
            a, _ = sf.read(d / g["wav"], dtype="int16")
            b, _ = sf.read(direct / w["wav"], dtype="int16")
            assert np.array_equal(a, b), (d.name, g["id"])
            ends.add(g["ended_by"])
    assert ends == {"stop", "force_stop", "budget"}, ends


@pytest.mark.slow
def test_a_sweep_over_the_guardrail_axes(tmp_path, tiny_cache_dir):
    out = tmp_path / "sw"
    assert main(["sweep", "--out", str(out), "--model", "tiny", "--model-cache", str(tiny_cache_dir), "--limit", "2",
                 "--max-frames", "70", "--temperatures", "1.0", "--stop-thresholds", "0.5", "0.99",
                 "--axis", "force_stop_frames=off,20", "--axis", "repetition_penalty=1.0,1.3"]) == 0
    df = pd.read_csv(out / "sweep.csv")
    assert len(df) == 8 and {"derail_rate", "derail_n", "force_stop_rate", "clean_rate"} <= set(df.columns)
    capped_rows = df[df["force_stop_frames"] == 20]
    assert (capped_rows["runaway_rate"] >= capped_rows["force_stop_rate"]).all()
    assert (df[df["force_stop_frames"].isna()]["force_stop_rate"] == 0).all()
    info = json.loads((out / "sweep.json").read_text())
    assert info["last_call"]["sources_generated"] == 2 * 2  # per penalty: one source per utterance
    best = json.loads((out / "sweep_best.json").read_text())
    assert best["default_run"] == "T1_S0.5_force_stop_framesoff_repetition_penalty1"
    drawn = pd.read_csv(out / "charts" / "sweep_runaway_rate.csv")
    assert drawn["default"].sum() == 1 and len(drawn) == 8
    assert (out / "charts" / "sweep_derail_rate.png").is_file()
