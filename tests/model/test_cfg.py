"""Classifier-free guidance on the tiny model (facts §9): the unconditional branch runs as a
second row of the same batch, the guided logits are u + w * (c - u), the stop head is read on
the conditional row, and the guidance row is dropped after cfg_frames."""

import pytest
import torch
from tests.support.authors_reference import authors_uncond_layout

from gepard_demo.model import batch as generation  # the loop that calls sample_codes
from gepard_demo.model.generation import guide_logits
from gepard_demo.settings import SamplingSettings, SettingsError
from gepard_demo.model.request import FrameRequest

pytestmark = pytest.mark.numerics  # results depend on the CPU's kernels: make test-isa runs it under other ISAs

TEXT = "Hello world"


class Spy:
    """Records what the decode loop's heads produced and what the sampler was given."""

    def __init__(self, engine, monkeypatch):
        self.heads: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.sampled: list[torch.Tensor] = []
        talker = engine.talker
        real_heads, real_sample = talker.head_logits, generation.sample_codes

        def heads(hidden):
            out = real_heads(hidden)
            self.heads.append((out[0].clone(), out[1].clone()))
            return out

        def sample(logits, rows):
            self.sampled.append(logits.clone())
            return real_sample(logits, rows)

        monkeypatch.setattr(talker, "head_logits", heads)
        monkeypatch.setattr(generation, "sample_codes", sample)


def _uncached_heads(engine, prompt_ids, frames):
    """Head outputs of one uncached forward over a prompt + fed-back frames, one row per step."""
    talker = engine.talker
    prompt = torch.tensor([prompt_ids])
    with torch.inference_mode():
        embeds = talker.embed_prompt(prompt)
        if len(frames) > 1:
            embeds = torch.cat([embeds, talker.embed_frame(frames[:-1]).unsqueeze(0)], dim=1)
        hidden = talker.model(inputs_embeds=embeds, use_cache=False).last_hidden_state[0]
        return talker.head_logits(hidden[prompt.shape[1] - 1 :])


def test_scale_one_is_plain_generation(tiny_engine, monkeypatch):
    plain = tiny_engine.generate([TEXT], SamplingSettings(seed=3, max_frames=30))[0]
    spy = Spy(tiny_engine, monkeypatch)
    off = tiny_engine.generate([TEXT], SamplingSettings(seed=3, max_frames=30, cfg_scale=1.0, cfg_frames=5))[0]
    assert torch.equal(plain.frames, off.frames) and plain.p_stop == off.p_stop
    assert all(h[0].shape[0] == 1 for h in spy.heads)  # no second row was ever run


def test_guided_logits_branch_rows_and_switch_off(tiny_engine, tiny_model_dir, monkeypatch):
    w, n_guided = 2.5, 4
    spy = Spy(tiny_engine, monkeypatch)
    s = SamplingSettings(seed=5, max_frames=12, stop_threshold=0.999, cfg_scale=w, cfg_frames=n_guided)
    res = tiny_engine.generate([TEXT], s)[0]
    assert res.num_frames == 12
    rows = [h[0].shape[0] for h in spy.heads]
    assert rows == [2] * n_guided + [1] * (12 - n_guided)  # the guidance row is gone after cfg_frames
    # The conditional row is the plain prompt, the guidance row the text-free one, each with its
    # own positions and fed the committed frames: both equal an uncached solo forward.
    cond_ref, cond_p = _uncached_heads(tiny_engine, tiny_engine.prompt_ids(TEXT), res.frames)
    unc_ref, _ = _uncached_heads(tiny_engine, authors_uncond_layout(tiny_model_dir), res.frames)  # not our builder's
    for k, ((logits, p_stop), sampled) in enumerate(zip(spy.heads, spy.sampled)):
        assert torch.allclose(logits[0], cond_ref[k], atol=1e-4)
        assert abs(res.p_stop[k] - float(p_stop[0])) < 1e-7  # the stop is read on the conditional row
        assert abs(res.p_stop[k] - float(cond_p[k])) < 1e-5
        if k < n_guided:
            assert torch.allclose(logits[1], unc_ref[k], atol=1e-4)
            c, u = logits[0], logits[1]
            finite = torch.isfinite(c)
            expected = u[finite] + w * (c[finite] - u[finite])
            assert torch.allclose(sampled[0][finite], expected, atol=1e-6)
            assert torch.isinf(sampled[0][~finite]).all()
            assert not torch.allclose(sampled[0][finite], c[finite])  # guidance changed something
        else:
            assert torch.equal(sampled[0], logits[0])


