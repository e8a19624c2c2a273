"""Each row's sampling settings as device tensors, and the arithmetic that reads them: guidance,
the repetition penalty, top-k, temperature with Gumbel noise, greedy.

This is the one place a per-row sampling setting lives in the fixed-shape step: a new one is a
field here, filled in `fill` from the row's SamplingSettings and read in `sample` (or `guide`).
The arithmetic is model/sampling.sample_codes' and model/generation.guide_logits', op for op,
with per-row tensors where those have per-row Python, so a row samples the same frame in both
loops.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from gepard_demo.model.generation import guide_logits
from gepard_demo.model.guards.penalty import penalize
from gepard_demo.model.sampling import RowSampler, gumbel

# A frame count that never comes (a force stop that is off, guidance on every frame).
NEVER = 2**62


@dataclass
class RowSettings:
    """(rows,) per slot; a free slot's are the defaults `reset` gives (they decide nothing)."""

    threshold: torch.Tensor  # fp32: the stop threshold
    max_frames: torch.Tensor  # long
    force_at: torch.Tensor  # long: the committed count that force-stops it (NEVER: off)
    temperature: torch.Tensor  # fp32
    greedy: torch.Tensor  # bool
    top_k: torch.Tensor  # long (0: off)
    cfg_scale: torch.Tensor  # fp32
    cfg_frames: torch.Tensor  # long: guidance ends once this many frames are committed (NEVER: all)
    penalty: torch.Tensor  # fp32 (1.0: off)
    penalized: torch.Tensor  # bool
    window: torch.Tensor  # long: the penalty's window (0: all history)

    @classmethod
    def empty(cls, rows: int, device: torch.device) -> "RowSettings":
        floats = ("threshold", "temperature", "cfg_scale", "penalty")
        flags = ("greedy", "penalized")
        s = cls(**{f.name: torch.zeros(rows, device=device, dtype=torch.float32 if f.name in floats
                                       else torch.bool if f.name in flags else torch.long) for f in fields(cls)})
        s.reset()
        return s

    def reset(self) -> None:
        for f in fields(self):
            getattr(self, f.name).zero_()
        for one in (self.temperature, self.cfg_scale, self.penalty):
            one.fill_(1.0)

    def tensors(self) -> list[torch.Tensor]:
        return [getattr(self, f.name) for f in fields(self)]

    def fill(self, slots: torch.Tensor, samplers: list[RowSampler], cond: list[bool]) -> None:
        """The rows in `slots` take their samplers' settings (a guidance row's are its request's;
        only a conditional row keeps a penalty window)."""
        settings = [r.settings for r in samplers]
        values = {
            "threshold": [s.stop_threshold for s in settings], "max_frames": [s.max_frames for s in settings],
            "force_at": [NEVER if r.force_stop is None else r.force_stop for r in samplers],
            "temperature": [s.temperature for s in settings], "greedy": [s.greedy for s in settings],
            "top_k": [s.top_k for s in settings], "cfg_scale": [s.cfg_scale for s in settings],
            "cfg_frames": [NEVER if s.cfg_frames is None else s.cfg_frames for s in settings],
            "penalty": [s.repetition_penalty for s in settings],
            "penalized": [c and r.history is not None for c, r in zip(cond, samplers)],
            "window": [s.repetition_window for s in settings],
        }
        for name, value in values.items():
            target = getattr(self, name)
            target[slots] = torch.tensor(value, device=target.device).to(target.dtype)


def guide(logits: torch.Tensor, partner: torch.Tensor, guided: torch.Tensor, s: RowSettings) -> torch.Tensor:
    """A guided row's logits mixed with its guidance row's (u + w (c - u)); the rest as they are."""
    mixed = guide_logits(logits, logits[partner], s.cfg_scale)
    return torch.where(guided.view(-1, 1, 1), mixed, logits)


def sample(logits: torch.Tensor, s: RowSettings, counts: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """(rows, heads, levels) fp32 logits -> (rows, heads) codes: the penalty on the codes in the
    window (counts), top-k, then Gumbel-max at the row's temperature from this step's uniform
    draws, or argmax for a greedy row (model/sampling.sample_codes)."""
    seen = s.penalized.view(-1, 1, 1) & (counts > 0)
    logits = penalize(logits, seen, s.penalty)
    levels = logits.shape[-1]
    use_k = (s.top_k > 0) & (s.top_k < levels) & ~s.greedy
    ranked = logits.sort(dim=-1, descending=True).values
    kth = ranked.gather(-1, (s.top_k - 1).clamp(0, levels - 1).view(-1, 1, 1).expand(-1, logits.shape[1], 1))
    logits = torch.where(use_k.view(-1, 1, 1) & (logits < kth), float("-inf"), logits)
    scores = torch.where(s.greedy.view(-1, 1, 1), logits, logits / s.temperature.view(-1, 1, 1) + gumbel(uniform))
    return scores.argmax(dim=-1)
