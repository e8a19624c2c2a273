"""The voice-cloning compressor: a reference's 32 per-dim codes per frame -> K speaker tokens
that take the place of `null_prefix` in the speaker slots (facts §9).

Q-Former style, as the authors built it (weights `ref_compressor.*` in the checkpoint, sizes in
`gepard_config.json`'s `voice_cloning.compressor`): dequantize the codes ((c - L//2) / (L//2)),
project to d_model, add a sinusoidal position encoding; K learned queries then pass L pre-norm
blocks (self-attention, cross-attention to the reference, SwiGLU), a final RMSNorm and a learned
scalar scale. Attribute names follow the checkpoint's keys, so loading is a strict state-dict load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

PREFIX = "ref_compressor."


class CompressorError(RuntimeError):
    """The checkpoint has no usable voice-cloning compressor."""


@dataclass(frozen=True)
class CompressorConfig:
    num_queries: int = 8
    num_layers: int = 2
    num_heads: int = 8
    d_model: int = 1024
    ffn_hidden_size_multiplier: int = 4

    @classmethod
    def from_sidecar(cls, sidecar: dict[str, Any], hidden_size: int) -> "CompressorConfig":
        """From gepard_config.json; d_model unset falls back to the backbone's hidden size (as the authors)."""
        vc = sidecar.get("voice_cloning") or {}
        if not vc.get("enabled", False):
            raise CompressorError("this checkpoint was trained without voice cloning (voice_cloning.enabled is not true)")
        c = dict(vc.get("compressor") or {})
        cfg = cls(
            num_queries=int(c.get("num_queries", cls.num_queries)),
            num_layers=int(c.get("num_layers", cls.num_layers)),
            num_heads=int(c.get("num_heads", cls.num_heads)),
            d_model=int(c.get("d_model") or hidden_size),
            ffn_hidden_size_multiplier=int(c.get("ffn_hidden_size_multiplier", cls.ffn_hidden_size_multiplier)),
        )
        if cfg.d_model != hidden_size:
            raise CompressorError(f"compressor d_model {cfg.d_model} != backbone hidden size {hidden_size}: its tokens cannot be a prefix")
        if cfg.d_model % cfg.num_heads:
            raise CompressorError(f"compressor d_model {cfg.d_model} is not divisible by num_heads {cfg.num_heads}")
        return cfg


class RMSNorm(nn.Module):
    """Computed in fp32, cast back, then scaled by the weight (eps 1e-6)."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.to(x.dtype) * self.weight


class Attention(nn.Module):
    """Bidirectional multi-head attention, no biases; kv_mask (B, Tkv) True = attend."""

    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, q_in: torch.Tensor, kv_in: torch.Tensor, kv_mask: torch.Tensor | None = None) -> torch.Tensor:
        b, tq, d = q_in.shape
        h = self.num_heads

        def heads(x: torch.Tensor) -> torch.Tensor:
            return x.view(b, x.shape[1], h, d // h).transpose(1, 2)

        mask = None if kv_mask is None else kv_mask.view(b, 1, 1, -1)
        out = F.scaled_dot_product_attention(heads(self.q_proj(q_in)), heads(self.k_proj(kv_in)), heads(self.v_proj(kv_in)), attn_mask=mask)
        return self.out_proj(out.transpose(1, 2).reshape(b, tq, d))


class SwiGLU(nn.Module):
    def __init__(self, d_model: int, hidden: int):
        super().__init__()
        self.gate_proj = nn.Linear(d_model, hidden, bias=False)
        self.up_proj = nn.Linear(d_model, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, cfg: CompressorConfig):
        super().__init__()
        d = cfg.d_model
        self.norm_self = RMSNorm(d)
        self.self_attn = Attention(d, cfg.num_heads)
        self.norm_cross = RMSNorm(d)
        self.cross_attn = Attention(d, cfg.num_heads)
        self.norm_ffn = RMSNorm(d)
        self.ffn = SwiGLU(d, d * cfg.ffn_hidden_size_multiplier)

    def forward(self, q: torch.Tensor, ref: torch.Tensor, ref_mask: torch.Tensor | None) -> torch.Tensor:
        h = self.norm_self(q)
        q = q + self.self_attn(h, h)
        q = q + self.cross_attn(self.norm_cross(q), ref, ref_mask)
        return q + self.ffn(self.norm_ffn(q))


def sinusoidal_positions(length: int, dim: int) -> torch.Tensor:
    """(length, dim): sin on even dims, cos on odd, base 10000."""
    pos = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    pe = torch.zeros(length, dim)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)
    return pe


class RefCompressor(nn.Module):
    """(B, T_ref, 32) per-dim codes (+ mask) -> (B, K, d_model) speaker prefix."""

    _half: torch.Tensor  # the buffer __init__ registers, typed (nn.Module's lookup says Tensor | Module)

    def __init__(self, cfg: CompressorConfig, levels: tuple[int, ...]):
        super().__init__()
        self.cfg = cfg
        self.input_proj = nn.Linear(len(levels), cfg.d_model)
        self.queries = nn.Parameter(torch.zeros(cfg.num_queries, cfg.d_model))
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.num_layers))
        self.final_norm = RMSNorm(cfg.d_model)
        self.output_scale = nn.Parameter(torch.ones(1))
        half = torch.tensor([max(lv // 2, 1) for lv in levels], dtype=torch.float32)
        self.register_buffer("_half", half, persistent=False)

    def forward(self, codes: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if codes.dim() != 3 or codes.shape[-1] != self._half.numel():
            raise ValueError(f"codes must be (B, T, {self._half.numel()}), got {tuple(codes.shape)}")
        x = ((codes.float() - self._half) / self._half).to(self.input_proj.weight.dtype)
        x = self.input_proj(x)
        x = x + sinusoidal_positions(x.shape[1], self.cfg.d_model).to(x.device, x.dtype)
        q = self.queries.to(x.dtype).unsqueeze(0).expand(x.shape[0], -1, -1)
        for block in self.blocks:
            q = block(q, x, mask)
        return self.output_scale * self.final_norm(q)

    def load_weights(self, state: dict[str, torch.Tensor], source: str = "checkpoint") -> None:
        """Strictly from `ref_compressor.*` keys (prefix stripped or not); a one-element
        `output_scale` loads whatever its shape (0-dim in published files, [1] in newer ones)."""
        sub = {k.removeprefix(PREFIX): v for k, v in state.items() if k.startswith(PREFIX)} or dict(state)
        if not sub:
            raise CompressorError(f"{source} has no {PREFIX}* weights: it cannot clone a voice")
        own = self.state_dict()
        missing, unexpected = sorted(set(own) - set(sub)), sorted(set(sub) - set(own))
        if missing or unexpected:
            raise CompressorError(
                f"{source}: {PREFIX}* weights do not match voice_cloning.compressor: "
                f"missing {missing[:6]}, unexpected {unexpected[:6]}"
            )
        sub = {k: v.reshape(own[k].shape) if v.numel() == own[k].numel() == 1 else v for k, v in sub.items()}
        bad = [f"{k} {tuple(sub[k].shape)} != {tuple(own[k].shape)}" for k in own if sub[k].shape != own[k].shape]
        if bad:
            raise CompressorError(f"{source}: {PREFIX}* shapes do not match the config: {'; '.join(bad[:5])}")
        self.load_state_dict({k: v.to(own[k].dtype) for k, v in sub.items()}, strict=True)
        self.eval()
        for p in self.parameters():
            p.requires_grad_(False)
