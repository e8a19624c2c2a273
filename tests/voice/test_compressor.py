"""The voice-cloning compressor (facts §9) against an independent reference built from torch's
own nn.MultiheadAttention / nn.RMSNorm, at the tiny shape and at Gepard-1.0's full size."""

import math

import pytest
import torch
import torch.nn.functional as F

from gepard_demo.voice.compressor import CompressorConfig, CompressorError, RefCompressor, sinusoidal_positions

LEVELS = (8, 7, 6, 6) * 8
TINY = CompressorConfig(num_queries=8, num_layers=2, num_heads=2, d_model=64, ffn_hidden_size_multiplier=4)
FULL = CompressorConfig()  # the published sizes: K 8, 2 layers, 8 heads, d_model 1024, x4


def random_compressor_state(cfg: CompressorConfig, seed: int = 0) -> dict[str, torch.Tensor]:
    """`ref_compressor.*` tensors under the checkpoint's names, random but well scaled."""
    torch.manual_seed(seed)
    m = RefCompressor(cfg, LEVELS)
    with torch.no_grad():
        m.queries.normal_(0, 0.02)
        m.output_scale.fill_(1 / math.sqrt(cfg.d_model))
        for name, p in m.named_parameters():
            if name.endswith("norm_self.weight") or name.endswith("norm_ffn.weight") or name.endswith("norm_cross.weight"):
                p.uniform_(0.5, 1.5)
    return {f"ref_compressor.{k}": v.clone() for k, v in m.state_dict().items()}


def authors_key_names(layers: int) -> set[str]:
    keys = {"input_proj.weight", "input_proj.bias", "queries", "final_norm.weight", "output_scale"}
    for i in range(layers):
        for attn in ("self_attn", "cross_attn"):
            keys |= {f"blocks.{i}.{attn}.{p}_proj.weight" for p in ("q", "k", "v", "out")}
        keys |= {f"blocks.{i}.norm_{n}.weight" for n in ("self", "cross", "ffn")}
        keys |= {f"blocks.{i}.ffn.{p}_proj.weight" for p in ("gate", "up", "down")}
    return {"ref_compressor." + k for k in keys}


