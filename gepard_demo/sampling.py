"""Per-head frame sampling: Gumbel-max in fp32, optional top-k, or argmax (facts §3).

Each request draws its noise from its own generator with a fixed shape per step, so the noise
a seeded request sees never depends on its batch neighbours.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .settings import SamplingSettings


@dataclass
class RowSampler:
    """One request's sampling settings and its private noise generator."""

    settings: SamplingSettings
    seed: int
    generator: torch.Generator

    @classmethod
    def create(cls, settings: SamplingSettings, device: torch.device) -> "RowSampler":
        settings = settings.with_concrete_seed()
        gen = torch.Generator(device=device)
        gen.manual_seed(settings.seed)
        return cls(settings=settings, seed=settings.seed, generator=gen)

    def noise(self, shape: torch.Size, device: torch.device) -> torch.Tensor:
        u = torch.rand(shape, generator=self.generator, device=device, dtype=torch.float32)
        return -torch.log(-torch.log(u.clamp_min(1e-20)))


def sample_codes(logits: torch.Tensor, rows: list[RowSampler]) -> torch.Tensor:
    """(N, heads, max_level) fp32 logits with -inf padding -> (N, heads) codes."""
    codes = torch.empty(logits.shape[:2], dtype=torch.long, device=logits.device)
    for i, row in enumerate(rows):
        s = row.settings
        lg = logits[i]
        if s.greedy:
            codes[i] = lg.argmax(dim=-1)
            continue
        if 0 < s.top_k < lg.shape[-1]:
            kth = lg.topk(s.top_k, dim=-1).values[..., -1:]
            lg = lg.masked_fill(lg < kth, float("-inf"))
        # Noise is drawn for every slot, padding included, so its shape (and with it the
        # generator's stream) is the same for every request and every step.
        codes[i] = (lg / s.temperature + row.noise(lg.shape, lg.device)).argmax(dim=-1)
    return codes
