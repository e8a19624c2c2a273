"""Continuous batching: requests that join a running batch, leave it early or are cancelled make
the frames of their solo runs, on both tiny layouts, with guidance and a cloned voice mixed in.

As facts §3 says, a batch may change the last bits of the logits: a sampled request is held to
its solo run on the noise it draws (its own generator: the same stream in any batch) and on
every frame whose sampling margin is clearly above fp32 rounding; greedy requests (the guided
and the cloned one) must equal their solo runs exactly.
"""

from __future__ import annotations

import pytest
import torch
from tests.support.batch_driver import Driver

from gepard_demo.model.sampling import RowSampler
from gepard_demo.settings import SamplingSettings
from gepard_demo.speed.fidelity import trace

pytestmark = pytest.mark.numerics  # results depend on the CPU's kernels: make test-isa runs it under other ISAs

SHORT, MID = "Hi", "Hello world"
LONG = "The weather is sunny today, with a light breeze from the west, and rain is not expected."
LONGEST = LONG + " Tomorrow the wind turns north and the temperature falls by about five degrees."
MARGIN_TOL = 1e-3  # fp32 logits move by ~1e-6 between batch layouts; a score gap below this is a tie


def _sampled(seed, frames):
    return SamplingSettings(seed=seed, temperature=0.8, max_frames=frames, stop_threshold=0.999)


def _greedy(frames, **kw):
    return SamplingSettings(**{"greedy": True, "max_frames": frames, "stop_threshold": 0.999, **kw})


def _speaker(engine):
    """A voice other than the default (a stand-in for a reference's prefix); None when the
    checkpoint has no speaker slots (the hybrid tiny layout is trained without cloning)."""
    k = engine.config.num_speaker_prefix
    if k == 0:
        return None
    gen = torch.Generator().manual_seed(3)
    return 0.05 * torch.randn(k, engine.config.hidden_size, generator=gen)


def _assert_follows_solo(engine, text, settings, got, solo_frames, speaker=None):
    """got equals the solo run's frames, except that from the first step where they part, the
    heads that chose otherwise were within rounding of their runner-up."""
    n = min(len(got), len(solo_frames))
    differ = got[:n] != solo_frames[:n]
    steps = differ.any(-1).nonzero()
    if not len(steps):
        return n
    first = int(steps[0, 0])
    assert not settings.greedy and speaker is None, f"a greedy / cloned request parted from its solo run at step {first}"
    sampler = RowSampler.create(settings, engine.device)
    noise = torch.stack([sampler.noise(torch.Size((32, 8)), engine.device) for _ in range(first + 1)])
    ref = trace(engine.talker, engine.prompt_ids(text), first + 1, frames=solo_frames)
    top2 = (ref.logits[: first + 1] / settings.temperature + noise).topk(2, dim=-1).values
    margins = top2[..., 0] - top2[..., 1]
    assert (margins[first][differ[first]] < MARGIN_TOL).all(), (text, first)
    return first


def test_requests_join_leave_and_cancel_mid_run(layout_engine):
    e = layout_engine
    voice = _speaker(e)
    d = Driver(e)
    plan = {
        "a": (SHORT, _sampled(5, 40), None),
        "b": (LONG, _greedy(18, cfg_scale=2.0, cfg_frames=6), None),  # guided: a second row for 6 frames
        "c": (MID, _greedy(30), voice),  # another voice, cancelled mid-run
        "d": (LONGEST, _sampled(9, 14), None),  # the longest prompt: the running rows get left-padded
    }
    h = {"a": d.admit(*plan["a"])}
    for _ in range(4):
        d.step()
    widths = [d.batch.tensors.mask.shape[1]]
    h["b"] = d.admit(*plan["b"])
    h["c"] = d.admit(*plan["c"])
    assert d.batch.row_count == 4  # a, b, b's guidance row, c
    for _ in range(4):
        d.step()
    d.batch.cancel(h["c"])  # between steps: its row leaves now
    assert len(d.batch) == 2 and d.batch.row_count == 3
    h["d"] = d.admit(*plan["d"])
    widths.append(d.batch.tensors.mask.shape[1])
    assert widths[1] > widths[0]  # really re-padded for a longer newcomer
    d.step()
    assert d.batch.row_count == 4
    while d.batch:
        d.step()
        if len(d.batch) == 1:
            assert bool(d.batch.tensors.mask.all())  # the padding nobody needs is gone: a solo run's step
    assert d.ends == {h["a"]: "budget", h["b"]: "budget", h["d"]: "budget"}
    agreed = 0
    for name in "abd":
        text, s, sp = plan[name]
        solo = e.generate([text], s, speakers=[sp])[0]
        got = d.result(h[name])
        assert len(got) == s.max_frames == solo.num_frames
        agreed += _assert_follows_solo(e, text, s, got, solo.frames, sp)
    text, s, sp = plan["c"]
    solo = e.generate([text], s, speakers=[sp])[0]
    got = d.result(h["c"])
    assert len(got) == 4  # cancelled after its 4th frame
    assert torch.equal(got, solo.frames[:4])
    assert agreed >= 50, agreed  # the requests really ran together


