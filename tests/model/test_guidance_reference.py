"""Classifier-free guidance pinned to what it must equal, not to our own functions: the model
authors' runner, written out in tests/support/authors_reference.py (the text-free branch is the shared
speaker prefix, then [SOT, EOT, SOS]; two separate prefills fed the same frames; u + w (c - u) per
head). The engine's greedy guided frames must be the argmax of that, with and without cfg_frames,
with the default voice and a reference voice, solo and inside a running batch with unguided
neighbours that join and leave. The authors' other mode, "audio_only" ([prefix, SOS]), is not
offered (docs/DESIGN.md).
"""

from __future__ import annotations

import pytest
import torch
from tests.support.authors_reference import assert_authors_guided_frames, authors_uncond_layout
from tests.support.batch_driver import Driver
from tests.support.loops import LOOPS, running

from gepard_demo.settings import SamplingSettings

pytestmark = pytest.mark.numerics  # results depend on the CPU's kernels: make test-isa runs it under other ISAs


@pytest.fixture(params=LOOPS)
def tiny_engine(tiny_engine, request):
    """The authors' runner is the reference for both decode loops (tests/support/loops.py)."""
    with running(tiny_engine, request.param):
        yield tiny_engine


TEXT = "Hello world"


def _prefix(engine, seed):
    g = torch.Generator().manual_seed(seed)
    return 0.05 * torch.randn(engine.config.num_speaker_prefix, engine.config.hidden_size, generator=g)


def _greedy(frames, **kw):
    return SamplingSettings(**{"greedy": True, "max_frames": frames, "stop_threshold": 0.999, **kw})


def test_the_guidance_prompt_is_the_authors_layout(tiny_engine, tiny_model_dir):
    layout = authors_uncond_layout(tiny_model_dir)
    assert len(layout) == tiny_engine.config.num_speaker_prefix + 3 > 3  # the slots are there
    assert tiny_engine.unconditional_prompt(_greedy(5, cfg_scale=2.0)) == layout
    assert tiny_engine.unconditional_prompt(_greedy(5)) is None  # unguided: no second branch


def test_the_published_defaults_give_the_published_layout():
    from gepard_demo.model.checkpoints.full_size import full_size_config
    from gepard_demo.model.prompt import build_unconditional_prompt_ids

    # facts §1: slots from tokeniser_length 248077, 8 of them; SOT 248073, EOT 248074, SOS 248070.
    assert build_unconditional_prompt_ids(full_size_config()) == [*range(248077, 248085), 248073, 248074, 248070]


@pytest.mark.parametrize("voice", ["default", "reference"])
def test_both_rows_carry_the_speaker_prefix(tiny_engine, tiny_model_dir, monkeypatch, voice):
    talker = tiny_engine.talker
    prefix = None if voice == "default" else _prefix(tiny_engine, 1)
    want = talker.null_prefix.detach() if prefix is None else prefix
    seen = []
    real = talker.embed_prompt
    monkeypatch.setattr(talker, "embed_prompt", lambda ids, speakers=None: seen.append((ids, real(ids, speakers))) or seen[-1][1])
    tiny_engine.generate([TEXT], _greedy(2, cfg_scale=2.0), speakers=[prefix])
    ((ids, embeds),) = seen  # one prefill: the conditional row, then its guidance row
    assert ids.shape[0] == 2
    layout = authors_uncond_layout(tiny_model_dir)
    assert ids[1, -len(layout):].tolist() == layout  # left-padded to the conditional row's length
    k = len(layout) - 3
    for row in (0, 1):
        start = int((ids[row] >= tiny_engine.config.speaker_token_base).nonzero()[0])
        assert torch.equal(embeds[row, start:start + k], want.to(embeds.dtype)), row


@pytest.mark.parametrize("cfg_frames", [None, 4], ids=["every-frame", "onset-4"])
@pytest.mark.parametrize("voice", ["default", "reference"])
def test_guided_frames_equal_the_authors_two_branches(tiny_engine, tiny_model_dir, cfg_frames, voice):
    prefix = None if voice == "default" else _prefix(tiny_engine, 2)
    s = _greedy(12, cfg_scale=2.5, cfg_frames=cfg_frames)
    got = tiny_engine.generate([TEXT], s, speakers=[prefix])[0].frames
    assert len(got) == 12
    assert_authors_guided_frames(tiny_engine, tiny_model_dir, TEXT, s, got, prefix)
    plain = tiny_engine.generate([TEXT], _greedy(12), speakers=[prefix])[0].frames
    assert not torch.equal(plain, got)  # guidance changed the frames: the check above had work to do


def test_guided_frames_in_a_running_batch_with_unguided_neighbours(tiny_engine, tiny_model_dir):
    e = tiny_engine
    prefix = _prefix(e, 3)
    d = Driver(e)
    d.admit("A neighbour that talks for a while.", SamplingSettings(seed=5, max_frames=20, stop_threshold=0.999))
    d.step()
    d.step()
    guided = _greedy(10, cfg_scale=2.5, cfg_frames=6)
    g = d.admit(TEXT, guided, prefix)  # joins mid-run, with a second row for 6 frames
    d.step()
    d.admit("A longer neighbour joins later and everything running is padded to it.", _greedy(8))
    d.run_out()
    got = d.result(g)
    assert len(got) == 10
    assert_authors_guided_frames(e, tiny_model_dir, TEXT, guided, got, prefix)
