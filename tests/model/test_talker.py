"""Every stage of the talker shows in the output: temperature shapes the sampled distribution,
the frame embedding applies every stage and `audio_embed_scale`, the speaker slots carry
`null_prefix`, and the tiny checkpoint leaves no weight at an identity value."""

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from gepard_demo.model.sampling import RowSampler, sample_codes
from gepard_demo.settings import SamplingSettings

pytestmark = pytest.mark.numerics  # results depend on the CPU's kernels: make test-isa runs it under other ISAs


def _draw(logits, temperature, rows, seed=0):
    """One draw per row from `rows` independently seeded samplers over the same logits."""
    samplers = [RowSampler.create(SamplingSettings(temperature=temperature, seed=seed + i), torch.device("cpu"))
                for i in range(rows)]
    return sample_codes(logits.expand(rows, *logits.shape[1:]), samplers)


def test_temperature_sets_the_sampled_distribution():
    """Empirical code frequencies match softmax(logits / T) for each T, and differ across T."""
    torch.manual_seed(0)
    levels = 8
    logits = torch.randn(1, 4, levels) * 1.5
    rows = 3000
    freqs = {}
    for t in (0.3, 1.0, 2.0):
        codes = _draw(logits, t, rows)
        freq = F.one_hot(codes, levels).float().mean(0)  # (heads, levels)
        expected = torch.softmax(logits[0] / t, dim=-1)
        # Total variation per head: with 3000 draws the sampling noise is about 0.02.
        assert (freq - expected).abs().sum(-1).max() / 2 < 0.05, t
        freqs[t] = freq
    # Colder is peakier: the top code's share falls as T rises.
    top = logits[0].argmax(-1, keepdim=True)
    shares = [freqs[t].gather(-1, top).mean().item() for t in (0.3, 1.0, 2.0)]
    assert shares[0] > shares[1] + 0.1 > shares[2] + 0.2


def test_temperature_changes_engine_output_entropy(tiny_engine):
    text = "The weather is sunny today."

    def spread(t):
        res = tiny_engine.generate([text] * 4, [SamplingSettings(temperature=t, seed=s, max_frames=30, stop_threshold=0.999)
                                                for s in range(4)])
        frames = torch.cat([r.frames for r in res])
        return sum(len(torch.unique(frames[:, h])) for h in range(frames.shape[1]))

    assert spread(0.05) < spread(3.0)


def _disk(model_dir):
    return load_file(str(model_dir / "model.safetensors"))


def test_frame_embedding_is_every_stage_from_the_file(tiny_engine, tiny_model_dir):
    """The next step's input, recomputed by hand from the tensors on disk: 32 lookups, concat,
    Linear, GELU, Linear, affine-free LayerNorm, times audio_embed_scale."""
    w = _disk(tiny_model_dir)
    scale = w["audio_embed_scale"]
    assert abs(float(scale) - 1.0) > 0.1  # a dropped scale must show
    levels = tiny_engine.config.audio_head_levels
    gen = torch.Generator().manual_seed(1)
    codes = torch.stack([torch.randint(0, n, (5,), generator=gen) for n in levels], dim=1)
    parts = torch.cat([w[f"audio_embeddings.{i}.weight"][codes[:, i]] for i in range(len(levels))], dim=-1)
    x = F.linear(parts, w["audio_embed_proj.0.weight"], w["audio_embed_proj.0.bias"])
    x = F.linear(F.gelu(x), w["audio_embed_proj.2.weight"], w["audio_embed_proj.2.bias"])
    expected = F.layer_norm(x, (x.shape[-1],)) * scale
    with torch.inference_mode():
        got = tiny_engine.talker.embed_frame(codes)
    assert torch.allclose(got, expected, atol=1e-5)


def test_speaker_slots_carry_null_prefix_from_the_file(tiny_engine, tiny_model_dir):
    w = _disk(tiny_model_dir)
    ids = torch.tensor([tiny_engine.prompt_ids("Hello world")])
    k = tiny_engine.config.num_speaker_prefix
    assert k == w["null_prefix"].shape[0] == 8
    with torch.inference_mode():
        embeds = tiny_engine.talker.embed_prompt(ids)[0]
    assert torch.allclose(embeds[:k], w["null_prefix"])
    assert not torch.allclose(embeds[:k], w["model.embed_tokens.weight"][ids[0, :k]], atol=0.1)
    assert torch.allclose(embeds[k:], w["model.embed_tokens.weight"][ids[0, k:]])


def test_tiny_leaves_no_weight_at_an_identity_value(tiny_model_dir, tiny_layout, tiny_cache_dir):
    """Norm gains of 1 (or 0 in Qwen3.5's 1+w norms), unit scales and constant offsets would let a
    stage the code skips go unnoticed; the tiny randomises every one of them."""
    from gepard_demo.model.checkpoints.tiny import ensure_tiny

    w = _disk(ensure_tiny(tiny_cache_dir, layout=tiny_layout))
    constant = [k for k, v in w.items() if v.is_floating_point() and v.numel() > 1 and bool((v == v.flatten()[0]).all())]
    assert constant == []
    assert float(w["audio_embed_scale"]) != 1.0