def reference_forward(state: dict, cfg: CompressorConfig, codes: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """The same math through torch's stock modules, written from the facts, not from our module."""
    s = {k.removeprefix("ref_compressor."): v for k, v in state.items()}
    d, h = cfg.d_model, cfg.num_heads
    half = torch.tensor([lv // 2 for lv in LEVELS], dtype=torch.float32)
    x = F.linear((codes.float() - half) / half, s["input_proj.weight"], s["input_proj.bias"])
    pos = torch.arange(x.shape[1]).float()[:, None]
    ang = pos / (10000 ** (torch.arange(0, d, 2).float() / d))
    pe = torch.stack([ang.sin(), ang.cos()], dim=-1).flatten(1)  # interleaved: sin even, cos odd
    x = x + pe
    q = s["queries"].unsqueeze(0).expand(x.shape[0], -1, -1)

    def norm(t, w):
        return torch.nn.functional.rms_norm(t, (d,), w, eps=1e-6)

    def mha(prefix, query, kv, pad):
        m = torch.nn.MultiheadAttention(d, h, bias=False, batch_first=True)
        with torch.no_grad():
            m.in_proj_weight.copy_(torch.cat([s[f"{prefix}.{p}_proj.weight"] for p in "qkv"]))
            m.out_proj.weight.copy_(s[f"{prefix}.out_proj.weight"])
        return m(query, kv, kv, key_padding_mask=pad, need_weights=False)[0]

    pad = None if mask is None else ~mask
    for i in range(cfg.num_layers):
        b = f"blocks.{i}"
        n = norm(q, s[f"{b}.norm_self.weight"])
        q = q + mha(f"{b}.self_attn", n, n, None)
        q = q + mha(f"{b}.cross_attn", norm(q, s[f"{b}.norm_cross.weight"]), x, pad)
        n = norm(q, s[f"{b}.norm_ffn.weight"])
        ffn = F.linear(F.silu(F.linear(n, s[f"{b}.ffn.gate_proj.weight"])) * F.linear(n, s[f"{b}.ffn.up_proj.weight"]), s[f"{b}.ffn.down_proj.weight"])
        q = q + ffn
    return s["output_scale"] * norm(q, s["final_norm.weight"])


def random_codes(t: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randint(0, lv, (t,), generator=g) for lv in LEVELS], dim=1)


def build(cfg, state):
    m = RefCompressor(cfg, LEVELS)
    m.load_weights(state)
    return m


@pytest.mark.parametrize("cfg", [TINY, FULL], ids=["tiny", "full-size"])
def test_compressor_matches_an_independent_reference(cfg):
    state = random_compressor_state(cfg)
    assert set(state) == authors_key_names(cfg.num_layers)  # the checkpoint's key names
    m = build(cfg, state)
    codes = random_codes(215).unsqueeze(0)  # 10 s of codec frames
    with torch.inference_mode():
        out = m(codes)
        ref = reference_forward(state, cfg, codes)
    assert out.shape == (1, cfg.num_queries, cfg.d_model)
    assert torch.allclose(out, ref, atol=1e-5, rtol=1e-4), (out - ref).abs().max()
    # final RMSNorm (weight 1 here) then the scalar: every token has RMS == output_scale
    final_w = state["ref_compressor.final_norm.weight"]
    rms = (out / final_w).pow(2).mean(-1).sqrt()
    assert torch.allclose(rms, torch.full_like(rms, 1 / math.sqrt(cfg.d_model)), rtol=1e-3)


def test_padding_mask_makes_a_batch_equal_solo_runs():
    state = random_compressor_state(TINY, seed=1)
    m = build(TINY, state)
    a, b = random_codes(70, 1), random_codes(120, 2)
    batch = torch.zeros(2, 120, 32, dtype=torch.long)
    batch[0, :70], batch[1] = a, b
    mask = torch.zeros(2, 120, dtype=torch.bool)
    mask[0, :70], mask[1] = True, True
    with torch.inference_mode():
        both = m(batch, mask)
        solo_a, solo_b = m(a.unsqueeze(0)), m(b.unsqueeze(0))
    assert torch.allclose(both[0], solo_a[0], atol=1e-6) and torch.allclose(both[1], solo_b[0], atol=1e-6)
    assert not torch.allclose(solo_a, solo_b, atol=1e-3)  # the reference matters...
    with torch.inference_mode():  # ...and so does its order (the position encoding)
        assert not torch.allclose(m(a.flip(0).unsqueeze(0)), solo_a, atol=1e-4)


def test_sinusoid_layout():
    pe = sinusoidal_positions(3, 4)
    assert torch.allclose(pe[1], torch.tensor([math.sin(1), math.cos(1), math.sin(1e-2), math.cos(1e-2)]))


def test_loader_accepts_a_0_dim_scale_and_refuses_mismatches():
    state = random_compressor_state(TINY)
    state["ref_compressor.output_scale"] = state["ref_compressor.output_scale"].reshape(())  # published files
    m = build(TINY, state)
    assert m.output_scale.shape == (1,)
    broken = dict(state)
    del broken["ref_compressor.blocks.1.ffn.up_proj.weight"]
    with pytest.raises(CompressorError, match="blocks.1.ffn.up_proj.weight"):
        build(TINY, broken)
    with pytest.raises(CompressorError, match="shapes"):
        build(CompressorConfig(num_queries=4, num_layers=2, num_heads=2, d_model=64), state)
    with pytest.raises(CompressorError, match="no ref_compressor"):
        RefCompressor(TINY, LEVELS).load_weights({})


def test_config_from_sidecar():
    cfg = CompressorConfig.from_sidecar({"voice_cloning": {"enabled": True, "compressor": {"num_queries": 8, "num_heads": 2}}}, 64)
    assert (cfg.d_model, cfg.num_heads, cfg.num_layers) == (64, 2, 2)
    with pytest.raises(CompressorError, match="without voice cloning"):
        CompressorConfig.from_sidecar({"voice_cloning": {"enabled": False}}, 64)
    with pytest.raises(CompressorError, match="hidden size"):
        CompressorConfig.from_sidecar({"voice_cloning": {"enabled": True, "compressor": {"d_model": 128}}}, 64)
