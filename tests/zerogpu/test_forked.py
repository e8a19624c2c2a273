"""The GPU behind a process boundary (gepard_demo/zerogpu), on the CPU: GPU calls in a forked
worker, pickled in and out, as ZeroGPU runs them. Each test fails if state has to cross the
boundary in memory: the worker's writes are never seen here, and the model refuses to run in
this (the main) process.
"""

from __future__ import annotations

import os
import tempfile
import threading

import numpy as np
import pytest
import soundfile as sf
import torch
from tests.support.hold_fixtures import ENDLESS_SEED, wait_until

from gepard_demo.codec import load_codec
from gepard_demo.model.engine import GepardEngine
from gepard_demo.settings import SamplingSettings, SettingsError, StreamSettings
from gepard_demo.streaming.session import SynthesisSession
from gepard_demo.streaming.seams import SessionRequest
from gepard_demo.streaming.text_input import TextError
from gepard_demo.ui.jobs.turns import FairLock
from gepard_demo.zerogpu import tasks
from gepard_demo.zerogpu.budget import GpuBudget
from gepard_demo.zerogpu.forked import Forked
from gepard_demo.zerogpu.resident import OutsideGpuCall, Resident
from gepard_demo.zerogpu.runners import InProcess, ZeroGpu
from gepard_demo.zerogpu.session import GpuSession

pytestmark = pytest.mark.forks  # a GPU worker is forked (pytest.ini)

STREAM = StreamSettings(first_chunk_frames=4, chunk_frames=6, fade_ms=10.0)


@pytest.fixture(scope="module")
def resident(tiny_cache_dir):
    """A model of its own (the gate's hooks stay on it), placed the way ZeroGPU needs."""
    engine = GepardEngine.load("tiny", cache_dir=tiny_cache_dir)
    return Resident.place(engine, load_codec(engine.codec_source()), guarded=True)


@pytest.fixture(scope="module")
def forked(resident):
    runner = Forked(resident)
    yield runner
    runner.close()


@pytest.fixture(scope="module")
def reference(tiny_cache_dir):
    """Solo in-process results from an ungated engine, for equality checks."""
    engine = GepardEngine.load("tiny", cache_dir=tiny_cache_dir)
    return engine, load_codec(engine.codec_source())


def _session(runner, text="Hello there, how are you?", speaker=None, **sampling):
    s = SamplingSettings(**{"seed": 7, "max_frames": 30, "stop_threshold": 0.999, **sampling})
    return GpuSession(runner, SessionRequest(text, s, STREAM, speaker=speaker), sample_rate=22050)


def test_the_model_does_not_run_in_the_main_process(resident):
    with pytest.raises(OutsideGpuCall, match="outside a GPU call"):
        resident.engine.generate(["Hi."], SamplingSettings(max_frames=2))
    with pytest.raises(OutsideGpuCall):
        resident.codec.decode(np.zeros((2, 32), np.int64))
    assert resident.engine.default_sampling().max_frames > 0  # config needs no GPU


def test_a_stream_across_the_boundary_equals_the_in_process_one(forked, reference):
    session = _session(forked)
    chunks = list(session)
    direct = SynthesisSession(*reference, SessionRequest(session.text, session.sampling, STREAM))
    want = list(direct)
    assert [len(c.samples) for c in chunks] == [len(c.samples) for c in want]
    assert np.array_equal(session.audio(), direct.audio())
    st = session.stats
    assert st.complete and not st.cancelled and st.frames == 30 == len(st.p_stop)
    assert st.p_stop == pytest.approx(direct.stats.p_stop) and st.seed == 7 and st.ttfa_s is not None


def test_the_worker_is_another_process_and_its_writes_stay_there(forked, resident):
    pid = forked.call(_write_in_worker, duration_s=5)
    assert pid != os.getpid()
    assert resident.no_cloning is None  # the worker set it on its own copy
    assert forked.call(_write_in_worker, duration_s=5) == pid  # kept for the next call, as ZeroGPU does


def _write_in_worker(resident):
    resident.no_cloning = "written in the worker"
    return os.getpid()


def test_stop_ends_the_call_within_a_frame(forked):
    session = _session(forked, text="This one would never end by itself.", seed=ENDLESS_SEED)
    it = iter(session)
    next(it)
    session.cancel()
    assert list(it) == []
    st = session.stats
    assert st.cancelled and not st.complete and st.frames <= STREAM.first_chunk_frames + 2
    assert _session(forked, max_frames=5).run().size == 5 * 1024  # the worker is free again


LONG = " ".join(f"Sentence number {k} says a few more words about the weather." for k in range(1, 15))


def test_stop_ends_a_batched_call_and_frees_every_row(forked, reference, monkeypatch):
    """Three segments in one call, as three rows of its batch, the first never ending by itself
    (so the Generate would go on call after call): Stop after the first chunk ends the call at its
    next step, drops every row and makes no further call, through the forked worker and in this
    process, where the call's batch can be watched."""
    from gepard_demo.zerogpu import batched

    sampling = dict(seed=ENDLESS_SEED, max_frames=1000, stop_threshold=0.999)
    session = _session(forked, text=LONG, **sampling)
    assert len(session.segments) == 3 and session.request().plan.rows == 3
    it = iter(session)
    next(it)
    session.cancel()
    assert list(it) == []
    st = session.stats
    assert st.cancelled and len(st.gpu_asks_s) == 1 and st.frames <= STREAM.first_chunk_frames + 2
    assert _session(forked, max_frames=5).run().size == 5 * 1024  # the worker is free again

    calls = []

    class Watched(batched.CallBatch):
        steps = 0

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            calls.append(self)

        def step(self):
            self.steps += 1
            super().step()

    monkeypatch.setattr(tasks, "CallBatch", Watched)
    session = _session(InProcess(Resident.place(*reference, guarded=False)), text=LONG, **sampling)
    it = iter(session)
    next(it)
    (call,) = calls
    assert len(call.batch) == 3  # every segment of the call is a live row
    at_stop = call.steps
    session.cancel()
    assert list(it) == []
    assert call.closed and call.batch is None  # every row dropped
    assert call.steps <= at_stop + 1 and len(session.stats.gpu_asks_s) == 1 and session.stats.cancelled


