"""Per-head frame sampling: the repetition penalty, then Gumbel-max in fp32 with optional top-k,
or argmax (facts §3, §15).

Each request draws its noise from its own generator with a fixed shape per step, so the noise
a seeded request sees never depends on its batch neighbours.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gepard_demo.model.guards.penalty import History, penalize
from gepard_demo.settings import SamplingSettings


@dataclass
class RowSampler:
    """One request's sampling settings, its private noise generator, and its guardrails: the frame
    count it is force-stopped at (None: off; "auto" already resolved for its text, guardrails.py)
    and, while a repetition penalty is on, its window of recent frames (DecodeBatch keeps it)."""

    settings: SamplingSettings
    seed: int
    generator: torch.Generator
    force_stop: int | None = None
    history: History | None = None

    @classmethod
    def create(cls, settings: SamplingSettings, device: torch.device, force_stop: int | None = None) -> "RowSampler":
        settings = settings.with_concrete_seed()
        seed = settings.seed
        assert seed is not None  # with_concrete_seed drew one where none was given
        gen = torch.Generator(device=device)
        gen.manual_seed(seed)
        return cls(settings=settings, seed=seed, generator=gen, force_stop=force_stop)

    def uniform(self, shape: torch.Size, device: torch.device, out: torch.Tensor | None = None) -> torch.Tensor:
        """One step's draw: uniform fp32 of `shape`, the whole of a frame's noise (into `out` if given:
        the fixed-shape step's buffer)."""
        if out is not None:
            return torch.rand(shape, generator=self.generator, out=out)
        return torch.rand(shape, generator=self.generator, device=device, dtype=torch.float32)

    def noise(self, shape: torch.Size, device: torch.device) -> torch.Tensor:
        return gumbel(self.uniform(shape, device))

    def skip(self, frames: int, shape: torch.Size, device: torch.device) -> "RowSampler":
        """Draw (and drop) the noise of `frames` committed frames: one draw per frame, as
        sample_codes draws it, so a request resumed from them (BatchRequest.replay) samples its
        next frame from the noise an uninterrupted run would."""
        if not self.settings.greedy:
            for _ in range(frames):
                self.uniform(shape, device)
        return self


def gumbel(uniform: torch.Tensor) -> torch.Tensor:
    """Gumbel noise from uniform draws: argmax(logits / T + noise) samples softmax(logits / T)."""
    return -torch.log(-torch.log(uniform.clamp_min(1e-20)))


def sample_codes(logits: torch.Tensor, rows: list[RowSampler]) -> torch.Tensor:
    """(N, heads, max_level) fp32 logits with -inf padding -> (N, heads) codes.

    The rows with a repetition penalty have it applied first (before top-k and temperature, as
    the authors' runner does). Only the noise is drawn row by row (each from its own generator);
    the rest is batched.
    """
    histories = {k: r.history for k, r in enumerate(rows) if r.history is not None and r.settings.penalized}
    penalized = list(histories)
    if penalized:
        index = torch.tensor(penalized, device=logits.device)
        seen = torch.stack([histories[k].seen() for k in penalized])
        penalty = torch.tensor([rows[k].settings.repetition_penalty for k in penalized], device=logits.device)
        logits = logits.clone()
        logits[index] = penalize(logits[index], seen, penalty)
    settings = [r.settings for r in rows]
    for k in {s.top_k for s in settings if 0 < s.top_k < logits.shape[-1] and not s.greedy}:
        sel = torch.tensor([s.top_k == k and not s.greedy for s in settings], device=logits.device)
        kth = logits[sel].topk(k, dim=-1).values[..., -1:]
        logits = logits.clone()
        logits[sel] = logits[sel].masked_fill(logits[sel] < kth, float("-inf"))
    greedy = [s.greedy for s in settings]
    if all(greedy):
        return logits.argmax(dim=-1)
    # Noise is drawn for every slot, padding included, so its shape (and with it the
    # generator's stream) is the same for every request and every step.
    shape = logits.shape[1:]
    noise = torch.stack([r.noise(shape, logits.device) if not r.settings.greedy else torch.zeros(shape, device=logits.device) for r in rows])
    temps = torch.tensor([s.temperature for s in settings], device=logits.device).view(-1, 1, 1)
    sampled = (logits / temps + noise).argmax(dim=-1)
    if any(greedy):
        sampled[torch.tensor(greedy, device=logits.device)] = logits[torch.tensor(greedy, device=logits.device)].argmax(dim=-1)
    return sampled
