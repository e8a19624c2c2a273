"""The onset-entropy probe (gepard-train MODEL_GUIDE §5.1; facts §15): how sure the model is of
each frame it makes.

Per decode step and row, from the logits the sampler draws from (after guidance, before the
repetition penalty and anything sampling.py does to them: the model's own belief, unscaled):

- entropy: the mean over the 32 heads of the entropy of each head's softmax, in nats. A head of
  L levels is at most ln L (ln 8 = 2.08 for head 0).
- nll: the mean over the 32 heads of -log p(the sampled code), in nats: how surprising the frame
  actually committed was under that belief. None on a step that commits no frame.

The authors: a clean utterance's entropy "drops rapidly within the first 50 frames as the model
locks onto speech"; a derailed one "remains flat and elevated". `summary` gives the numbers the
page and the reports show: the mean over frames 0-9 (the onset) and 40-59 (where a clean run has
settled), and the drop between them. Which rule then calls a run derailed is eval's
(eval/scoring/derail.py), with thresholds a researcher sets.
"""

from __future__ import annotations

import math

import torch

from gepard_demo.units import wire_float

ONSET_FRAMES = (0, 10)  # frames [0, 10)
SETTLED_FRAMES = (40, 60)  # frames [40, 60)


def belief(logits: torch.Tensor, codes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, heads, levels) fp32 logits with -inf padding, (N, heads) sampled codes -> (entropy (N,),
    nll (N,)), both means over the heads, in nats. One batched pass: no loop over heads or rows."""
    logp = torch.log_softmax(logits, dim=-1)
    finite = torch.isfinite(logits)
    plogp = torch.where(finite, logp.exp() * logp, torch.zeros((), dtype=logp.dtype, device=logp.device))
    entropy = -plogp.sum(-1).mean(-1)
    nll = -logp.gather(-1, codes.unsqueeze(-1)).squeeze(-1).mean(-1)
    return entropy, nll


def _mean(values: list[float], span: tuple[int, int]) -> float | None:
    part = [v for v in values[span[0]: span[1]] if v is not None and math.isfinite(v)]
    return sum(part) / len(part) if len(part) == span[1] - span[0] else None


def summary(entropy: list[float]) -> dict[str, float | None]:
    """{"entropy_onset", "entropy_settled", "entropy_drop"}: mean entropy over frames 0-9 and
    40-59, and onset - settled; None where the trace is too short to hold the window."""
    onset, settled = _mean(entropy, ONSET_FRAMES), _mean(entropy, SETTLED_FRAMES)
    drop = onset - settled if onset is not None and settled is not None else None
    return {"entropy_onset": wire_float(onset), "entropy_settled": wire_float(settled), "entropy_drop": wire_float(drop)}
