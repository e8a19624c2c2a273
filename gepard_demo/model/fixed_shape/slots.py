"""The fixed-shape step's memory: a KV cache of `rows` x `columns` slots allocated once, and the
per-row tables a step reads, all on the device.

A row owns a slot (one batch row) from its admission to its end; newcomers take free slots and a
row that ends frees its slot, so nothing is reallocated while the shapes hold. Each slot writes its
next key and value at its own column (`column`); `valid` says which columns it attends to. Keys
carry their position in their rotary phase, so which column a key sits in changes nothing: a
left-padded prefill copies in as it is, its padding columns left invalid.

Column `columns` (one past the last) is the scratch column: a slot that computes no new position
this step (a newcomer whose hidden state comes from its prefill, a free slot) writes there, and a
free slot attends only to it, so every row of the fixed shape computes finite numbers and no
row's real columns are touched by another's work.

`SlotCache` is what the backbone's attention layers see as `past_key_values`: transformers calls
`update(key, value, layer)` once per full-attention layer and attends over what it returns.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from .row_settings import RowSettings


@dataclass
class Tables:
    """Per-slot state, shape (rows,) unless noted, and each slot's settings (`rows`). Written
    between steps (admission, release, cancel), read and advanced by the step itself."""

    active: torch.Tensor  # bool: the slot holds a live row (conditional or guidance)
    cond: torch.Tensor  # bool: a conditional row (it samples and commits); False: a guidance row
    fresh: torch.Tensor  # bool: its hidden state is its prefill's; the next step samples from it
    pos: torch.Tensor  # long: the position of the next frame fed
    column: torch.Tensor  # long: where the next key and value go
    valid: torch.Tensor  # (rows, columns + 1) bool: the columns the slot attends to
    codes: torch.Tensor  # (rows, heads) long: the last frame committed (fed next)
    feed: torch.Tensor  # long: the slot whose frame this slot is fed (itself; a guidance row: its request's)
    hidden: torch.Tensor  # (rows, hidden) fp32: what the next sample reads
    committed: torch.Tensor  # long: frames committed
    partner: torch.Tensor  # long: a guided conditional row's guidance slot (itself when unguided)
    guided: torch.Tensor  # bool: guidance mixes into this conditional row's logits now
    counts: torch.Tensor  # (rows, heads, levels) int32: codes committed in the penalty's window
    recent: torch.Tensor  # (rows, window_cap, heads) long: the window's frames, a ring per slot
    uniform: torch.Tensor  # (rows, heads, levels) fp32: this step's noise draws, before Gumbel
    rows: RowSettings

    @classmethod
    def empty(cls, rows: int, columns: int, heads: int, levels: int, hidden: int, window_cap: int,
              device: torch.device) -> "Tables":
        shapes = {"valid": (rows, columns + 1), "codes": (rows, heads), "hidden": (rows, hidden),
                  "counts": (rows, heads, levels), "recent": (rows, window_cap, heads), "uniform": (rows, heads, levels)}
        dtypes = {"active": torch.bool, "cond": torch.bool, "fresh": torch.bool, "valid": torch.bool,
                  "guided": torch.bool, "counts": torch.int32, "hidden": torch.float32, "uniform": torch.float32}
        t = cls(**{f.name: torch.zeros(shapes.get(f.name, (rows,)), dtype=dtypes.get(f.name, torch.long), device=device)
                   for f in fields(cls) if f.name != "rows"}, rows=RowSettings.empty(rows, device))
        t.reset()
        return t

    def tensors(self) -> dict[str, torch.Tensor]:
        state = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "rows"}
        return state | {f"rows.{k}": v for k, v in zip((f.name for f in fields(RowSettings)), self.rows.tensors())}

    def reset(self) -> None:
        """Every slot free: the state a shape is captured in and goes back to (a free slot's step
        changes nothing but the scratch column)."""
        for value in self.tensors().values():
            value.zero_()
        self.rows.reset()
        self.feed.copy_(torch.arange(self.feed.shape[0], device=self.feed.device))
        self.partner.copy_(self.feed)
        self.uniform.fill_(0.5)
        self.valid[:, -1] = True  # a free slot attends to the scratch column only

    def free(self, slots: torch.Tensor) -> None:
        """Those slots hold no row any more: inactive, unguided, unpenalized, attending to the scratch column."""
        self.active[slots] = False
        self.guided[slots] = False
        self.rows.penalized[slots] = False
        self.valid[slots] = False
        self.valid[slots, -1] = True

    def copy_rows_into(self, other: "Tables", rows: int) -> None:
        """Slots [0, rows) into `other`, a bigger shape (more slots, columns or window)."""
        theirs = other.tensors()
        for name, mine in self.tensors().items():
            index = tuple(slice(0, min(a, b)) for a, b in zip(mine.shape[1:], theirs[name].shape[1:]))
            theirs[name][(slice(0, rows), *index)] = mine[(slice(0, rows), *index)]
        # The scratch column moved: the old one is a real column of the bigger table, never valid.
        old, new = self.valid.shape[1] - 1, other.valid.shape[1] - 1
        if new != old:
            other.valid[:rows, old] = False
            other.valid[:rows, new] = ~self.active[:rows]


class SlotCache:
    """Per full-attention layer, keys and values of (rows, kv_heads, columns + 1, head_dim) at the
    backbone's dtype. `write_column` (rows,) is set by the step before the backbone runs."""

    def __init__(self, layers: int, rows: int, kv_heads: int, columns: int, head_dim: int, dtype: torch.dtype,
                 device: torch.device):
        shape = (rows, kv_heads, columns + 1, head_dim)
        self.keys = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)]
        self.values = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)]
        self.write_column = torch.zeros(rows, dtype=torch.long, device=device)

    @property
    def rows(self) -> int:
        return self.keys[0].shape[0]

    @property
    def columns(self) -> int:
        """Real columns (the scratch column not counted)."""
        return self.keys[0].shape[2] - 1

    def update(self, key: torch.Tensor, value: torch.Tensor, layer_idx: int, *args, **kwargs):
        """One step's (rows, kv_heads, 1, head_dim) key and value into each slot's write column;
        returns the whole buffers to attend over (the step's mask says which columns count)."""
        index = self.write_column.view(-1, 1, 1, 1).expand(-1, key.shape[1], 1, key.shape[3])
        self.keys[layer_idx].scatter_(2, index, key.to(self.keys[layer_idx].dtype))
        self.values[layer_idx].scatter_(2, index, value.to(self.values[layer_idx].dtype))
        return self.keys[layer_idx], self.values[layer_idx]

    def load_row(self, slot: int, layer_keys: list[torch.Tensor], layer_values: list[torch.Tensor]) -> None:
        """A prefilled row's (kv_heads, T, head_dim) keys and values into columns [0, T) of `slot`."""
        for mine_k, mine_v, k, v in zip(self.keys, self.values, layer_keys, layer_values, strict=True):
            mine_k[slot, :, : k.shape[1]] = k
            mine_v[slot, :, : v.shape[1]] = v

    def copy_rows_into(self, other: "SlotCache", rows: int) -> None:
        """Slots [0, rows) and their real columns into `other`, a bigger shape."""
        width = self.columns
        for a, b in zip(self.keys + self.values, other.keys + other.values, strict=True):
            b[:rows, :, :width] = a[:rows, :, :width]
