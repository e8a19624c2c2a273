"""Newcomers into a shape's free slots: each prefilled row's keys and values into its slot's first
columns, and its tables (where it is, what it is fed, its settings, its penalty window)."""

from __future__ import annotations

import torch
from transformers.cache_utils import DynamicLayer

from gepard_demo.model.batch import BatchRequest, Prefilled, keep_history
from gepard_demo.model.cache_rows import layer_kv
from gepard_demo.model.sampling import RowSampler

from .shapes import Shape
from .slots import Tables


def place(shape: Shape, free: list[int], done: Prefilled, requests: dict[int, BatchRequest]) -> dict[tuple[int, bool], int]:
    """Put `done`'s rows (a group prefilled together, model/batch.prefill) into the `free` slots,
    in order; returns each row's slot by (handle, is the guidance row)."""
    slot_of = {row: free[k] for k, row in enumerate(done.rows)}
    t, width = shape.tables, done.mask.shape[1]
    kv = [layer_kv(layer) for layer in done.cache.layers if isinstance(layer, DynamicLayer) and layer.is_initialized]
    for r, row in enumerate(done.rows):
        shape.cache.load_row(slot_of[row], [keys[r] for keys, _ in kv], [values[r] for _, values in kv])
    cond = [not unc for _, unc in done.rows]
    samplers = [requests[h].sampler for h, _ in done.rows]
    for h, unc in done.rows:
        if not unc:  # the window of frames it goes on from (the growing loop keeps the same one)
            keep_history(requests[h], t.counts.shape[1:], t.counts.device)
    slots = torch.tensor([slot_of[row] for row in done.rows], device=t.active.device)
    valid = torch.zeros(len(done.rows), t.valid.shape[1], dtype=torch.bool, device=t.valid.device)
    valid[:, :width] = done.mask.bool()
    heads = t.codes.shape[1]
    replays = [requests[h].replay for h, _ in done.rows]
    last = [torch.zeros(heads, dtype=torch.long) if replay is None else replay[-1] for replay in replays]
    guide_slot = {h: slot_of.get((h, True)) for h, _ in done.rows}
    state = {
        "active": [True] * len(cond), "cond": cond, "fresh": [True] * len(cond), "pos": done.last_pos + 1,
        "column": [width] * len(cond), "valid": valid, "codes": torch.stack(last), "hidden": done.hidden,
        "committed": [done.replayed] * len(cond),
        "feed": [slot_of[(h, False)] for h, _ in done.rows],
        "partner": [slot_of[(h, unc)] if unc or guide_slot[h] is None else guide_slot[h] for h, unc in done.rows],
        "guided": [c and guide_slot[h] is not None for c, (h, _) in zip(cond, done.rows)],
    }
    for name, value in state.items():
        target = getattr(t, name)
        target[slots] = torch.as_tensor(value).to(device=target.device, dtype=target.dtype)
    t.rows.fill(slots, samplers, cond)
    for slot, sampler, c in zip(slots.tolist(), samplers, cond):
        if c:
            _load_history(t, slot, sampler, done.replayed)
    return slot_of


def _load_history(t: Tables, slot: int, sampler: RowSampler, committed: int) -> None:
    """A penalized row's window (model/guards/penalty.History) into its slot's counts and ring: frame n
    sits at n % window, where the step's own bookkeeping puts it."""
    history = sampler.history
    if history is None:
        return
    t.counts[slot] = history.counts.to(t.counts.device)
    recent = history.recent()
    for i, codes in enumerate(recent):
        t.recent[slot, (committed - len(recent) + i) % history.window] = codes.to(t.recent.device)
