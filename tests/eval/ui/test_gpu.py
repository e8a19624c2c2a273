"""The Eval tab behind a GPU boundary: each batch is one GPU call in a forked worker (as on a
ZeroGPU Space), scored and reported in this process; its rows equal an in-process run's. And
the bounds a public page puts on a run."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import soundfile as sf
from tests.support.app_fixtures import tiny_codec  # noqa: F401  (fixture)

from eval.engines.local import GepardLocal
from eval.runs.run import RunConfig, RunError, run
from eval.ui.common import EvalLimits, GpuBatchEngine, LockedEngine, eval_engine_from_provider
from eval.ui.tab import run_eval
from gepard_demo.codec import load_codec
from gepard_demo.model.engine import GepardEngine
from gepard_demo.settings import SamplingSettings
from gepard_demo.ui.hosts.gpu_host import GpuHost
from gepard_demo.ui.hosts.model_host import ModelHost

pytestmark = pytest.mark.forks  # a GPU worker is forked (pytest.ini)


@pytest.fixture(scope="module")
def gpu_host(tiny_cache_dir):
    engine = GepardEngine.load("tiny", cache_dir=tiny_cache_dir)
    host = GpuHost.around(ModelHost(engine, load_codec(engine.codec_source()), "tiny"), "emulate")
    yield host
    host.gpu.close()


def _rows(d):
    return [json.loads(line) for line in (d / "rows.jsonl").read_text().splitlines()]


def test_batches_in_gpu_calls_equal_an_in_process_run(gpu_host, tiny_engine, tiny_codec, tmp_path):
    engine = eval_engine_from_provider(gpu_host)
    assert isinstance(engine, GpuBatchEngine) and engine.describe()["gpu_calls"] == "forked"
    cfg = RunConfig(model="tiny", set="smoke", limit=4, batch_size=2, sampling=SamplingSettings(max_frames=18))
    run(cfg, tmp_path / "gpu", engine=engine, log=lambda m: None)
    run(cfg, tmp_path / "local", engine=LockedEngine(GepardLocal(tiny_engine, tiny_codec), None), log=lambda m: None)
    gpu, local = _rows(tmp_path / "gpu"), _rows(tmp_path / "local")
    assert [r["id"] for r in gpu] == [r["id"] for r in local] and len(gpu) == 4
    for a, b in zip(gpu, local):
        assert (a["frames"], a["seed"], a["stop_fired"]) == (b["frames"], b["seed"], b["stop_fired"])
        assert a["p_stop"] == pytest.approx(b["p_stop"])
        wa, wb = sf.read(tmp_path / "gpu" / a["wav"])[0], sf.read(tmp_path / "local" / b["wav"])[0]
        assert np.array_equal(wa, wb)


def test_a_public_page_bounds_each_run(gpu_host, tmp_path):
    args = dict(set_name="smoke", set_file=None, limit=0, batch_size=2, base_seed=1, engine_name="local",
                temperature=0.3, top_k=0, greedy=False, stop_threshold=0.5, max_frames=2000, fade_ms=0, silence_ms=0,
                asr_backend="faster-whisper", asr_model="tiny.en", vad=True)
    public = EvalLimits.public()
    with pytest.raises(RunError, match="max_frames: 2000 frames is more than this public page runs \\(1000\\)"):
        run_eval(gpu_host, tmp_path, "big", args, limits=public)
    with pytest.raises(RunError, match="the set .*210 utterances"):
        run_eval(gpu_host, tmp_path, "all", {**args, "set_name": "core", "max_frames": 10}, limits=public)
    with pytest.raises(RunError, match="batch_size: 64 rows"):
        run_eval(gpu_host, tmp_path, "wide", {**args, "batch_size": 64, "max_frames": 10}, limits=public)
    public.check(6, 100, 4, points=9)  # a 3 x 3 sweep of smoke: 54 rows, within 120
    with pytest.raises(RunError, match="the sweep: 54 rows"):
        EvalLimits(max_sweep_rows=50).check(6, 100, 4, points=9)
    assert not list(tmp_path.iterdir())  # refused before anything was written


def test_a_public_pages_bounds_are_reached_not_just_exceeded():
    """Each bound of a public page at its value runs and one past it is refused naming that bound:
    30 utterances, 1000 frames, batches of 8, sweeps of 120 rows (4 points x 30 utterances)."""
    public = EvalLimits.public()
    public.check(30, 1000, 8, points=4)  # every bound met exactly
    for args, named in (((31, 1000, 8), "the set (after the limit): 31 utterances is more than this public page runs (30)"),
                        ((30, 1001, 8), "max_frames: 1001 frames is more than this public page runs (1000)"),
                        ((30, 1000, 9), "batch_size: 9 rows is more than this public page runs (8)"),
                        ((11, 1000, 8, 11), "the sweep: 121 rows (points x utterances) is more than this public page runs (120)")):
        with pytest.raises(RunError, match=re.escape(named)):
            public.check(*args)
