"""The fidelity guard: does a fast talker still produce the fp32 talker's distributions?

Teacher forcing: the reference talker runs `steps` decode steps, feeding back frames drawn from
its own heads (unscaled Gumbel-max from a fixed seed, so the inputs stay varied); the
fast talker is fed exactly the same prompt and frames. Per step and head we compare the two
softmax distributions. Random weights give nearly flat heads, so argmax agreement is a weak
signal there; the KL divergence is the fair measure (issue 10's thresholds below).

For the codec: SNR of a fast decode against the fp32 exact decode.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from transformers import DynamicCache

MAX_MEAN_KL = 0.01  # nats, mean over steps and heads
MAX_DP_STOP = 0.01  # |p_stop fast - p_stop fp32|, max over steps
MIN_CODEC_SNR_DB = 40.0


@dataclass(frozen=True)
class Trace:
    logits: torch.Tensor  # (T, heads, max_level) fp32, -inf padding
    p_stop: torch.Tensor  # (T,)
    frames: torch.Tensor  # (T, heads) the frames fed back after each step


@dataclass(frozen=True)
class FidelityReport:
    steps: int
    mean_kl: float
    max_kl: float  # worst single (step, head)
    max_dp_stop: float
    mean_dp_stop: float
    argmax_agreement: float  # share of (step, head) pairs with the same argmax

    @property
    def passes(self) -> bool:
        return self.mean_kl <= MAX_MEAN_KL and self.max_dp_stop <= MAX_DP_STOP

    def as_dict(self) -> dict:
        return {**asdict(self), "passes": self.passes}


def trace(talker, prompt_ids: list[int], steps: int, frames: torch.Tensor | None = None, seed: int = 0) -> Trace:
    """Run `steps` decode steps of one request. frames=None: draw them from this talker's heads
    (seeded); otherwise feed these frames (teacher forcing)."""
    device = talker.device
    gen = torch.Generator(device="cpu").manual_seed(seed)
    cache = DynamicCache(config=talker.config.backbone)
    ids = torch.tensor([prompt_ids], device=device)
    all_logits, all_p, fed = [], [], []
    with torch.inference_mode():
        hidden = talker.backbone(talker.embed_prompt(ids), past_key_values=cache)
        pos = ids.shape[1]
        for t in range(steps):
            logits, p_stop = talker.head_logits(hidden)
            logits, p_stop = logits[0].float().cpu(), p_stop[0].float().cpu()
            if frames is None:
                u = torch.rand(logits.shape, generator=gen).clamp_(1e-10, 1 - 1e-10)
                code = (logits - torch.log(-torch.log(u))).argmax(-1)
            else:
                code = frames[t]
            all_logits.append(logits)
            all_p.append(p_stop)
            fed.append(code)
            if t + 1 < steps:
                x = talker.embed_frame(code.unsqueeze(0).to(device)).unsqueeze(1)
                hidden = talker.backbone(x, position_ids=torch.tensor([[pos]], device=device), past_key_values=cache)
                pos += 1
    return Trace(torch.stack(all_logits), torch.stack(all_p), torch.stack(fed))


def compare(reference: Trace, fast: Trace) -> FidelityReport:
    if not torch.equal(reference.frames, fast.frames):
        raise ValueError("the fast trace was not teacher-forced with the reference frames")
    valid = torch.isfinite(reference.logits)
    kl = head_kl(reference.logits, fast.logits, valid)  # (T, heads)
    dp = (fast.p_stop - reference.p_stop).abs()
    agree = (reference.logits.argmax(-1) == fast.logits.argmax(-1)).float().mean()
    return FidelityReport(
        steps=int(kl.shape[0]),
        mean_kl=float(kl.mean()),
        max_kl=float(kl.max()),
        max_dp_stop=float(dp.max()),
        mean_dp_stop=float(dp.mean()),
        argmax_agreement=float(agree),
    )


def head_kl(reference: torch.Tensor, fast: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """KL(reference || fast) per (step, head) in nats, over the valid (finite) levels.

    Computed in float64 and floored at 0: a KL is never negative, but where the two
    distributions agree to float32 rounding (fbgemm's fp16 kernels on AVX-512 do) the sum of
    p * (log p - log q) is rounding noise around zero, either sign (-5e-10 was seen).
    """
    logp = torch.log_softmax(reference.double(), -1)
    logq = torch.log_softmax(fast.double(), -1)
    terms = torch.where(valid, logp.exp() * (logp - logq), torch.zeros((), dtype=torch.float64))
    return terms.sum(-1).clamp_min(0.0)


def snr_db(reference: np.ndarray, test: np.ndarray) -> float:
    """10 log10(|ref|^2 / |ref - test|^2); inf when identical."""
    reference = np.asarray(reference, dtype=np.float64)
    test = np.asarray(test, dtype=np.float64)
    if reference.shape != test.shape:
        raise ValueError(f"audio lengths differ: {reference.shape} vs {test.shape}")
    noise = float(np.sum((reference - test) ** 2))
    if noise == 0.0:
        return float("inf")
    return 10.0 * float(np.log10(np.sum(reference**2) / noise))
