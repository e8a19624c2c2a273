"""The repetition penalty's arithmetic (guardrails.py has its semantics, from the authors' runner).

`History` keeps a row's window as code counts per head and level, so a step costs the same
whatever the window's length, and a row that goes on from frames made in another GPU call
(BatchRequest.replay) starts with those frames in its window.
"""

from __future__ import annotations

from collections import deque

import torch


class History:
    """One row's repetition window: how often each (head, level) was committed in the last
    `window` frames (0 = all of them)."""

    def __init__(self, window: int, shape: torch.Size, device: torch.device):
        self.window = window
        self.counts = torch.zeros(shape, dtype=torch.int32, device=device)
        self._recent: deque[torch.Tensor] = deque()
        self._heads = torch.arange(shape[0], device=device)

    def add(self, codes: torch.Tensor) -> None:
        """Commit one frame's (32,) codes; the frame that falls out of the window leaves."""
        codes = codes.to(self.counts.device)
        self.counts[self._heads, codes] += 1
        if self.window > 0:
            self._recent.append(codes)
            if len(self._recent) > self.window:
                self.counts[self._heads, self._recent.popleft()] -= 1

    def recent(self) -> list[torch.Tensor]:
        """The window's frames, oldest first (the last `window` committed; all of them when 0)."""
        return list(self._recent)

    def seen(self) -> torch.Tensor:
        return self.counts > 0


def penalize(logits: torch.Tensor, seen: torch.Tensor, penalty: torch.Tensor) -> torch.Tensor:
    """(N, heads, levels) fp32 logits with every seen code's logit divided by its row's penalty
    when positive and multiplied by it when not (the runner's `_sample_head_logits`); the rest
    unchanged. seen: (N, heads, levels) bool; penalty: (N,)."""
    p = penalty.view(-1, 1, 1).to(logits.dtype)
    return torch.where(seen, torch.where(logits > 0, logits / p, logits * p), logits)