def test_guide_logits_formula_keeps_padding():
    c = torch.tensor([[[1.0, 2.0, float("-inf")]]])
    u = torch.tensor([[[0.5, 3.0, float("-inf")]]])
    g = guide_logits(c, u, torch.tensor([3.0]))
    assert torch.equal(g, torch.tensor([[[2.0, 0.0, float("-inf")]]]))


def test_cfg_frames_limits_guidance_to_the_onset(tiny_engine):
    base = dict(seed=9, max_frames=20, stop_threshold=0.999, cfg_scale=3.0)
    every = tiny_engine.generate([TEXT], SamplingSettings(**base))[0]
    onset = tiny_engine.generate([TEXT], SamplingSettings(**base, cfg_frames=6))[0]
    plain = tiny_engine.generate([TEXT], SamplingSettings(seed=9, max_frames=20, stop_threshold=0.999))[0]
    assert torch.equal(every.frames[:6], onset.frames[:6])  # the same guided onset, same seed
    assert not torch.equal(every.frames, onset.frames)  # then unguided
    assert not torch.equal(plain.frames[:6], onset.frames[:6])


def test_stop_is_judged_on_the_conditional_branch(tiny_engine, monkeypatch):
    spy = Spy(tiny_engine, monkeypatch)
    s = SamplingSettings(seed=2, max_frames=40, stop_threshold=0.999, cfg_scale=2.0)
    res = tiny_engine.generate([TEXT], s)[0]
    cond = [float(p[0]) for _, p in spy.heads]
    unc = [float(p[1]) for _, p in spy.heads]

    def first_over(ps, t):
        return next((k for k in range(1, len(ps)) if ps[k] > t), None)

    # A threshold the two branches cross at different steps tells which one was read.
    cands = sorted(set(cond[1:] + unc[1:]))
    pick = next(
        (t - 1e-6 for t in cands if first_over(cond, t - 1e-6) != first_over(unc, t - 1e-6) and first_over(cond, t - 1e-6)),
        None,
    )
    assert pick is not None, "the branches' stop probabilities never diverge: test cannot tell them apart"
    stopped = tiny_engine.generate([TEXT], s.replace(stop_threshold=pick))[0]
    assert stopped.stop_fired and stopped.stop_frame == first_over(cond, pick)
    assert torch.equal(stopped.frames, res.frames[: stopped.stop_frame])


def test_guided_request_in_a_batch_equals_its_solo_run(tiny_engine):
    guided = SamplingSettings(seed=21, max_frames=25, cfg_scale=2.0, cfg_frames=10)
    plain = SamplingSettings(seed=22, max_frames=25)
    texts = ["The weather is sunny today.", TEXT, "Hi"]
    batch = tiny_engine.generate(texts, [plain, guided, guided.replace(seed=23)])
    for text, s, res in zip(texts, [plain, guided, guided.replace(seed=23)], batch):
        solo = tiny_engine.generate([text], s)[0]
        assert torch.equal(solo.frames, res.frames), text
        assert res.seed == s.seed


def test_stream_frames_guides_too(tiny_engine):
    s = SamplingSettings(seed=4, max_frames=15, cfg_scale=2.5, cfg_frames=8)
    streamed = torch.stack([st.codes for st in tiny_engine.stream_frames(FrameRequest(TEXT, s)) if st.codes is not None])
    assert torch.equal(streamed, tiny_engine.generate([TEXT], s)[0].frames)


@pytest.mark.parametrize(
    "bad", [dict(cfg_scale=-0.5), dict(cfg_scale=11.0), dict(cfg_frames=0), dict(cfg_frames=5000), dict(cfg_frames=2.5)]
)
def test_bad_cfg_settings_are_refused(tiny_engine, bad):
    with pytest.raises(SettingsError, match=next(iter(bad))):
        tiny_engine.generate([TEXT], SamplingSettings(**bad))
