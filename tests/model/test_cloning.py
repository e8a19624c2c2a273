"""A speaker prefix in the talker: it fills the speaker slots, changes the voice, batches with
default-voice requests, and the guidance branch shares it (facts §9)."""

import pytest
import torch
from tests.support.authors_reference import Branch, authors_uncond_layout

from gepard_demo.settings import SamplingSettings
from gepard_demo.model.request import FrameRequest

pytestmark = pytest.mark.numerics  # results depend on the CPU's kernels: make test-isa runs it under other ISAs

TEXT = "Hello world"


def a_prefix(engine, seed=0):
    g = torch.Generator().manual_seed(seed)
    k, h = engine.config.num_speaker_prefix, engine.config.hidden_size
    return torch.randn(k, h, generator=g) * 0.05


def test_prefix_fills_the_speaker_slots(tiny_engine):
    talker, prefix = tiny_engine.talker, a_prefix(tiny_engine)
    ids = torch.tensor([tiny_engine.prompt_ids(TEXT)] * 2)
    with torch.inference_mode():
        embeds = talker.embed_prompt(ids, torch.stack([prefix, talker.null_prefix]))
        plain = talker.embed_prompt(ids[:1])
    k = tiny_engine.config.num_speaker_prefix
    assert torch.equal(embeds[0, :k], prefix) and torch.equal(embeds[1, :k], talker.null_prefix.detach())
    assert torch.equal(embeds[0, k:], plain[0, k:])  # the text is untouched


def test_cloned_request_batches_with_default_voice_requests(tiny_engine):
    prefix = a_prefix(tiny_engine, 1)
    s = [SamplingSettings(seed=3, max_frames=20), SamplingSettings(seed=4, max_frames=20)]
    batch = tiny_engine.generate([TEXT, TEXT], s, speakers=[prefix, None])
    cloned = tiny_engine.generate([TEXT], s[0], speakers=[prefix])[0]
    default = tiny_engine.generate([TEXT], s[1])[0]
    assert torch.equal(batch[0].frames, cloned.frames) and torch.equal(batch[1].frames, default.frames)
    same_seed_default = tiny_engine.generate([TEXT], s[0])[0]
    assert not torch.equal(cloned.frames, same_seed_default.frames)  # the voice changed the frames
    streamed = [st.codes for st in tiny_engine.stream_frames(FrameRequest(TEXT, s[0], speaker=prefix)) if st.codes is not None]
    assert torch.equal(torch.stack(streamed), cloned.frames)


def test_guidance_branch_shares_the_speaker_prefix(tiny_engine, tiny_model_dir, monkeypatch):
    prefix = a_prefix(tiny_engine, 2)
    talker = tiny_engine.talker
    seen = []
    real = talker.head_logits
    monkeypatch.setattr(talker, "head_logits", lambda h: seen.append(real(h)[0].clone()) or real(h))
    tiny_engine.generate([TEXT], SamplingSettings(seed=1, max_frames=3, cfg_scale=2.0), speakers=[prefix])
    # The authors' text-free branch, built by hand: the prefix in its slots, then [SOT, EOT, SOS].
    branch = Branch(talker, authors_uncond_layout(tiny_model_dir), prefix)
    logits, _ = branch.heads()
    for head, row in enumerate(logits):
        assert torch.allclose(seen[0][1, head, : len(row)], row, atol=1e-5), head
