"""One-pass stop-threshold sweep: derived utterances equal direct runs, bit for bit (solo)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
import torch
from tests.support.eval_fixtures import rows_of

from eval.engines.local import GepardLocal
from eval.runs.run import RunConfig, run
from eval.scoring.transcript_cache import CachedTranscriber
from eval.sweeps.thresholds import TraceStore, derive, one_pass_points
from gepard_demo.settings import SamplingSettings

TEXT = "Hello there, how are you?"
MAX_FRAMES = 40


def test_derive_follows_the_engine_stop_rule():
    p = [0.9, 0.2, 0.4, 0.1, 0.6, 0.3]  # step 0 never stops; a stop step commits nothing
    assert derive(p, 6, 0.95, 0.95, 6) == derive(p, 6, 0.95, 0.7, 6)  # nothing above 0.7 after step 0
    d = derive(p, 6, 0.95, 0.7, 6)
    assert (d.frames, d.stop_fired, d.stop_frame, d.runaway, d.p_stop) == (6, False, None, True, p)
    d = derive(p, 6, 0.95, 0.5, 6)
    assert (d.frames, d.stop_fired, d.stop_frame, d.runaway, d.p_stop) == (4, True, 4, False, p[:5])
    d = derive(p, 6, 0.95, 0.3, 6)
    assert (d.frames, d.stop_fired, d.p_stop) == (2, True, p[:3])
    d = derive(p, 6, 0.95, 0.1, 6)
    assert (d.frames, d.stop_fired) == (1, True)  # the first frame always commits
    # a source whose stop fired: p has one more entry than frames
    s = [0.1, 0.2, 0.3, 0.8]
    assert derive(s, 3, 0.7, 0.7, 1000).frames == 3 and derive(s, 3, 0.7, 0.25, 1000).frames == 2
    with pytest.raises(ValueError, match="above the source"):
        derive(p, 6, 0.5, 0.6, 6)
    with pytest.raises(ValueError, match="neither stopped nor reached its budget"):
        derive(p, 6, 0.95, 0.7, 1000)  # a different budget than the source's is refused


def _thresholds_with_distinct_stops(p_stop: list[float]) -> list[float]:
    """Thresholds halfway between successive record highs of p_stop[1:]: each stops elsewhere."""
    records, best = [], -1.0
    for x in p_stop[1:]:
        if x > best:
            records.append(x)
            best = x
    lows = [records[0] / 2] + [(a + b) / 2 for a, b in zip(records, records[1:])]
    return sorted(set(lows))


@pytest.fixture(scope="module")
def source(tiny_engine):
    s = SamplingSettings(temperature=1.0, stop_threshold=0.99, max_frames=MAX_FRAMES, seed=7)
    return s, tiny_engine.generate([TEXT], s)[0]


def test_derived_frames_equal_direct_solo_runs(tiny_engine, source):
    s, src = source
    assert src.runaway  # random weights: the source run hits the budget, still an exact source
    thresholds = _thresholds_with_distinct_stops(src.p_stop)
    outcomes = set()
    for t in thresholds:
        direct = tiny_engine.generate([TEXT], s.replace(stop_threshold=t))[0]
        d = derive(src.p_stop, src.num_frames, s.stop_threshold, t, s.max_frames)
        assert torch.equal(src.frames[: d.frames], direct.frames)
        assert (d.frames, d.stop_fired, d.stop_frame, d.runaway) == \
            (direct.num_frames, direct.stop_fired, direct.stop_frame, direct.runaway)
        assert d.p_stop == direct.p_stop
        outcomes.add(d.frames)
    assert len(outcomes) >= 3


def test_a_force_stopped_source_tells_every_lower_threshold(tiny_engine, source):
    # A force stop does not depend on the threshold: from a force-stopped run, each lower threshold
    # either stops earlier on the same trace or is force-stopped at the same frame, as a direct run.
    s, whole = source
    force = 25
    fs = s.replace(force_stop_frames=force)
    src = tiny_engine.generate([TEXT], fs)[0]
    assert src.ended_by == "force_stop" and src.num_frames == force
    ends = set()
    for t in [*_thresholds_with_distinct_stops(whole.p_stop[:force]), 0.98]:
        direct = tiny_engine.generate([TEXT], fs.replace(stop_threshold=t))[0]
        d = derive(src.p_stop, src.num_frames, fs.stop_threshold, t, fs.max_frames, force_stop=force)
        assert torch.equal(src.frames[: d.frames], direct.frames)
        assert (d.frames, d.stop_fired, d.runaway, d.ended_by) == \
            (direct.num_frames, direct.stop_fired, direct.runaway, direct.ended_by)
        ends.add(d.ended_by)
    assert ends == {"stop", "force_stop"}
    with pytest.raises(ValueError, match="neither stopped nor reached its budget"):  # without its force stop: no source
        derive(src.p_stop, src.num_frames, fs.stop_threshold, 0.98, fs.max_frames)


def test_one_pass_run_folders_equal_brute_force_runs(tmp_path, tiny_engine, source):
    from gepard_demo.codec import load_codec

    _, src = source
    local = GepardLocal(tiny_engine, load_codec(tiny_engine.codec_source()))
    thresholds = _thresholds_with_distinct_stops(src.p_stop)[:3] + [0.99]
    base = RunConfig(set="smoke", limit=2, batch_size=1, sampling=SamplingSettings(temperature=1.0, max_frames=MAX_FRAMES))
    pts = [(base.__class__(**{**base.__dict__, "sampling": base.sampling.replace(stop_threshold=t)}), tmp_path / f"S{t:g}")
           for t in thresholds]
    store = TraceStore(tmp_path / "traces", local)
    counts = one_pass_points(pts, store, log=lambda m: None)
    assert store.generated == 2 and counts["rows"] == 2 * len(pts)
    assert counts["decodes"] <= counts["rows"]
    frames_seen = set()
    for cfg, d in pts:
        direct = run(cfg, tmp_path / f"direct-{d.name}", engine=local, log=lambda m: None)
        got, want = rows_of(d), rows_of(direct)
        for g, w in zip(got, want):
            for k in ("id", "frames", "stop_fired", "stop_frame", "runaway", "p_stop", "seed", "duration_s", "settings"):
                assert g[k] == w[k], (cfg.sampling.stop_threshold, k)
            a, _ = sf.read(d / g["wav"], dtype="int16")
            b, _ = sf.read(direct / w["wav"], dtype="int16")
            assert np.array_equal(a, b)
            frames_seen.add(g["frames"])
            assert g["one_pass"]["source_threshold"] == 0.99
    assert len(frames_seen) >= 3
    # a rerun is a resume: nothing is generated or written again
    store2 = TraceStore(tmp_path / "traces", local)
    assert one_pass_points(pts, store2, log=lambda m: None)["rows"] == 0 and store2.generated == 0


def test_cached_transcriber_answers_each_audio_once(tmp_path):
    calls = []

    class Fake:
        model_path = "fake"

        def transcribe(self, audio, sr):
            calls.append(len(audio))
            return f"n{len(audio)}"

    c = CachedTranscriber(None, tmp_path / "c.jsonl", inner=Fake())
    a, b = np.zeros(100, np.float32), np.ones(100, np.float32)
    assert [c.transcribe(x, 22050) for x in (a, b, a, b)] == ["n100"] * 4
    assert len(calls) == 2 and (c.hits, c.misses) == (2, 2)
    again = CachedTranscriber(None, tmp_path / "c.jsonl", inner=Fake())  # persisted across restarts
    assert again.transcribe(b, 22050) == "n100" and len(calls) == 2
    assert again.transcribe(b, 16000) == "n100" and len(calls) == 3  # the rate is part of the key
    assert len(json.loads((tmp_path / "c.jsonl").read_text().splitlines()[0])["key"]) == 64


def test_sweep_axes_are_generic():
    from eval.runs.run import RunError
    from eval.sweeps.grid import SweepConfig, axis_words, parse_axes, point_name

    assert parse_axes(["top_k=0,4", "greedy=false,true"]) == (("top_k", (0, 4)), ("greedy", (False, True)))
    for bad in ("colour=1,2", "top_k=", "top_k=a,b", "seed=1,2"):
        with pytest.raises(RunError):
            parse_axes([bad])
    cfg = SweepConfig(swept=(("temperature", (0.3,)), ("stop_threshold", (0.3, 0.5)), *parse_axes(["top_k=0,4"])))
    pts = cfg.points()
    assert len(pts) == 4 and [point_name(p) for p in pts][:2] == ["T0.3_S0.3_top_k0", "T0.3_S0.5_top_k0"]
    with pytest.raises(RunError, match="repeats"):
        SweepConfig(swept=(("stop_threshold", (0.5, 0.5)),))
    with pytest.raises(Exception, match="stop_threshold"):
        SweepConfig(swept=(("stop_threshold", (1.5,)),))
    # the default axes come from the settings' declarations, filled in where left out, the stop
    # threshold last (it varies fastest: one generation serves its points)
    only = SweepConfig(swept=(("top_k", (0, 4)),))
    assert [n for n, _ in only.axes()] == ["temperature", "top_k", "stop_threshold"]
    assert dict(only.axes())["temperature"] == (0.3, 0.7, 1.0) and len(only.points()) == 18
    with pytest.raises(RunError, match="given twice"):
        SweepConfig(swept=(("top_k", (0,)), ("top_k", (4,))))
    assert axis_words("stop_threshold") == "stop thresholds" and axis_words("min_frames") == "min frames values"


def test_cfg_scale_is_a_sweep_axis_and_its_one_pass_prefixes_stay_exact(tiny_engine):
    """With guidance on, the trajectory still ignores the threshold until the stop fires."""
    from eval.sweeps.grid import SweepConfig, parse_axes, point_name

    axes = parse_axes(["cfg_scale=1,2.5"])
    assert axes == (("cfg_scale", (1.0, 2.5)),)
    pts = SweepConfig(swept=(("temperature", (1.0,)), ("stop_threshold", (0.5,)), *axes)).points()
    assert [point_name(p) for p in pts] == ["T1_S0.5_cfg_scale1", "T1_S0.5_cfg_scale2.5"]
    s = SamplingSettings(temperature=1.0, stop_threshold=0.99, max_frames=MAX_FRAMES, seed=7, cfg_scale=2.5)
    src = tiny_engine.generate([TEXT], s)[0]
    plain = tiny_engine.generate([TEXT], s.replace(cfg_scale=1.0))[0]
    assert not torch.equal(src.frames[:5], plain.frames[:5])  # guidance really changed the frames
    for t in _thresholds_with_distinct_stops(src.p_stop)[:3]:
        direct = tiny_engine.generate([TEXT], s.replace(stop_threshold=t))[0]
        d = derive(src.p_stop, src.num_frames, s.stop_threshold, t, s.max_frames)
        assert torch.equal(src.frames[: d.frames], direct.frames)
        assert (d.frames, d.stop_fired) == (direct.num_frames, direct.stop_fired)
