"""The fixed-shape decode step (gepard_demo/model/fixed_shape) against the loop it replaces on a GPU.

FixedBatch runs eagerly here (a CPU has no CUDA graphs), which is the very step a graph captures:
every op of `run_step` is what a replay replays. It must make DecodeBatch's frames, frame for frame,
with the same ends, for greedy and seeded rows, top-k, the repetition penalty, guidance with
cfg_frames, a force stop, a stop mid-run, a cloned voice, a resumed row, rows that join, leave
and are cancelled mid-run, and with the stop read one step late (look_ahead, the GPU's way). p_stop
agrees to fp32 rounding (the fixed shape attends over more masked columns: facts §3).
"""

from __future__ import annotations

import pytest
import torch
from tests.support.hold_fixtures import wait_until
from tests.support.loops import running

from gepard_demo.model.fixed_shape import fixed_batch, shapes as shapes_module
from gepard_demo.model.fixed_shape.choice import choose_loop
from gepard_demo.model.fixed_shape.fixed_batch import FixedBatch
from gepard_demo.model.fixed_shape.shapes import StepShapes, bucket
from gepard_demo.model.batch import DecodeBatch
from gepard_demo.settings import SamplingSettings as S
from gepard_demo.model.request import FrameRequest

pytestmark = pytest.mark.numerics  # results depend on the CPU's kernels: make test-isa runs it under other ISAs

P_STOP_TOL = 1e-5


def _voice(engine, seed=3):
    g = torch.Generator().manual_seed(seed)
    return 0.05 * torch.randn(engine.config.num_speaker_prefix, engine.config.hidden_size, generator=g)


def _plan(engine):
    """(step it joins at, name, text, settings, voice, resume frames, step it is cancelled at)."""
    resume = engine.generate(["Resumed later"], S(seed=21, temperature=0.7, max_frames=4, stop_threshold=0.999))[0].frames
    return [
        (0, "seeded", "Hi", S(seed=5, temperature=0.8, max_frames=14, stop_threshold=0.999), None, None, None),
        (0, "greedy", "Hello world, a longer prompt than the others here", S(greedy=True, max_frames=22, stop_threshold=0.999), None, None, None),
        (2, "top_k+penalty", "The weather is sunny", S(seed=9, top_k=3, temperature=0.9, max_frames=16, stop_threshold=0.999,
                                                          repetition_penalty=1.3, repetition_window=4), None, None, None),
        (3, "guided", "Guided one", S(seed=11, cfg_scale=2.0, cfg_frames=4, max_frames=10, stop_threshold=0.999), None, None, None),
        (4, "stops", "Stops early", S(seed=1, max_frames=30, stop_threshold=1e-6), None, None, None),
        (5, "force", "Force stopped", S(seed=2, max_frames=30, stop_threshold=0.999, force_stop_frames=5), None, None, None),
        (5, "cloned", "A cloned voice", S(greedy=True, max_frames=9, stop_threshold=0.999, cfg_scale=1.5), _voice(engine), None, None),
        (6, "cancelled", "Cancelled midway", S(seed=4, max_frames=40, stop_threshold=0.999), None, None, 10),
        (7, "resumed", "Resumed later", S(seed=21, temperature=0.7, max_frames=12, stop_threshold=0.999,
                                         repetition_penalty=1.2, repetition_window=3), None, resume, None),
    ]


def _drive(engine, batch, plan):
    """Step `batch` as the scheduler does; per name: frames, ends, p_stop trace."""
    frames, ends, p_stop, names = {}, {}, {}, {}
    step, last = 0, max(p[0] for p in plan)
    while batch or step <= last:
        for at, name, text, settings, voice, resume, _ in plan:
            if at == step:
                (h,) = batch.admit([engine.request(text, settings, voice, resume)])
                names[h], frames[name], p_stop[name] = name, [], []
        if batch:
            for h, st in batch.sample():
                name = names[h]
                p_stop[name].append(st.p_stop)
                if st.codes is not None:
                    frames[name].append(st.codes)
                if st.done:
                    ends[name] = st.done
            for h, name in names.items():
                cancel_at = next(p[6] for p in plan if p[1] == name)
                if cancel_at == step:
                    batch.cancel(h)
            batch.advance()
        step += 1
    return frames, ends, p_stop


@pytest.mark.parametrize("look_ahead", [False, True], ids=["read-at-once", "read-one-step-late"])
def test_the_fixed_step_makes_the_growing_loops_frames(tiny_engine, look_ahead):
    plan = _plan(tiny_engine)
    want = _drive(tiny_engine, DecodeBatch(tiny_engine.talker), plan)
    shapes = StepShapes(tiny_engine.talker, graphs=False)
    batch = FixedBatch(shapes, look_ahead=look_ahead)
    got = _drive(tiny_engine, batch, plan)
    for name in want[0]:
        assert len(got[0][name]) == len(want[0][name]), name
        assert all(torch.equal(a, b) for a, b in zip(got[0][name], want[0][name])), name
        assert got[1].get(name) == want[1].get(name), name
        assert got[2][name] == pytest.approx(want[2][name], abs=P_STOP_TOL), name
    assert (want[1]["stops"], want[1]["force"], "cancelled" in want[1]) == ("stop", "force_stop", False)
    # The batch grew bucket by bucket as rows joined, and gave every shape back as it emptied.
    assert batch.shape is None and sorted(shapes._free) == [(1, 256), (2, 256), (4, 256), (8, 256), (16, 256)]