def test_arguments_and_results_are_pickled(forked):
    with pytest.raises(Exception, match="pickle|Pickl"):
        forked.call(_write_in_worker, lambda: None, duration_s=5)
    prefix = forked.call(tasks.speaker_prefix, _voice(), 22050, duration_s=5)
    assert isinstance(prefix, tasks.Prefix) and prefix.tokens.shape[0] == 8 and prefix.tokens.device.type == "cpu"


def test_failures_come_back_with_their_message(forked):
    with pytest.raises(tasks.GpuCallError, match="ZeroDivisionError: division by zero"):
        forked.call(_fail, duration_s=5)
    session = _session(forked, speaker=torch.zeros(3, 3))  # a prefix of the wrong shape: the worker's error, here
    with pytest.raises(tasks.GpuCallError, match="IndexError: index 3 is out of bounds"):
        list(session)


def _fail(resident):
    return 1 / 0


def test_a_worker_that_dies_ends_the_call_and_the_next_gets_a_new_one(forked):
    first = forked.call(_write_in_worker, duration_s=5)
    with pytest.raises(tasks.GpuCallError, match="died"):
        forked.call(_die, duration_s=5)
    assert forked.call(_write_in_worker, duration_s=5) not in (first, os.getpid())


def _die(resident):
    os._exit(3)


def test_requests_are_checked_before_any_call():
    calls = []

    class Recorder:
        def stream(self, request):
            calls.append(request)
            return (item for item in ())  # a generator: closable, as every runner's stream is

    with pytest.raises(TextError):
        _session(Recorder(), text="   ")
    with pytest.raises(SettingsError):
        _session(Recorder(), temperature=-1.0)
    session = _session(Recorder(), text="  Spaced   out \u200b text ")
    list(session)
    assert [r.utterance.text for r in calls] == ["Spaced out text"] and calls[0].utterance.sampling.seed == 7


def test_zerogpu_runner_outside_a_zerogpu_space_runs_in_process(resident, reference):
    """spaces.GPU is a no-op off ZeroGPU: the same wrappers run in this thread (gate opened by
    the task, as in ZeroGPU's worker), and each call asks for what its own request was sized to."""
    runner = ZeroGpu(Resident.place(*reference, guarded=False))
    session = _session(runner, max_frames=8)
    assert session.run().size == 8 * 1024 and session.stats.complete
    request = _session(runner, max_frames=1000, cfg_scale=2.0, cfg_frames=20).request()
    assert runner._stream_duration(request) == request.ask_s
    assert runner.call(_write_in_worker, duration_s=3) == os.getpid()
    assert isinstance(InProcess(runner.resident).call(tasks.speaker_prefix, _voice(), 22050), tasks.Prefix)


def test_fair_lock_hands_the_engine_to_the_longest_waiter():
    lock, order = FairLock(), []
    lock.acquire()
    waiter = threading.Thread(target=lambda: (lock.acquire(), order.append("visitor"), lock.release()))
    waiter.start()
    wait_until(lambda: len(lock._queue) == 1, what="the visitor in line")
    lock.release()
    assert lock.acquire()  # the eval batch asks again at once ...
    order.append("eval")
    lock.release()
    waiter.join()
    assert order == ["visitor", "eval"]  # ... and gets it after the visitor
    lock.acquire()
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    assert not lock.acquire(abort=stop.is_set) and not lock.acquire(timeout=0.1)
    lock.release()


def _voice(seconds: float = 4.0, rate: int = 22050) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * 180 * t) * (1 + np.sin(2 * np.pi * 3 * t))).astype(np.float32)


def test_a_take_made_on_the_gpu_recuts_through_a_gpu_call(forked, reference, resident):
    """The call sends the take's frames back, so the page can re-cut it; the re-cut's decode is a
    GPU call of its own (the main process's codec is gated), and equals a direct run."""
    from types import SimpleNamespace

    from gepard_demo.ui.hosts.gpu_host import GpuHost
    from gepard_demo.ui.page.take_panel import TakeHandlers
    from gepard_demo.ui.takes import Take

    session = _session(forked, max_frames=40, stop_threshold=0.99)
    session.run()
    codes = session.codes()
    assert codes is not None and codes.shape == (session.stats.frames, 32)
    take = Take(1, session.text, {}, session.sampling, STREAM, session.stats.as_dict(), codes, None, "tiny")
    p = take.p_stop
    low = round(float(np.floor(max(p[1:20]) * 100) / 100 - 0.01), 2)
    host = GpuHost(forked, resident, GpuBudget(), "tiny")  # the page's host under ZeroGPU
    with tempfile.TemporaryDirectory() as wav_dir:
        path, note = TakeHandlers(host, SimpleNamespace(wav_dir=wav_dir)).recut([take], take.label, low)
        audio, _ = sf.read(path, dtype="float32")
    direct = SynthesisSession(
        *reference, SessionRequest(session.text, session.sampling.replace(stop_threshold=low), STREAM)
    )
    direct.run()
    assert f"stops at frame {direct.stats.stop_frame}" in note
    assert len(audio) == len(direct.audio()) and np.max(np.abs(audio - direct.audio())) <= 1e-5
