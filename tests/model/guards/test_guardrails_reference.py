"""The authors' guardrails (facts §15) pinned to their runner, written out in tests/support/authors_reference.py:
the repetition penalty (window 32 and window 0 = all history) and the force stop make, at top_k=1,
the frames `GepardRunner.generate` makes, frame by frame, and end where its loop ends: solo, in a
padded running batch beside rows without them (joining mid-run), with guidance, and when a
segment goes on from frames an earlier GPU call made (its window carried). Nothing here takes an
expected frame from our own sampler.
"""

from __future__ import annotations

import pytest
import torch
from tests.support.authors_reference import assert_authors_frames
from tests.support.batch_driver import Driver
from tests.support.loops import LOOPS, running

from gepard_demo.settings import SamplingSettings
from gepard_demo.model.request import FrameRequest

pytestmark = pytest.mark.numerics  # results depend on the CPU's kernels: make test-isa runs it under other ISAs


@pytest.fixture(params=LOOPS)
def tiny_engine(tiny_engine, request):
    """The authors' runner is the reference for both decode loops (tests/support/loops.py)."""
    with running(tiny_engine, request.param):
        yield tiny_engine


TEXT = "Hello world"


def _top1(**kw) -> SamplingSettings:
    # top_k=1 makes the runner deterministic; temperature != 1 and a seed keep our sampler's
    # noise path in play (the penalty must come before top-k for the frames to agree).
    return SamplingSettings(**{"top_k": 1, "temperature": 0.8, "seed": 11, "max_frames": 40,
                               "stop_threshold": 0.999, **kw})


@pytest.mark.parametrize("window", [32, 0, 5], ids=["window-32", "all-history", "window-5"])
def test_the_repetition_penalty_makes_the_runners_frames(tiny_engine, tiny_model_dir, window):
    s = _top1(repetition_penalty=1.3, repetition_window=window)
    got = tiny_engine.generate([TEXT], s)[0]
    assert got.num_frames == 40 and got.ended_by == "budget"
    assert_authors_frames(tiny_engine, tiny_model_dir, TEXT, s, got)
    plain = tiny_engine.generate([TEXT], _top1())[0]
    assert not torch.equal(plain.frames, got.frames)  # the penalty changed frames: the check had work to do


def test_windows_differ_from_each_other(tiny_engine):
    # The window's length is used, not only whether there is one.
    runs = [tiny_engine.generate([TEXT], _top1(repetition_penalty=1.3, repetition_window=w))[0].frames for w in (2, 0)]
    assert not torch.equal(*runs)


def test_the_force_stop_ends_the_run_where_the_runner_does(tiny_engine, tiny_model_dir):
    s = _top1(force_stop_frames=17)
    got = tiny_engine.generate([TEXT], s)[0]
    assert (got.num_frames, got.ended_by, got.runaway, got.force_stopped) == (17, "force_stop", True, True)
    assert len(got.p_stop) == 17 and len(got.nll) == 17
    assert_authors_frames(tiny_engine, tiny_model_dir, TEXT, s, got, force_stop=17)
    whole = tiny_engine.generate([TEXT], _top1())[0]
    assert torch.equal(whole.frames[:17], got.frames)  # the guard only ends the run


def test_the_budget_wins_when_both_fall_on_the_same_frame(tiny_engine, tiny_model_dir):
    # The runner's loop is range(1, max_frames): at max_frames it ends before its force check.
    s = _top1(max_frames=12, force_stop_frames=12)
    got = tiny_engine.generate([TEXT], s)[0]
    assert (got.num_frames, got.ended_by) == (12, "budget")
    assert_authors_frames(tiny_engine, tiny_model_dir, TEXT, s, got)


def test_a_stop_head_that_fires_first_is_the_end(tiny_engine, tiny_model_dir):
    s = _top1(stop_threshold=0.2, force_stop_frames=200, max_frames=300)  # tiny: p_stop 0.29 at frame 24
    got = tiny_engine.generate([TEXT], s)[0]
    assert got.ended_by == "stop" and got.num_frames < 200
    assert_authors_frames(tiny_engine, tiny_model_dir, TEXT, s, got, force_stop=200)


@pytest.mark.parametrize("cfg_frames", [None, 10], ids=["every-frame", "onset-10"])
def test_guided_and_penalized_together(tiny_engine, tiny_model_dir, cfg_frames):
    # The penalty acts on the guided logits: penalizing each branch before guidance differs
    # only where a seen code's logits change sign between the branches, so guide long enough.
    # (Measured on tiny: with every frame guided, that ordering first changes a frame at 53.)
    s = _top1(repetition_penalty=1.6, repetition_window=8, cfg_scale=3.0, cfg_frames=cfg_frames, force_stop_frames=64,
              max_frames=80)
    got = tiny_engine.generate([TEXT], s)[0]
    assert got.ended_by == "force_stop" and got.num_frames == 64
    assert_authors_frames(tiny_engine, tiny_model_dir, TEXT, s, got, force_stop=64)


def test_in_a_padded_running_batch_beside_rows_without_them(tiny_engine, tiny_model_dir):
    e = tiny_engine
    d = Driver(e)
    d.admit("A neighbour without guardrails that talks for a while.", SamplingSettings(seed=5, max_frames=30,
                                                                                       stop_threshold=0.999))
    d.step()
    penalized = _top1(repetition_penalty=1.3, repetition_window=6, max_frames=25)
    p = d.admit(TEXT, penalized)  # joins mid-run, shorter prompt: left-padded
    d.step()
    forced = _top1(force_stop_frames=9, seed=4)
    f = d.admit("Another one.", forced)
    d.admit("A much longer neighbour joins later, so everything running is padded to its prompt.",
            _top1(repetition_penalty=1.1, max_frames=12))
    d.run_out()
    for handle, text, settings, force in ((p, TEXT, penalized, None), (f, "Another one.", forced, 9)):
        result = _as_result(d.frames[handle], d.ends[handle])
        assert_authors_frames(e, tiny_model_dir, text, settings, result, force_stop=force)
    assert d.ends[f] == "force_stop" and len(d.frames[f]) == 9


def test_a_segment_resumed_in_another_call_keeps_its_window(tiny_engine):
    # ZeroGPU: a segment that outlasts its GPU call goes on in the next from its frames
    # (a FrameRequest's resume); the penalty must see those frames in its window.
    s = _top1(repetition_penalty=1.3, repetition_window=16, max_frames=36)
    whole = torch.stack([st.codes for st in tiny_engine.stream_frames(FrameRequest(TEXT, s)) if st.codes is not None])
    first = whole[:20]
    rest = [st.codes for st in tiny_engine.stream_frames(FrameRequest(TEXT, s, resume=first)) if st.codes is not None]
    assert torch.equal(torch.cat([first, torch.stack(rest)]), whole)
    # Without the carried window the continuation differs (so the equality above is not luck).
    s_nowindow = s.replace(repetition_window=1)
    other = [st.codes for st in tiny_engine.stream_frames(FrameRequest(TEXT, s_nowindow, resume=first)) if st.codes is not None]
    assert not torch.equal(torch.stack(other), torch.stack(rest))


class _as_result:
    """The fields assert_authors_frames reads, from a batch row's frames."""

    def __init__(self, frames, ended_by):
        self.frames = torch.stack(frames)
        self.ended_by = ended_by
