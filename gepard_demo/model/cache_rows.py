"""Row surgery on transformers' DynamicCache, so requests can join and leave a running batch.

A batch's cache holds one row per sequence. Full-attention layers keep keys and values of shape
(rows, heads, T, head_dim), every row left-padded to the same T (the padding is masked out);
Gated-DeltaNet layers keep per-row conv and recurrent states with no time axis. So:

- a newcomer prefilled in a cache of its own joins by left-padding whichever side is shorter
  (zero keys and values at masked positions change nothing a row attends to) and concatenating
  rows; its linear-attention states are its own prefill's, exactly as in a solo run;
- `select_rows` (transformers' reorder_cache, an index_select on every layer kind) drops rows;
- `trim_left` drops padding columns no row uses any more, so a row left alone gets the very
  cache (and the mask-free step) of a solo run.
"""

from __future__ import annotations

from typing import cast

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer, LinearAttentionCacheLayerMixin


def _attention_layers(cache: DynamicCache) -> list[DynamicLayer]:
    return [layer for layer in cache.layers if isinstance(layer, DynamicLayer) and layer.is_initialized]


def _linear_layers(cache: DynamicCache) -> list[LinearAttentionCacheLayerMixin]:
    return [layer for layer in cache.layers if isinstance(layer, LinearAttentionCacheLayerMixin)]


def layer_kv(layer: object) -> tuple[torch.Tensor, torch.Tensor]:
    """An initialised full-attention layer's keys and values (transformers types them Optional until
    a layer's first update; every layer these functions touch has had it)."""
    assert isinstance(layer, DynamicLayer) and layer.keys is not None and layer.values is not None
    return layer.keys, layer.values


def _states(states: dict[int, torch.Tensor | None], i: int) -> torch.Tensor:
    state = states[i]
    assert state is not None, "an initialised linear-attention state"
    return state


def left_pad(cache: DynamicCache, columns: int) -> None:
    """Add `columns` zero key/value columns on the left of every full-attention layer."""
    if columns <= 0:
        return
    for layer in _attention_layers(cache):
        keys, values = layer_kv(layer)
        layer.keys = torch.nn.functional.pad(keys, (0, 0, columns, 0))
        layer.values = torch.nn.functional.pad(values, (0, 0, columns, 0))


def trim_left(cache: DynamicCache, columns: int) -> None:
    """Drop the first `columns` key/value columns of every full-attention layer."""
    if columns <= 0:
        return
    for layer in _attention_layers(cache):
        keys, values = layer_kv(layer)
        layer.keys = keys[..., columns:, :].contiguous()
        layer.values = values[..., columns:, :].contiguous()


def append_rows(cache: DynamicCache, other: DynamicCache) -> None:
    """Append `other`'s rows after `cache`'s, layer by layer (both already padded to one T)."""
    if len(cache.layers) != len(other.layers):
        raise ValueError(f"caches of {len(cache.layers)} and {len(other.layers)} layers cannot be merged")
    for mine, theirs in zip(cache.layers, other.layers):
        if isinstance(mine, DynamicLayer) and mine.is_initialized:
            (keys, values), (their_keys, their_values) = layer_kv(mine), layer_kv(theirs)
            mine.keys = torch.cat([keys, their_keys], dim=0)
            mine.values = torch.cat([values, their_values], dim=0)
        if isinstance(mine, LinearAttentionCacheLayerMixin):
            assert isinstance(theirs, LinearAttentionCacheLayerMixin)  # one model's caches: the same layer kinds
            for i in range(mine.number_of_states):
                if mine.is_conv_states_initialized[i]:
                    mine.conv_states[i] = torch.cat([_states(mine.conv_states, i), _states(theirs.conv_states, i)],
                                                    dim=0)
                if mine.is_recurrent_states_initialized[i]:
                    mine.recurrent_states[i] = torch.cat(
                        [_states(mine.recurrent_states, i), _states(theirs.recurrent_states, i)], dim=0)


def select_rows(cache: DynamicCache, index: torch.Tensor) -> None:
    """Keep only the rows in `index`, in that order."""
    cache.reorder_cache(cast(torch.LongTensor, index))  # LongTensor: a type-only name for an int64 tensor