def test_a_request_that_stops_leaves_and_the_rest_follow_solo(layout_engine):
    e = layout_engine
    d = Driver(e)
    early = _greedy(20, stop_threshold=1e-6)  # the stop head fires at its first chance (step 1)
    ha = d.admit(MID, _sampled(21, 12))
    d.step()
    hb = d.admit(LONG, early)
    while d.batch:
        d.step()
    assert d.ends[hb] == "stop" and len(d.result(hb)) == 1
    solo = e.generate([MID], _sampled(21, 12))[0]
    _assert_follows_solo(e, MID, _sampled(21, 12), d.result(ha), solo.frames)


def test_admit_only_between_steps(layout_engine):
    d = Driver(layout_engine)
    d.admit(SHORT, _greedy(5))
    d.batch.sample()
    with pytest.raises(RuntimeError, match="between steps"):
        d.admit(MID, _greedy(5))
    d.batch.advance()
    d.admit(MID, _greedy(5))
    assert len(d.batch) == 2


@pytest.fixture(scope="module", params=["fp32", "fp16w"])
def real_shape_engine(request, tiny_model_dir):
    """Gepard-1.0's real shape (random weights), at the CPU paths the app serves: fp32, and the
    fp16-weight backbone the speed layer picks on a CPU."""
    from gepard_demo.model.checkpoints.full_size import build_full_size_engine
    from gepard_demo.speed.quantize import apply_precision

    engine = build_full_size_engine(tiny_model_dir)
    if request.param != "fp32":
        apply_precision(engine.talker, request.param)
    return engine


@pytest.mark.slow
def test_joins_and_leaves_at_the_real_shape(real_shape_engine):
    """The churn of the tiny test on the real backbone (14 layers, hidden 1024, 2 KV heads): rows
    joining mid-run with longer prompts (the running ones re-padded), a guided one whose second
    row leaves at cfg_frames, one cancelled; each follows its solo run as the tiny ones must."""
    e = real_shape_engine
    d = Driver(e)
    plan = {
        "a": (MID, _sampled(5, 16), None),
        "b": (LONG, _greedy(10, cfg_scale=2.0, cfg_frames=3), None),
        "c": (SHORT, _greedy(12), _speaker(e)),  # another voice, cancelled mid-run
        "d": (LONGEST, _sampled(9, 6), None),  # the longest prompt: everything running is re-padded
    }
    h = {"a": d.admit(*plan["a"])}
    d.step()
    d.step()
    h["b"], h["c"] = d.admit(*plan["b"]), d.admit(*plan["c"])
    assert d.batch.row_count == 4
    for _ in range(3):
        d.step()
    assert d.batch.row_count == 3  # b's guidance row left after its 3 guided frames
    d.batch.cancel(h["c"])
    width = d.batch.tensors.mask.shape[1]
    h["d"] = d.admit(*plan["d"])
    assert d.batch.tensors.mask.shape[1] > width
    while d.batch:
        d.step()
    assert d.ends == {h["a"]: "budget", h["b"]: "budget", h["d"]: "budget"}
    for name in "abd":
        text, s, sp = plan[name]
        solo = e.generate([text], s, speakers=[sp])[0]
        got = d.result(h[name])
        assert len(got) == s.max_frames
        _assert_follows_solo(e, text, s, got, solo.frames, sp)
    text, s, sp = plan["c"]
    assert torch.equal(d.result(h["c"]), e.generate([text], s, speakers=[sp])[0].frames[:3])