def test_a_stop_read_one_step_late_emits_nothing_after_it(tiny_engine):
    """With look_ahead the step behind the stop is already running when the stop is read: it
    commits nothing for the stopped row, and no event of it reaches the caller."""
    shapes = StepShapes(tiny_engine.talker, graphs=False)
    batch = FixedBatch(shapes, look_ahead=True)
    (h,) = batch.admit([tiny_engine.request("Stops early", S(seed=1, max_frames=30, stop_threshold=1e-6))])
    (k,) = batch.admit([tiny_engine.request("Runs on", S(seed=2, max_frames=6, stop_threshold=0.999))])
    seen = {h: [], k: []}
    launches = 0
    real_run = shapes_module.Shape.run

    def counted(self):
        nonlocal launches
        launches += 1
        real_run(self)

    shapes_module.Shape.run = counted
    try:
        while batch:
            for handle, st in batch.sample():
                seen[handle].append(st)
            batch.advance()
    finally:
        shapes_module.Shape.run = real_run
    assert [st.done for st in seen[h]] == [None, "stop"]  # frame 0 commits, step 1 stops
    assert len(seen[k]) == 6 and seen[k][-1].done == "budget"
    assert launches == 7  # six read, one queued behind the last and dropped


def test_rows_join_into_bigger_buckets_and_grow_columns_mid_run(tiny_engine, monkeypatch):
    """A batch that outgrows its shape moves to the next bucket (rows) or a wider one (columns)
    mid-run, and its rows go on as if nothing moved."""
    monkeypatch.setattr(shapes_module, "MIN_COLUMNS", 16)
    monkeypatch.setattr(fixed_batch, "FRAME_HORIZON", 4)
    texts = ["Hi", "Hello world", "The weather is sunny today", "One more"]
    settings = [S(seed=10 + i, temperature=0.8, max_frames=24, stop_threshold=0.999) for i in range(4)]
    plan = [(i * 2, f"r{i}", t, s, None, None, None) for i, (t, s) in enumerate(zip(texts, settings))]
    shapes = StepShapes(tiny_engine.talker, graphs=False)
    batch = FixedBatch(shapes)
    sizes = []
    real_fit = FixedBatch._fit

    def noted(self, rows, columns):
        real_fit(self, rows, columns)
        sizes.append((self.shape.rows, self.shape.columns))

    monkeypatch.setattr(FixedBatch, "_fit", noted)
    got = _drive(tiny_engine, batch, plan)
    want = _drive(tiny_engine, DecodeBatch(tiny_engine.talker), plan)
    for name in want[0]:
        assert all(torch.equal(a, b) for a, b in zip(got[0][name], want[0][name])) and len(got[0][name]) == 24, name
    assert {r for r, _ in sizes} >= {1, 2, 4}  # rows 1 -> 2 -> 4
    assert max(c for _, c in sizes) > 16 * 2  # columns grew past the first buckets


def test_buckets_and_a_shape_lent_to_one_batch_at_a_time(tiny_engine):
    assert [bucket(n) for n in (1, 2, 3, 5, 16, 17)] == [1, 2, 4, 8, 16, 32]
    assert bucket(300, 256) == 512 and bucket(3, 256) == 256
    shapes = StepShapes(tiny_engine.talker, graphs=False)
    a = shapes.acquire(3, 100)
    b = shapes.acquire(3, 100)
    assert a is not b and (a.rows, a.columns) == (4, 256)  # one batch per shape: the second gets its own
    shapes.release(a)
    assert shapes.acquire(4, 256) is a  # given back, lent again without a new build


def test_a_closed_stream_gives_its_shape_back(tiny_engine):
    tiny_engine.use_loop("on")
    try:
        frames = tiny_engine.stream_frames(FrameRequest("This one is stopped by its listener", S(seed=3, max_frames=500, stop_threshold=0.999)))
        for _ in range(5):
            next(frames)
        assert not any(tiny_engine.shapes._free.values())  # lent out while it runs
        frames.close()
        (free,) = tiny_engine.shapes._free.values()
        assert len(free) == 1 and not bool(free[0].tables.active.any())  # back, every slot free
    finally:
        tiny_engine.use_loop("auto")


