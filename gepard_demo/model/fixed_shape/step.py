"""One decode step at a fixed shape, with no host sync: the body a CUDA graph captures.

    frame fed back -> backbone (one position per slot) -> heads -> guidance -> penalty -> top-k
    -> temperature + Gumbel noise -> argmax -> the stop, the budget, the force stop -> bookkeeping

Everything it reads and writes lives in device buffers (slots.Tables, slots.SlotCache, Outputs),
so a replay of a captured graph does exactly what a call does. It does what model/batch.py's
`sample` then `advance` do, in the other order (the backbone step for the last frame first, then
the sample from it), and with per-row tensors where `sample` has per-row Python: the arithmetic
on each row is the same, op for op, so a seeded row makes the same frames in both loops.

A slot whose hidden state is its prefill's (`fresh`) samples from it without a backbone step; its
backbone work this step goes to the scratch column and is dropped (slots.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gepard_demo.model.guards.ending import BUDGET, FORCE_STOP, STOP
from gepard_demo.model.guards.probe import belief
from gepard_demo.model.talker import GepardTalker

from .row_settings import guide, sample
from .slots import SlotCache, Tables

# How a row ended at a step, as a number the device writes (0: it did not).
ENDS = (None, STOP, BUDGET, FORCE_STOP)
_STOP, _BUDGET, _FORCE = (ENDS.index(e) for e in (STOP, BUDGET, FORCE_STOP))


@dataclass
class Outputs:
    """What a step hands the host, per slot: ints (rows, heads + 2): the sampled codes, the step's
    frame index (frames committed before it), the end (ENDS' index); floats (rows, 3): p_stop,
    the probe's entropy and the committed frame's NLL."""

    ints: torch.Tensor
    floats: torch.Tensor

    @classmethod
    def empty(cls, rows: int, heads: int, device: torch.device) -> "Outputs":
        return cls(torch.zeros(rows, heads + 2, dtype=torch.long, device=device),
                   torch.zeros(rows, 3, dtype=torch.float32, device=device))


def run_step(talker: GepardTalker, t: Tables, cache: SlotCache, out: Outputs) -> None:
    """One step of every slot (module docstring). Capture-safe: no host reads, no allocation
    whose shape depends on the data."""
    rows, r = t.active.shape[0], t.rows
    scratch = t.valid.shape[1] - 1
    steps = t.active & ~t.fresh  # the slots that feed a frame through the backbone this step
    write = torch.where(steps, t.column, scratch)
    cache.write_column.copy_(write)
    t.valid.scatter_(1, write.unsqueeze(1), torch.ones(rows, 1, dtype=torch.bool, device=write.device))
    t.valid[:, scratch] = ~t.active
    fed = t.codes[t.feed]
    embeds = talker.embed_frame(fed).unsqueeze(1)
    mask = {"full_attention": t.valid[:, None, None, :]}
    stepped = talker.backbone(embeds, attention_mask=mask, position_ids=t.pos.unsqueeze(1), past_key_values=cache)
    hidden = torch.where(steps.unsqueeze(1), stepped, t.hidden)
    t.hidden.copy_(hidden)
    t.pos.add_(steps.long())
    t.column.add_(steps.long())
    t.fresh.zero_()

    logits, p_stop = talker.head_logits(hidden)
    logits = guide(logits, t.partner, t.guided, r)
    codes = sample(logits, r, t.counts, t.uniform)
    entropy, nll = belief(logits, codes)  # the guided, unpenalized logits: the model's belief

    live = t.active & t.cond
    before = t.committed.clone()
    stop = live & (before > 0) & (p_stop > r.threshold)
    commit = live & ~stop
    committed = before + commit.long()
    budget = commit & (committed >= r.max_frames)
    force = commit & ~budget & (committed >= r.force_at)
    end = torch.where(stop, _STOP, torch.where(budget, _BUDGET, torch.where(force, _FORCE, 0)))
    _remember(t, codes, commit, before)
    t.committed.copy_(committed)
    t.codes.copy_(torch.where(commit.unsqueeze(1), codes, t.codes))
    t.active.copy_(t.active & ~(stop | budget | force))
    # Guidance ends once its frames are made (or its request ended): the guidance row stops too.
    t.guided.copy_(t.guided & t.active & (committed < r.cfg_frames))
    t.active.copy_(torch.where(t.cond, t.active, t.guided[t.feed]))

    out.ints[:, :-2].copy_(codes)
    out.ints[:, -2].copy_(before)
    out.ints[:, -1].copy_(end)
    out.floats.copy_(torch.stack([p_stop, entropy, nll], dim=1))


def _remember(t: Tables, codes: torch.Tensor, commit: torch.Tensor, before: torch.Tensor) -> None:
    """A penalized row's window takes the frame it commits; the frame it pushes out leaves
    (model/guards/penalty.History, as counts and a ring per slot)."""
    r = t.rows
    add = commit & r.penalized
    windowed = r.window > 0
    at = torch.where(windowed, before % r.window.clamp_min(1), 0)
    ring_at = at.view(-1, 1, 1).expand(-1, 1, codes.shape[1])
    old = t.recent.gather(1, ring_at).squeeze(1)
    evict = add & windowed & (before >= r.window)
    t.counts.scatter_add_(2, codes.unsqueeze(-1), add.int().view(-1, 1, 1).expand(-1, codes.shape[1], 1))
    t.counts.scatter_add_(2, old.unsqueeze(-1), -evict.int().view(-1, 1, 1).expand(-1, codes.shape[1], 1))
    t.recent.scatter_(1, ring_at, torch.where((add & windowed).unsqueeze(1), codes, old).unsqueeze(1))