def test_the_cuda_graphs_setting_chooses_the_loop():
    assert choose_loop("auto", "cpu", True).fixed is False  # DecodeBatch is the faster CPU loop
    auto_gpu = choose_loop("auto", "cuda", True)
    assert (auto_gpu.fixed, auto_gpu.graphs, auto_gpu.required) == (True, True, False)
    on_gpu = choose_loop("on", "cuda:0", True)
    assert (on_gpu.fixed, on_gpu.graphs, on_gpu.required) == (True, True, True)
    on_cpu = choose_loop("on", "cpu", True)
    assert (on_cpu.fixed, on_cpu.graphs) == (True, False) and "eagerly" in on_cpu.describe()
    assert choose_loop("off", "cuda", True).fixed is False
    assert choose_loop("auto", "cuda", False).fixed is False  # Gated-DeltaNet: the growing cache
    with pytest.raises(ValueError, match="cuda_graphs=on needs an all-full-attention backbone"):
        choose_loop("on", "cuda", False)
    with pytest.raises(ValueError, match="cuda_graphs must be one of"):
        choose_loop("sometimes", "cuda", True)


def test_a_failed_capture_runs_eagerly_or_fails_when_required(tiny_engine):
    """Capture is attempted on a device that cannot capture (a CPU): the shape falls back to the
    eager step and the start-up line says why; with cuda_graphs on it is an error."""
    shapes = StepShapes(tiny_engine.talker, graphs=False)
    shapes.graphs = True  # as on a GPU whose capture fails
    shape = shapes.acquire(1, 10)
    assert shape.graph is None and shapes.captures[-1].error
    assert "eager" in shapes.captures[-1].describe()
    required = StepShapes(tiny_engine.talker, graphs=False, required=True)
    required.graphs = True
    with pytest.raises(RuntimeError, match="cuda_graphs=on: capturing the 1x256 decode step failed"):
        required.acquire(1, 10)
    # The eager fallback still decodes: the frames of the growing loop.
    batch = FixedBatch(shapes)
    want = tiny_engine.generate(["Hi"], S(seed=8, max_frames=6, stop_threshold=0.999))[0].frames
    batch.admit([tiny_engine.request("Hi", S(seed=8, max_frames=6, stop_threshold=0.999))])
    got = []
    while batch:
        got += [st.codes for _, st in batch.sample() if st.codes is not None]
        batch.advance()
    assert torch.equal(torch.stack(got), want)


def test_the_scheduler_runs_the_fixed_step_and_a_closed_stream_leaves(tiny_engine):
    """The server's and the page's surface: streams on their own threads through the batch
    scheduler make their solo runs' frames; one closed early leaves the batch."""
    import threading

    from gepard_demo.batching.scheduler import BatchScheduler
    from gepard_demo.host_settings import BatchingSettings

    plan = [("Hello world", S(seed=1, temperature=0.8, max_frames=30, stop_threshold=0.999)),
            ("The weather is sunny today", S(greedy=True, max_frames=20, stop_threshold=0.999, cfg_scale=2.0, cfg_frames=5)),
            ("Stopped by its listener", S(seed=2, max_frames=400, stop_threshold=0.999))]
    solo = [tiny_engine.generate([text], s)[0].frames for text, s in plan]
    with running(tiny_engine, "fixed"):
        scheduler = BatchScheduler(tiny_engine, BatchingSettings(max_batch=4, admission="cap"))
        out = {}

        def listen(i):
            frames = scheduler.stream_frames(FrameRequest(*plan[i]))
            got = []
            for step in frames:
                if step.codes is not None:
                    got.append(step.codes)
                if i == 2 and len(got) == 8:
                    frames.close()
                    break
            out[i] = torch.stack(got)

        threads = [threading.Thread(target=listen, args=(i,)) for i in range(3)]
        try:
            for th in threads:
                th.start()
            for th in threads:
                th.join(120)
            assert torch.equal(out[0], solo[0]) and torch.equal(out[1], solo[1]) and torch.equal(out[2], solo[2][:8])
            wait_until(lambda: scheduler.load()["running"] == 0)
        finally:
            scheduler.close()
        assert not any(s.tables.active.any() for free in tiny_engine.shapes._free.values() for s in free)


@pytest.mark.slow
def test_synth_makes_the_same_audio_with_either_loop(tiny_cache_dir, tmp_path):
    """`synth --cuda-graphs on` (the fixed-shape step, eager on a CPU) and `off`: a real process
    each, the same seed, the same samples."""
    from tests.test_cli import run_cli

    import soundfile as sf

    audio = {}
    for mode in ("on", "off"):
        out = tmp_path / f"{mode}.wav"
        proc = run_cli("synth", "Hello world, this is Gepard.", "-o", str(out), "--seed", "3", "--max-frames", "30",
                       "--cuda-graphs", mode, cache_dir=tiny_cache_dir)
        assert proc.returncode == 0, proc.stderr
        loop = "fixed-shape step, eager" if mode == "on" else "growing cache"
        assert f"decode loop: {loop}" in proc.stderr
        audio[mode] = sf.read(out)[0]
    assert len(audio["on"]) > 0 and (audio["on"] == audio["off"]).all()
